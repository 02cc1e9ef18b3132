package latchtemporal_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/latchkit/latch"
	latchtemporal "github.com/latchkit/latch/integrations/temporal"
	"github.com/latchkit/latch/policy"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Invoice is the activity's input: its JSON fields are the action's arguments.
type Invoice struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
}

// Billing holds the activities; processor stands in for a payment processor that counts charges
// and loses the reply to the first charge of inv_2.
type Billing struct {
	mu      sync.Mutex
	charges map[string]int
}

func (b *Billing) ChargeInvoice(ctx context.Context, in Invoice) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.charges[in.InvoiceID]++
	if in.InvoiceID == "inv_2" && b.charges[in.InvoiceID] == 1 {
		return "", errors.New("read tcp: connection reset by peer") // charged, but the reply never came
	}
	return "ch_" + in.InvoiceID, nil
}

// BillingWorkflow charges an invoice, retrying the activity up to 5 times.
func BillingWorkflow(ctx workflow.Context, in Invoice) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	var b *Billing
	var id string
	err := workflow.ExecuteActivity(ctx, b.ChargeInvoice, in).Get(ctx, &id)
	return id, err
}

// NewInterceptor protects a worker's activities. The workflow runs in the SDK's test environment,
// so no Temporal server is needed; a real worker takes the same worker.Options.
func ExampleNewInterceptor() {
	dir, err := os.MkdirTemp("", "latch-temporal-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	pol, err := policy.Parse("latch.yaml", []byte(`
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    lease: 1m
    decision: allow
`))
	if err != nil {
		panic(err)
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(dir, "state.db")})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	// The lines latch adds: the interceptor on the worker's options.
	opts := worker.Options{DeadlockDetectionTimeout: time.Minute, Interceptors: []interceptor.WorkerInterceptor{
		latchtemporal.NewInterceptor(g, &latchtemporal.Config{
			Principal: latch.Principal{Agent: "billing-worker"},
			Actions:   map[string]string{"ChargeInvoice": "billing.charge"},
		}),
	}}

	billing := &Billing{charges: map[string]int{}}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	run := func(invoice string) {
		env := suite.NewTestWorkflowEnvironment()
		env.SetWorkerOptions(opts)
		env.RegisterWorkflow(BillingWorkflow)
		env.RegisterActivity(billing)
		env.ExecuteWorkflow(BillingWorkflow, Invoice{InvoiceID: invoice, Amount: 24900})
		var id string
		if err := env.GetWorkflowError(); err != nil {
			var appErr *temporal.ApplicationError
			var d latchtemporal.Details
			if errors.As(err, &appErr) && appErr.Details(&d) == nil {
				fmt.Printf("%s: %s (%s, %s), retryable %v\n", invoice, appErr.Type(), d.Reason, d.EffectKey, !appErr.NonRetryable())
				return
			}
			fmt.Println(invoice+":", err)
			return
		}
		if err := env.GetWorkflowResult(&id); err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s\n", invoice, id)
	}
	run("inv_1")
	run("inv_1") // the same charge again: the stored result, not a second charge
	run("inv_2") // the reply is lost: not retried, although the RetryPolicy allows 5 attempts
	run("inv_2") // the next try is refused without running
	fmt.Printf("processor charges: inv_1=%d inv_2=%d\n", billing.charges["inv_1"], billing.charges["inv_2"])
	// Output:
	// inv_1: ch_inv_1
	// inv_1: ch_inv_1
	// inv_2: LatchAmbiguous (outcome_unknown, charge:inv_2), retryable false
	// inv_2: LatchAmbiguous (ambiguous, charge:inv_2), retryable false
	// processor charges: inv_1=1 inv_2=1
}
