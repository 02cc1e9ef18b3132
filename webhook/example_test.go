package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/webhook"
)

// A Stripe event delivered twice runs its effect once; the redelivery is answered with the
// stored result.
func Example() {
	dir, _ := os.MkdirTemp("", "latch-webhook-example")
	defer os.RemoveAll(dir)
	pol, err := policy.Parse("latch.yaml", []byte(`schema: latch.policy/v1
actions:
  orders.fulfil:
    effect: "fulfil:{event_id}"
    decision: allow
`))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(dir, "state.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()

	const secret = "whsec_example"
	verifier, err := webhook.Stripe(&webhook.StripeConfig{Secrets: []string{secret}})
	if err != nil {
		log.Fatal(err)
	}
	shipped := 0
	h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "orders.fulfil", Verifier: verifier},
		func(ctx context.Context, ev *webhook.Event) (any, error) {
			shipped++
			return map[string]string{"shipment": "shp_1"}, nil
		})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// What Stripe sends: the body, and t=<unix time>,v1=<HMAC-SHA256 of "t.body">.
	body := `{"id":"evt_1","type":"checkout.session.completed"}`
	for range 2 {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		m := hmac.New(sha256.New, []byte(secret))
		io.WriteString(m, ts+"."+body)
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(m.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s key=%s replayed=%q\n", resp.StatusCode, b, resp.Header.Get("Latch-Effect-Key"), resp.Header.Get("Latch-Replayed"))
	}
	fmt.Println("shipped:", shipped)
	// Output:
	// 200 {"shipment":"shp_1"} key=fulfil:evt_1 replayed=""
	// 200 {"shipment":"shp_1"} key=fulfil:evt_1 replayed="true"
	// shipped: 1
}
