// Command retried-task shows a task queue retrying a charge whose reply was lost.
//
// The processor commits the €249.00 charge of inv_88, then the reply times out. The queue is
// configured with max_retries=3 and does what it is told: it retries. Without latch the customer
// is charged three times. With latch the first attempt is recorded ambiguous and the retries are
// refused before they reach the processor, until a human (or a reconcile hook) says what happened.
//
// Run it with: go run ./examples/without-an-agent/retried-task
package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/internal/examplestore"
	"github.com/latchkit/latch/policy"
)

//go:embed latch.yaml
var policyYAML []byte

// unguardedEnv makes the example call the processor directly, without latch, so a test can
// show that its checks fail (exit 1) when nothing refuses the retries.
const unguardedEnv = "LATCH_EXAMPLE_UNGUARDED"

// Charge is the task's payload. Amounts are integer minor units: floats are refused.
type Charge struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
}

// processor stands in for the payment processor: it commits the charge, then the reply is lost.
type processor struct{ charges int }

func (p *processor) charge(ctx context.Context, c Charge) (string, error) {
	p.charges++ // the money moved
	return "", fmt.Errorf("POST /v1/charges (idempotency key %s): %w", latch.IdempotencyToken(ctx), context.DeadlineExceeded)
}

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "retried-task:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	storeURL, err := examplestore.Reset(ctx, "retried-task")
	if err != nil {
		return err
	}
	pol, err := policy.Parse("latch.yaml", policyYAML)
	if err != nil {
		return err
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: storeURL})
	if err != nil {
		return err
	}
	defer g.Close()

	proc := &processor{}
	charge := latch.Protect(g, "billing.charge", proc.charge, nil)
	if err := g.Check(); err != nil { // the policy and the Go type agree, or nothing starts
		return err
	}
	if os.Getenv(unguardedEnv) == "1" {
		charge = proc.charge // what the queue does without latch: the checks below must fail
	}
	ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "billing-worker"})
	task := Charge{InvoiceID: "inv_88", Amount: 24900, Currency: "EUR"}

	const maxRetries = 3
	var errs []error
	for attempt := 1; attempt <= maxRetries; attempt++ {
		_, err := charge(ctx, task)
		errs = append(errs, err)
		fmt.Printf("queue attempt %d: %v\n", attempt, err)
	}

	eff, err := g.Store().Effect(ctx, "charge:inv_88")
	if err != nil {
		return err
	}
	fmt.Printf("\neffect record: %s %s (attempt %d): %s\n", eff.Key, eff.State, eff.Attempt, eff.Error)
	fmt.Printf("processor charges: %d\n", proc.charges)
	fmt.Printf("\nA human checks the processor's dashboard, then runs one of:\n")
	fmt.Printf("  latch resolve charge:inv_88 --committed --as alice --store '%s'   # it was charged: retries stay refused\n", storeURL)
	fmt.Printf("  latch resolve charge:inv_88 --failed --as alice --store '%s'      # it was not: the next retry runs\n", storeURL)

	switch {
	case !errors.Is(errs[0], latch.ErrAmbiguous) || !errors.Is(errs[0], context.DeadlineExceeded):
		return fmt.Errorf("attempt 1 should be ambiguous and keep its cause, got %v", errs[0])
	case !errors.Is(errs[1], latch.ErrAmbiguousEffect) || !errors.Is(errs[2], latch.ErrAmbiguousEffect):
		return fmt.Errorf("retries should be refused as ambiguous, got %v and %v", errs[1], errs[2])
	case eff.State != "ambiguous":
		return fmt.Errorf("effect should be ambiguous, is %s", eff.State)
	case proc.charges != 1:
		return fmt.Errorf("the processor was called %d times", proc.charges)
	}
	return nil
}
