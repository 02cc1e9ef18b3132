// Command activity-retry runs a Temporal workflow whose charge activity loses its reply, and
// shows latch turning the RetryPolicy's next attempts into a refusal instead of a second charge.
//
// The workflow charges two invoices with a RetryPolicy of five attempts. The processor (an
// in-memory fake) charges inv_2 but the reply is lost: without latch, Temporal retries and the
// customer is charged again. With latchtemporal's interceptor on the worker, the lost reply
// ends the activity with a non-retryable LatchAmbiguous error naming the effect, and running
// the workflow again is refused without calling the processor. inv_1's duplicate run returns
// the stored result. The workflows run in the SDK's test environment: no Temporal server.
//
// It exits 0 only if each invoice was charged once. Unguarded (LATCH_EXAMPLE_UNGUARDED=1) the
// worker has no interceptor, inv_2 is charged twice, and it exits 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/latchkit/latch"
	latchtemporal "github.com/latchkit/latch/integrations/temporal"
	"github.com/latchkit/latch/policy"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    lease: 1m
    arguments:
      invoice_id: { type: string }
      amount: { type: integer, min: 1 }
    decision: allow
`

// Invoice is the activity's input: its JSON fields are the action's arguments.
type Invoice struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
}

// Billing holds the activity; it counts charges and loses the reply to inv_2's first one.
type Billing struct {
	mu      sync.Mutex
	charges map[string]int
}

// ChargeInvoice charges an invoice at the processor.
func (b *Billing) ChargeInvoice(_ context.Context, in Invoice) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.charges[in.InvoiceID]++
	if in.InvoiceID == "inv_2" && b.charges[in.InvoiceID] == 1 {
		return "", errors.New("read tcp 10.0.0.7:443: connection reset by peer") // charged; the reply never came
	}
	return "ch_" + in.InvoiceID, nil
}

// BillingWorkflow charges an invoice, letting Temporal retry the activity up to five times.
func BillingWorkflow(ctx workflow.Context, in Invoice) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var b *Billing
	var id string
	err := workflow.ExecuteActivity(ctx, b.ChargeInvoice, in).Get(ctx, &id)
	return id, err
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "activity-retry:", err)
		os.Exit(1)
	}
	fmt.Println("activity-retry: every check held")
}

func run() error {
	unguarded := os.Getenv("LATCH_EXAMPLE_UNGUARDED") == "1"
	dir, err := os.MkdirTemp("", "latch-cookbook-activity-retry-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pol, err := policy.Parse("latch.yaml", []byte(policyYAML))
	if err != nil {
		return err
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(dir, "state.db")})
	if err != nil {
		return err
	}
	defer g.Close()

	opts := worker.Options{DeadlockDetectionTimeout: time.Minute}
	if unguarded {
		fmt.Println("(LATCH_EXAMPLE_UNGUARDED=1: the worker runs without latch's interceptor)")
	} else {
		opts.Interceptors = []interceptor.WorkerInterceptor{latchtemporal.NewInterceptor(g, &latchtemporal.Config{
			Principal: latch.Principal{Agent: "billing-worker"},
			Actions:   map[string]string{"ChargeInvoice": "billing.charge"},
		})}
	}
	billing := &Billing{charges: map[string]int{}}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	reasons := []string{}
	charge := func(invoice string) {
		env := suite.NewTestWorkflowEnvironment()
		env.SetWorkerOptions(opts)
		env.RegisterWorkflow(BillingWorkflow)
		env.RegisterActivity(billing)
		env.ExecuteWorkflow(BillingWorkflow, Invoice{InvoiceID: invoice, Amount: 24900})
		var appErr *temporal.ApplicationError
		var d latchtemporal.Details
		switch err := env.GetWorkflowError(); {
		case err == nil:
			var id string
			_ = env.GetWorkflowResult(&id)
			fmt.Printf("workflow charging %s: %s\n", invoice, id)
			reasons = append(reasons, "")
		case errors.As(err, &appErr) && appErr.Details(&d) == nil:
			fmt.Printf("workflow charging %s: %s (%s, %s), retryable %v\n", invoice, appErr.Type(), d.Reason, d.EffectKey, !appErr.NonRetryable())
			reasons = append(reasons, d.Reason)
		default:
			fmt.Printf("workflow charging %s: %v\n", invoice, err)
			reasons = append(reasons, "error")
		}
	}
	charge("inv_1")
	charge("inv_1") // the same charge again: the stored result, not a second charge
	charge("inv_2") // the reply is lost: not retried, although the RetryPolicy allows five attempts
	charge("inv_2") // running it again is refused without calling the processor
	fmt.Printf("processor charges: inv_1=%d inv_2=%d\n", billing.charges["inv_1"], billing.charges["inv_2"])

	var failed []string
	if billing.charges["inv_1"] != 1 || billing.charges["inv_2"] != 1 {
		failed = append(failed, fmt.Sprintf("charges inv_1=%d inv_2=%d, want one each", billing.charges["inv_1"], billing.charges["inv_2"]))
	}
	if !unguarded && fmt.Sprint(reasons) != fmt.Sprint([]string{"", "", "outcome_unknown", "ambiguous"}) {
		failed = append(failed, fmt.Sprintf("reasons %q, want the lost reply outcome_unknown and the rerun ambiguous", reasons))
	}
	if len(failed) > 0 {
		return fmt.Errorf("check failed: %v", failed)
	}
	return nil
}
