// Command webhook shows a Stripe-style webhook receiver that ships an order per paid checkout,
// protected by latch, against a warehouse API that is sometimes down and once loses its reply.
//
// A "provider" on 127.0.0.1 signs and delivers events to the receiver, and redelivers each one
// as providers do when an answer is not 2xx (or is slow). The receiver verifies the
// Stripe-Signature header and runs the effect — a POST to the warehouse made with latchhttp —
// through a latch guard:
//
//   - evt_1: shipped; the redelivery is answered 200 from the stored result, not shipped again;
//   - evt_2: the warehouse is down (connection refused): nothing was sent, so the effect is
//     failed (500) and the redelivery ships it;
//   - evt_3: the warehouse ships, then the connection drops before its answer: the outcome is
//     unknown, the effect ambiguous (503 naming it), and the redelivery is refused without
//     calling the warehouse until someone runs `latch resolve`;
//   - a delivery with a bad signature is refused 401 and runs nothing.
//
// It exits 0 only if the warehouse shipped each order exactly once.
//
// Run it with: go run ./examples/webhook
package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/internal/examplestore"
	"github.com/latchkit/latch/latchhttp"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/webhook"
)

//go:embed latch.yaml
var policyYAML []byte

// secret is the endpoint's signing secret, shared by the provider and the receiver.
const secret = "whsec_example_not_a_real_secret"

// unguardedEnv makes the receiver run the effect on every delivery, without latch, so a test
// can show that the example's checks fail (exit 1) when nothing refuses a redelivery.
const unguardedEnv = "LATCH_EXAMPLE_UNGUARDED"

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "webhook:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	url, err := examplestore.Reset(ctx, "webhook")
	if err != nil {
		return err
	}
	pol, err := policy.Parse("latch.yaml", policyYAML)
	if err != nil {
		return err
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: url})
	if err != nil {
		return err
	}
	defer g.Close()

	wh := newWarehouse()
	defer wh.close()

	// The receiver: these few lines are what a user adds.
	verifier, err := webhook.Stripe(&webhook.StripeConfig{Secrets: []string{secret}})
	if err != nil {
		return err
	}
	ship := func(ctx context.Context, ev *webhook.Event) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, wh.url(), strings.NewReader(string(ev.Body)))
		if err != nil {
			return nil, latch.NotExecuted(err)
		}
		req.Header.Set("Idempotency-Key", latch.EffectToken(ctx)) // one key per order, every attempt
		resp, err := latchhttp.Do(req)                            // not sent: NotExecuted; no answer: unknown
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out struct {
			Shipment string `json:"shipment"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, fmt.Errorf("warehouse answer: %w", err) // it answered 2xx: it shipped
		}
		return out, nil
	}
	receiver, err := webhook.Handler(&webhook.Config{Guard: g, Action: "orders.ship", Verifier: verifier}, ship)
	if err != nil {
		return err
	}
	if os.Getenv(unguardedEnv) == "1" {
		receiver = unguarded(verifier, ship)
	}
	srv, addr, err := serve(receiver)
	if err != nil {
		return err
	}
	defer srv.Close()

	deliver := func(id, sig string) error {
		body := fmt.Sprintf(`{"id":%q,"type":"checkout.session.completed","data":{"object":{"order":"o_%s"}}}`, id, strings.TrimPrefix(id, "evt_"))
		if sig == "" {
			sig = sign(body, time.Now())
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/webhooks/stripe", strings.NewReader(body))
		req.Header.Set("Stripe-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 400))
		note := ""
		if resp.Header.Get("Latch-Replayed") == "true" {
			note = " (replayed from the stored result)"
		}
		fmt.Printf("  %s → %d%s %s\n", id, resp.StatusCode, note, strings.TrimSpace(string(b)))
		return nil
	}

	fmt.Println("evt_1: the warehouse ships; the provider redelivers")
	wh.set(answer)
	for range 2 {
		if err := deliver("evt_1", ""); err != nil {
			return err
		}
	}
	fmt.Println("evt_2: the warehouse is down, then up again")
	wh.set(down)
	if err := deliver("evt_2", ""); err != nil {
		return err
	}
	wh.set(answer)
	if err := deliver("evt_2", ""); err != nil {
		return err
	}
	fmt.Println("evt_3: the warehouse ships and the connection drops before its answer")
	wh.set(loseReply)
	if err := deliver("evt_3", ""); err != nil {
		return err
	}
	wh.set(answer)
	if err := deliver("evt_3", ""); err != nil {
		return err
	}
	fmt.Println("a forged delivery")
	if err := deliver("evt_4", "t=1,v1="+strings.Repeat("0", 64)); err != nil {
		return err
	}

	counts := wh.shipments()
	var parts []string
	for _, o := range []string{"o_1", "o_2", "o_3", "o_4"} {
		parts = append(parts, fmt.Sprintf("%s=%d", o, counts[o]))
	}
	fmt.Printf("\nwarehouse shipments: %s\n", strings.Join(parts, " "))
	if counts["o_1"] != 1 || counts["o_2"] != 1 || counts["o_3"] != 1 || counts["o_4"] != 0 {
		return errors.New("an order was shipped twice, or not at all")
	}
	fmt.Println("evt_3 stays ambiguous until someone checks the warehouse and runs: latch resolve ship:evt_3 --committed")
	return nil
}

// sign is what the provider does: t=<unix time>,v1=<hex HMAC-SHA256 of "t.body">.
func sign(body string, at time.Time) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	io.WriteString(m, ts+"."+body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

func serve(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/stripe", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, ln.Addr().String(), nil
}

// unguarded runs fn on every verified delivery, as a receiver without latch does.
func unguarded(v webhook.Verifier, fn webhook.Func) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev, err := v.Verify(r.Header, body, time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		ev.Body = body
		if _, err := fn(r.Context(), ev); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	})
}

type mode int

const (
	answer    mode = iota // ships and answers
	down                  // nothing listens
	loseReply             // ships, then drops the connection before answering
)

// warehouse is the downstream API: it counts the shipments it makes per order. It honours
// Idempotency-Key: a request repeating a key ships nothing more (a bare net/http client re-sends
// a request carrying that header when a reused connection fails before the answer; latchhttp,
// which the executor sends with, never does).
type warehouse struct {
	mu    sync.Mutex
	mode  mode
	count map[string]int
	keys  map[string]bool
	srv   *http.Server
	addr  string
	dead  string // an address where nothing listens
}

func newWarehouse() *warehouse {
	wh := &warehouse{count: map[string]int{}, keys: map[string]bool{}}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dl, _ := net.Listen("tcp", "127.0.0.1:0")
	wh.dead = dl.Addr().String()
	dl.Close()
	wh.addr = ln.Addr().String()
	wh.srv = &http.Server{Handler: http.HandlerFunc(wh.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	go wh.srv.Serve(ln)
	return wh
}

func (wh *warehouse) set(m mode) { wh.mu.Lock(); wh.mode = m; wh.mu.Unlock() }

func (wh *warehouse) url() string {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	if wh.mode == down {
		return "http://" + wh.dead + "/v1/shipments"
	}
	return "http://" + wh.addr + "/v1/shipments"
}

func (wh *warehouse) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var ev struct {
		Data struct {
			Object struct {
				Order string `json:"order"`
			} `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
		http.Error(w, "bad order", http.StatusBadRequest)
		return
	}
	wh.mu.Lock()
	key := r.Header.Get("Idempotency-Key")
	if key == "" || !wh.keys[key] {
		wh.count[ev.Data.Object.Order]++
		wh.keys[key] = key != ""
	}
	m := wh.mode
	wh.mu.Unlock()
	if m == loseReply {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close() // shipped, and the answer never leaves
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"shipment":"shp_%s"}`, ev.Data.Object.Order)
}

func (wh *warehouse) shipments() map[string]int {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	out := map[string]int{}
	keys := make([]string, 0, len(wh.count))
	for k := range wh.count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out[k] = wh.count[k]
	}
	return out
}

func (wh *warehouse) close() { wh.srv.Close() }
