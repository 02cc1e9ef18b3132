package latchtemporal_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/latchkit/latch"
	latchtemporal "github.com/latchkit/latch/integrations/temporal"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// RefundWorkflow refunds an invoice whose refund a person must approve: ExecuteApproved waits
// for the answer in the workflow, however long after the activity's timeout it comes.
func RefundWorkflow(ctx workflow.Context, in Invoice) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var b *Billing
	var id string
	err := latchtemporal.ExecuteApproved(ctx, &id, b.ChargeInvoice, in)
	return id, err
}

// ExecuteApproved waits durably for a person's approval and then runs the activity once. The
// workflow runs in the SDK's test environment, whose clock skips the hours the person takes.
func ExampleExecuteApproved() {
	dir, _ := os.MkdirTemp("", "latch-temporal-wait-")
	defer os.RemoveAll(dir)
	pol, _ := policy.Parse("latch.yaml", []byte(`
schema: latch.policy/v1
actions:
  billing.refund:
    effect: "refund:{invoice_id}"
    decision: approve
    approval_ttl: 24h
`))
	g, err := latch.Open(context.Background(), &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(dir, "state.db")})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	billing := &Billing{charges: map[string]int{}}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute, Interceptors: []interceptor.WorkerInterceptor{
		latchtemporal.NewInterceptor(g, &latchtemporal.Config{
			Principal: latch.Principal{Agent: "billing-worker"},
			Actions:   map[string]string{"ChargeInvoice": "billing.refund"},
		}),
	}})
	env.RegisterWorkflow(RefundWorkflow)
	env.RegisterActivity(billing)

	// Two hours later a person approves the request, and the approving service signals the
	// workflow (a Temporal client in production; the test environment here).
	env.RegisterDelayedCallback(func() {
		pending, _ := g.Store().Approvals(context.Background(), store.ApprovalFilter{Status: store.Pending})
		fmt.Println("approving", pending[0].ActionName)
		_, _ = g.Approve(context.Background(), pending[0].ID, "alice")
		_, _ = latchtemporal.SignalApproval(context.Background(), signalEnv{env}, g, "", "", pending[0].ID)
	}, 2*time.Hour)
	start := env.Now()
	env.ExecuteWorkflow(RefundWorkflow, Invoice{InvoiceID: "inv_7", Amount: 24900})
	var id string
	if err := env.GetWorkflowError(); err != nil {
		fmt.Println(err)
		return
	}
	_ = env.GetWorkflowResult(&id)
	fmt.Printf("%s after %v; refunds: %d\n", id, env.Now().Sub(start), billing.charges["inv_7"])
	// Output:
	// approving billing.refund
	// ch_inv_7 after 2h0m0s; refunds: 1
}

// signalEnv signals the test environment's workflow: a Temporal client.Client does the same
// with its SignalWorkflow.
type signalEnv struct {
	env *testsuite.TestWorkflowEnvironment
}

func (s signalEnv) SignalWorkflow(_ context.Context, _, _, name string, arg any) error {
	s.env.SignalWorkflow(name, arg)
	return nil
}
