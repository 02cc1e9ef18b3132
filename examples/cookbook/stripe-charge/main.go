// Command stripe-charge charges a card through a Stripe-style HTTP API whose reply is lost.
//
// The fake processor (an httptest server) honours Idempotency-Key headers and records every
// charge it makes. The executor sends latch.EffectToken as the key and calls the API through
// latchhttp, which tells a request that never left from one whose answer was lost. The first
// charge goes through but its reply times out: latch records it ambiguous, and the billing
// worker's two retries are refused before they reach the processor. An operator looks the
// charge up by its idempotency key on the processor, resolves the effect committed, and the
// next retry is refused as already committed.
//
// Unguarded (LATCH_EXAMPLE_UNGUARDED=1) the worker retries with a fresh key each time, as a
// naive client does, and the card is charged three times: the recipe exits 1.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
	"github.com/latchkit/latch/latchhttp"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    resource: "invoice:{invoice_id}"
    arguments:
      invoice_id: { type: string }
      amount: { type: integer, min: 1 }
      currency: { type: string, enum: [usd, eur] }
    rules:
      - when: { amount_lte: 100000 }
        decision: allow
      - decision: approve
`

// Charge is the billing worker's task.
type Charge struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
}

// processor is the fake Stripe: POST /v1/charges makes a charge per new Idempotency-Key and
// replays the first answer for a key it has seen; the first request's answer is held until
// the client has given up.
type processor struct {
	mu      sync.Mutex
	charges map[string]string // idempotency key → charge id
	made    int
	slow    bool
}

func (p *processor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	id, seen := p.charges[key]
	if !seen {
		p.made++
		id = fmt.Sprintf("ch_%d", p.made)
		p.charges[key] = id
	}
	slow := p.slow
	p.slow = false
	p.mu.Unlock()
	if slow {
		// The charge is made; the reply comes after the client has given up.
		select {
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

func main() {
	recipe.Run("stripe-charge", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		proc := &processor{charges: map[string]string{}, slow: true}
		srv := httptest.NewServer(proc)
		defer srv.Close()

		post := func(ctx context.Context, key string, c Charge) (string, error) {
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			body := fmt.Sprintf("amount=%d&currency=%s&metadata[invoice]=%s", c.Amount, c.Currency, c.InvoiceID)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/charges", strings.NewReader(body))
			if err != nil {
				return "", latch.NotExecuted(err)
			}
			req.Header.Set("Idempotency-Key", key)
			resp, err := latchhttp.Do(req)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			var out struct{ ID string }
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				return "", err
			}
			return out.ID, nil
		}
		var keys []string
		charge := latch.Protect(k.Guard, "billing.charge", func(ctx context.Context, c Charge) (string, error) {
			keys = append(keys, latch.EffectToken(ctx))
			return post(ctx, latch.EffectToken(ctx), c)
		}, nil)
		if err := k.Guard.Check(); err != nil {
			return err
		}
		if k.Unguarded {
			charge = func(ctx context.Context, c Charge) (string, error) {
				b := make([]byte, 8)
				_, _ = rand.Read(b)
				return post(ctx, hex.EncodeToString(b), c) // a new key per attempt
			}
		}
		ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "billing-worker"})
		inv := Charge{InvoiceID: "inv_1042", Amount: 4900, Currency: "usd"}

		var errs []error
		for attempt := 1; attempt <= 3; attempt++ {
			id, err := charge(ctx, inv)
			errs = append(errs, err)
			k.Say("attempt %d: %s", attempt, recipe.Word(err, "charged "+id))
		}
		if !k.Unguarded {
			// The operator finds the charge on the processor by the key latch sent, and says so.
			proc.mu.Lock()
			id, found := proc.charges[keys[0]]
			proc.mu.Unlock()
			k.Say("operator: the processor holds %s under idempotency key %s", id, keys[0])
			if found {
				if _, err := k.Guard.Resolve(ctx, "charge:inv_1042", "committed", "cli:alice"); err != nil {
					return err
				}
			}
			_, err := charge(ctx, inv)
			k.Say("retry after the resolution: %s", recipe.Reason(err))
			k.Expect(recipe.Reason(err) == string(latch.ReasonCommitted), "retry after resolving committed refused %q, want committed", recipe.Reason(err))
			k.Expect(len(keys) == 1, "the executor ran %d times, want 1", len(keys))
			k.Expect(errors.Is(errs[0], latch.ErrAmbiguous), "attempt 1 = %v, want ambiguous", errs[0])
			k.Expect(recipe.Reason(errs[1]) == string(latch.ReasonAmbiguous) && recipe.Reason(errs[2]) == string(latch.ReasonAmbiguous),
				"retries refused %q and %q, want ambiguous", recipe.Reason(errs[1]), recipe.Reason(errs[2]))
		}
		proc.mu.Lock()
		made := proc.made
		proc.mu.Unlock()
		k.Say("processor charges made: %d", made)
		k.Expect(made == 1, "the card was charged %d times, want once", made)
		return nil
	})
}
