// Command reconcile-hook lets a reconcile hook settle ambiguous charges by asking the
// processor, instead of waiting for a person.
//
// Two invoices are charged and both replies are lost, so both effects are recorded
// ambiguous. The processor made the first charge; the second request died before the
// processor acted. The charge function is protected with a reconcile hook that looks the
// charge up on the processor by the effect's idempotency token (a read: a hook only looks,
// never acts). When the worker retries, latch asks the hook before reserving the key: for the
// first invoice the processor has the charge, so the effect is resolved committed and the
// retry is refused with the charge's id — not charged again; for the second it has none, so
// the effect is resolved not executed and the retry runs. Each invoice is charged once.
//
// Unguarded (LATCH_EXAMPLE_UNGUARDED=1) the worker retries both without asking: the first
// invoice is charged twice and the recipe exits 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    arguments:
      invoice_id: { type: string }
      amount: { type: integer, min: 1 }
    decision: allow
`

// Charge is the worker's task.
type Charge struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
}

// processor is the fake: charges by idempotency key; lose says what happens to the next
// request of an invoice: "reply" (charged, reply lost) or "request" (never processed).
type processor struct {
	mu      sync.Mutex
	byKey   map[string]string
	charged map[string]int
	lose    map[string]string
}

func (p *processor) charge(ctx context.Context, c Charge) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lose := p.lose[c.InvoiceID]
	delete(p.lose, c.InvoiceID)
	if lose == "request" {
		return "", fmt.Errorf("POST /v1/charges: connection reset after the request was written")
	}
	id := fmt.Sprintf("ch_%s_%d", c.InvoiceID, p.charged[c.InvoiceID]+1)
	p.charged[c.InvoiceID]++
	p.byKey[latch.EffectToken(ctx)] = id
	if lose == "reply" {
		return "", fmt.Errorf("POST /v1/charges: %w", context.DeadlineExceeded)
	}
	return id, nil
}

// lookup is the read the hook makes: GET /v1/charges?idempotency_key=….
func (p *processor) lookup(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.byKey[key]
	return id, ok
}

func main() {
	recipe.Run("reconcile-hook", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		proc := &processor{byKey: map[string]string{}, charged: map[string]int{}, lose: map[string]string{"inv_1": "reply", "inv_2": "request"}}
		tokens := map[string]string{} // effect key → the token its attempts sent
		asked := 0
		hook := latch.Reconciler(func(ctx context.Context, a *latch.Attempt, c Charge) (latch.Outcome, string, error) {
			asked++
			if id, ok := proc.lookup(tokens[a.EffectKey]); ok {
				return latch.OutcomeCommitted, id, nil
			}
			return latch.OutcomeNotExecuted, "", nil
		})
		charge := latch.Protect(k.Guard, "billing.charge", func(ctx context.Context, c Charge) (string, error) {
			tokens["charge:"+c.InvoiceID] = latch.EffectToken(ctx)
			return proc.charge(ctx, c)
		}, &latch.Options{Reconcile: hook})
		if err := k.Guard.Check(); err != nil {
			return err
		}
		if k.Unguarded {
			charge = proc.charge
		}
		ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "billing-worker"})
		invoices := []Charge{{"inv_1", 1500}, {"inv_2", 2500}}
		for _, c := range invoices {
			_, err := charge(ctx, c)
			k.Say("charge %s: %s", c.InvoiceID, recipe.Word(err, "charged"))
			k.Expect(k.Unguarded || errors.Is(err, latch.ErrAmbiguous), "charge %s = %v, want ambiguous", c.InvoiceID, err)
		}
		for _, c := range invoices {
			id, err := charge(ctx, c)
			if v, ok := latch.ResultOf[string](err); ok {
				id = v
			}
			k.Say("retry %s: %s (charge %s)", c.InvoiceID, recipe.Word(err, "charged"), id)
			want := map[string]string{"inv_1": string(latch.ReasonCommitted), "inv_2": ""}[c.InvoiceID]
			if !k.Unguarded {
				k.Expect(recipe.Reason(err) == want && err == nil == (want == ""), "retry %s = %v, want %q", c.InvoiceID, err, want)
				k.Expect(id == fmt.Sprintf("ch_%s_1", c.InvoiceID), "retry %s answers charge %q, want ch_%s_1", c.InvoiceID, id, c.InvoiceID)
			}
		}
		for _, c := range invoices {
			eff, err := k.Guard.Store().Effect(ctx, "charge:"+c.InvoiceID)
			if err == nil {
				k.Say("effect charge:%s: %s (resolved by %q)", c.InvoiceID, eff.State, eff.ResolvedBy)
			}
		}
		proc.mu.Lock()
		defer proc.mu.Unlock()
		k.Say("hook asked %d times; processor charges: inv_1 %d, inv_2 %d", asked, proc.charged["inv_1"], proc.charged["inv_2"])
		k.Expect(k.Unguarded || asked == 2, "the hook was asked %d times, want once per ambiguous effect", asked)
		k.Expect(proc.charged["inv_1"] == 1 && proc.charged["inv_2"] == 1, "charges inv_1 %d, inv_2 %d, want one each", proc.charged["inv_1"], proc.charged["inv_2"])
		return nil
	})
}
