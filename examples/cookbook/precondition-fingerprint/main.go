// Command precondition-fingerprint binds an approval to the state the approver saw.
//
// An agent asks to write off an overdue invoice; the policy puts write-offs before a person.
// When the request is stored, latch asks a precondition provider (here, a read of the fake
// billing system) for the invoice's state and keeps its fingerprint. Dana approves. Before the
// agent acts, the customer pays part of the invoice: the state differs, and the write-off is
// refused precondition_changed — the approval stays granted but unspent, and nothing is
// written off. The agent asks again on the new state, Dana approves that, and it runs once.
//
// Unguarded (LATCH_EXAMPLE_UNGUARDED=1) the write-off ignores the change: the recipe exits 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  billing.write_off:
    effect: "write-off:{invoice_id}:{amount}"
    resource: "invoice:{invoice_id}"
    arguments:
      invoice_id: { type: string }
      amount: { type: integer, min: 1 }
    decision: approve
`

// WriteOff is the agent's request.
type WriteOff struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
}

// Invoice is what the billing system says about an invoice.
type Invoice struct {
	Status string `json:"status"`
	Due    int64  `json:"due"`
}

// billing is the fake billing system.
type billing struct {
	mu        sync.Mutex
	invoices  map[string]Invoice
	writeOffs []WriteOff
}

func (b *billing) read(id string) Invoice {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.invoices[id]
}

func main() {
	recipe.Run("precondition-fingerprint", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		b := &billing{invoices: map[string]Invoice{"inv_77": {Status: "overdue", Due: 30000}}}
		state := func(ctx context.Context, req latch.PreconditionRequest) (any, error) {
			var w WriteOff
			if err := json.Unmarshal(req.Arguments, &w); err != nil {
				return nil, err
			}
			return b.read(w.InvoiceID), nil
		}
		writeOff := func(_ context.Context, w WriteOff) (string, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.writeOffs = append(b.writeOffs, w)
			return "written off", nil
		}
		do := latch.Protect(k.Guard, "billing.write_off", writeOff, &latch.Options{Precondition: state})
		if k.Unguarded {
			do = func(ctx context.Context, w WriteOff) (string, error) {
				if latch.ApprovalFrom(ctx) == "" {
					_, err := latch.Protect(k.Guard, "billing.write_off", writeOff, nil)(ctx, w)
					return "", err
				}
				return writeOff(ctx, w) // the approval is trusted whatever happened since
			}
		}
		agent := latch.WithPrincipal(ctx, latch.Principal{Agent: "collections-agent"})
		ask := func(w WriteOff) (string, error) {
			_, err := do(agent, w)
			var req *latch.ApprovalRequiredError
			if !errors.As(err, &req) {
				return "", fmt.Errorf("write-off %+v = %v, want approval_required", w, err)
			}
			if _, err := k.Guard.Approve(ctx, req.ApprovalID, "dana"); err != nil {
				return "", err
			}
			return req.ApprovalID, nil
		}
		first, err := ask(WriteOff{InvoiceID: "inv_77", Amount: 30000})
		if err != nil {
			return err
		}
		fp, _ := latch.PreconditionFingerprint(b.read("inv_77"))
		k.Say("agent asks to write off 300.00 of inv_77 (overdue, 300.00 due); dana approves %s on state %s", first, fp[:19])

		b.mu.Lock()
		b.invoices["inv_77"] = Invoice{Status: "partially_paid", Due: 10000}
		b.mu.Unlock()
		k.Say("the customer pays 200.00 of inv_77")

		_, err = do(latch.WithApproval(agent, first), WriteOff{InvoiceID: "inv_77", Amount: 30000})
		var pe *latch.PreconditionError
		if errors.As(err, &pe) {
			k.Say("agent writes off 300.00 under %s: %s (captured %s…, now %s…)", first, pe.Reason, pe.Captured[:19], pe.Current[:19])
		} else {
			k.Say("agent writes off 300.00 under %s: %s", first, recipe.Word(err, "written off"))
		}
		k.Expect(recipe.Reason(err) == string(latch.ReasonPreconditionChanged), "the stale write-off = %q, want precondition_changed", recipe.Reason(err))

		second, err := ask(WriteOff{InvoiceID: "inv_77", Amount: 10000})
		if err != nil {
			return err
		}
		_, err = do(latch.WithApproval(agent, second), WriteOff{InvoiceID: "inv_77", Amount: 10000})
		k.Say("agent asks again for the 100.00 still due; dana approves %s; write-off: %s", second, recipe.Word(err, "written off"))
		k.Expect(err == nil, "the write-off on the current state = %v, want it to run", err)

		b.mu.Lock()
		defer b.mu.Unlock()
		k.Say("write-offs made: %v", b.writeOffs)
		k.Expect(len(b.writeOffs) == 1 && b.writeOffs[0].Amount == 10000, "write-offs %v, want one of 10000", b.writeOffs)
		return nil
	})
}
