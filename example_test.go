package latch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

// exampleGuard opens a guard on a SQLite store in a fresh temporary directory.
func exampleGuard(doc string) (*latch.Guard, func()) {
	dir, err := os.MkdirTemp("", "latch-example-")
	if err != nil {
		panic(err)
	}
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		panic(err)
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(dir, "state.db")})
	if err != nil {
		panic(err)
	}
	return g, func() { g.Close(); os.RemoveAll(dir) }
}

const examplePolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
`

type Invoice struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
}

// Protect wraps the function that has a consequence. The first call charges; the retry of the
// same invoice is refused before it reaches the processor.
func ExampleProtect() {
	g, done := exampleGuard(examplePolicy)
	defer done()

	charges := 0
	charge := latch.Protect(g, "billing.charge", func(ctx context.Context, inv Invoice) (string, error) {
		charges++
		return "ch_" + inv.InvoiceID, nil
	}, nil)

	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})
	id, err := charge(ctx, Invoice{InvoiceID: "inv_88", Amount: 24900})
	fmt.Println(id, err)
	_, err = charge(ctx, Invoice{InvoiceID: "inv_88", Amount: 24900})
	fmt.Println(errors.Is(err, latch.ErrDuplicateEffect), "charges:", charges)
	// Output:
	// ch_inv_88 <nil>
	// true charges: 1
}

// A lost reply is not a failure: the effect is ambiguous and every retry is refused until
// someone resolves it.
func ExampleProtect_ambiguous() {
	g, done := exampleGuard(examplePolicy)
	defer done()

	charges := 0
	charge := latch.Protect(g, "billing.charge", func(ctx context.Context, inv Invoice) (string, error) {
		charges++
		return "", context.DeadlineExceeded // the charge went through; the reply did not
	}, nil)
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})
	_, err := charge(ctx, Invoice{InvoiceID: "inv_88", Amount: 24900})
	fmt.Println(errors.Is(err, latch.ErrAmbiguous), errors.Is(err, context.DeadlineExceeded))
	_, err = charge(ctx, Invoice{InvoiceID: "inv_88", Amount: 24900})
	fmt.Println(errors.Is(err, latch.ErrAmbiguousEffect), "charges:", charges)

	eff, _ := g.Resolve(context.Background(), "charge:inv_88", "committed", "cli:alice")
	fmt.Println(eff.State, eff.ResolvedBy)
	// Output:
	// true true
	// true charges: 1
	// committed cli:alice
}

// An approval is bound to the exact action the human saw: it pays €2,000 once and nothing else.
func ExampleWithApproval() {
	g, done := exampleGuard(examplePolicy)
	defer done()

	charge := latch.Protect(g, "billing.charge", func(ctx context.Context, inv Invoice) (string, error) {
		return fmt.Sprintf("charged %d", inv.Amount), nil
	}, nil)
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})

	_, err := charge(ctx, Invoice{InvoiceID: "inv_90", Amount: 200000})
	var req *latch.ApprovalRequiredError
	fmt.Println(errors.As(err, &req))

	if _, err := g.Approve(context.Background(), req.ApprovalID, "alice"); err != nil {
		panic(err)
	}
	approved := latch.WithApproval(ctx, req.ApprovalID)
	_, err = charge(approved, Invoice{InvoiceID: "inv_90", Amount: 500000})
	fmt.Println(err != nil && errors.Is(err, latch.ErrApprovalMismatch))
	out, err := charge(approved, Invoice{InvoiceID: "inv_90", Amount: 200000})
	fmt.Println(out, err)
	_, err = charge(approved, Invoice{InvoiceID: "inv_90", Amount: 200000})
	var mm *latch.ApprovalMismatchError
	fmt.Println(errors.As(err, &mm), mm.Reason)
	// Output:
	// true
	// true
	// charged 200000 <nil>
	// true consumed
}

// A scope provider says which resources a principal is assigned; a call on any other is
// refused before anything is reserved. Here the policy's static scopes give billing-worker the
// invoices of the EU desk.
func ExampleScopeFunc() {
	g, done := exampleGuard(`
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    resource: "invoice:{invoice_id}"
    decision: allow
scopes:
  static:
    billing-worker: ["invoice:EU-*"]
`)
	defer done()

	charge := latch.Protect(g, "billing.charge", func(ctx context.Context, inv Invoice) (string, error) {
		return "ch_" + inv.InvoiceID, nil
	}, nil)
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})
	fmt.Println(charge(ctx, Invoice{InvoiceID: "EU-1", Amount: 100}))
	_, err := charge(ctx, Invoice{InvoiceID: "US-1", Amount: 100})
	fmt.Println(latch.ReasonOf(err), errors.Is(err, latch.ErrScope))

	// A provider in code wins over the policy's section, for one call here.
	us := latch.Protect(g, "billing.charge", func(ctx context.Context, inv Invoice) (string, error) {
		return "ch_" + inv.InvoiceID, nil
	}, &latch.Options{Scope: func(ctx context.Context, req latch.ScopeRequest) (latch.Scope, error) {
		return latch.Scope{Resources: []string{"invoice:US-*"}}, nil
	}})
	fmt.Println(us(ctx, Invoice{InvoiceID: "US-1", Amount: 100}))
	// Output:
	// ch_EU-1 <nil>
	// out_of_scope true
	// ch_US-1 <nil>
}
