// Command webhook-fanout receives a signed "order paid" webhook and fans it out to three
// effects — ship the order, email the receipt, post to the ledger — each at most once, however
// often the sender re-delivers.
//
// The receiver is package webhook's handler (GitHub-style X-Hub-Signature-256) on an httptest
// server. Its function calls three protected functions, each with its own effect key derived
// from the delivery id. On the first delivery the ledger is down before anything is sent
// (latch.NotExecuted): shipping and the email are done, the ledger is not, and the sender is
// answered 500. The sender re-delivers: shipping and the email are refused as already
// committed — they are not done again — and the ledger posts. A third, duplicate delivery is
// answered from the stored result without running anything. A delivery with a bad signature
// is refused 401.
//
// Unguarded (LATCH_EXAMPLE_UNGUARDED=1) every delivery runs every effect: two shipments and
// two emails; the recipe exits 1.
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
	"github.com/latchkit/latch/webhook"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  orders.paid:
    effect: "github:{event_id}"
    arguments:
      event_id: { type: string }
      event_type: { type: string }
    decision: allow
  orders.ship:
    effect: "ship:{event_id}"
    arguments:
      event_id: { type: string }
    decision: allow
  orders.email_receipt:
    effect: "receipt-email:{event_id}"
    arguments:
      event_id: { type: string }
    decision: allow
  ledger.post:
    effect: "ledger:{event_id}"
    arguments:
      event_id: { type: string }
    decision: allow
`

const secret = "whsec_cookbook"

// Step is what each fanned-out effect is called with.
type Step struct {
	EventID string `json:"event_id"`
}

// downstream counts what each downstream service did.
type downstream struct {
	mu         sync.Mutex
	done       map[string]int
	ledgerDown bool
}

func (d *downstream) do(name string) func(context.Context, Step) (string, error) {
	return func(_ context.Context, s Step) (string, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if name == "ledger" && d.ledgerDown {
			d.ledgerDown = false
			return "", latch.NotExecuted(errors.New("ledger: connection refused"))
		}
		d.done[name]++
		return name + " done for " + s.EventID, nil
	}
}

func main() {
	recipe.Run("webhook-fanout", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		d := &downstream{done: map[string]int{}, ledgerDown: true}
		steps := []struct {
			name string
			fn   func(context.Context, Step) (string, error)
		}{
			{"ship", latch.Protect(k.Guard, "orders.ship", d.do("ship"), nil)},
			{"email", latch.Protect(k.Guard, "orders.email_receipt", d.do("email"), nil)},
			{"ledger", latch.Protect(k.Guard, "ledger.post", d.do("ledger"), nil)},
		}
		if k.Unguarded {
			for i := range steps {
				steps[i].fn = d.do(steps[i].name)
			}
		}
		fanOut := func(ctx context.Context, ev *webhook.Event) (any, error) {
			for _, s := range steps {
				_, err := s.fn(ctx, Step{EventID: ev.ID})
				switch {
				case errors.Is(err, latch.ErrAlreadyCommitted):
					k.Say("  %s: already done (%s), skipped", s.name, recipe.Reason(err))
				case err != nil:
					k.Say("  %s: %s", s.name, recipe.Word(err, ""))
					return nil, err // not executed: the sender's re-delivery runs the rest
				default:
					k.Say("  %s: done", s.name)
				}
			}
			return "fanned out", nil
		}
		verifier, err := webhook.GitHub(&webhook.GitHubConfig{Secrets: []string{secret}})
		if err != nil {
			return err
		}
		h, err := webhook.Handler(&webhook.Config{Guard: k.Guard, Action: "orders.paid", Verifier: verifier}, fanOut)
		if err != nil {
			return err
		}
		if k.Unguarded {
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if _, err := fanOut(r.Context(), &webhook.Event{ID: r.Header.Get("X-GitHub-Delivery"), Body: body}); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
				}
			})
		}
		srv := httptest.NewServer(h)
		defer srv.Close()

		body := []byte(`{"action":"paid","order":{"id":"ord_9001","total":12900}}`)
		deliver := func(sig string) int {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
			req.Header.Set("X-GitHub-Delivery", "d7f3c9a0-order-paid")
			req.Header.Set("X-GitHub-Event", "order_paid")
			req.Header.Set("X-Hub-Signature-256", sig)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				k.Expect(false, "deliver: %v", err)
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		good := "sha256=" + hex.EncodeToString(mac.Sum(nil))

		var codes []int
		for n := 1; n <= 3; n++ {
			k.Say("delivery %d:", n)
			codes = append(codes, deliver(good))
			k.Say("  → %d", codes[n-1])
		}
		forged := deliver("sha256=" + hex.EncodeToString(make([]byte, 32)))
		k.Say("a forged delivery → %d", forged)
		d.mu.Lock()
		defer d.mu.Unlock()
		k.Say("downstream: shipments %d, receipt emails %d, ledger posts %d", d.done["ship"], d.done["email"], d.done["ledger"])
		for _, name := range []string{"ship", "email", "ledger"} {
			k.Expect(d.done[name] == 1, "%s ran %d times, want once", name, d.done[name])
		}
		if !k.Unguarded {
			k.Expect(fmt.Sprint(codes) == "[500 200 200]", "deliveries were answered %v, want [500 200 200]", codes)
			k.Expect(forged == http.StatusUnauthorized, "the forged delivery was answered %d, want 401", forged)
		}
		return nil
	})
}
