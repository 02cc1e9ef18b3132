package latchtemporal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch"
	latchtemporal "github.com/latchkit/latch/integrations/temporal"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const approvalPolicy = `
schema: latch.policy/v1
actions:
  billing.refund:
    effect: "refund:{invoice_id}"
    decision: approve
    approval_ttl: 48h
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
`

// Payments counts the refunds and charges that happened. Charge loses its reply on its first
// run (it acts, then the transport fails), so its outcome is unknown.
type Payments struct {
	mu      sync.Mutex
	refunds map[string]int
	charges map[string]int
}

func (p *Payments) Refund(_ context.Context, in ChargeInput) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refunds[in.InvoiceID]++
	return fmt.Sprintf("refunded %s %d", in.InvoiceID, in.Amount), nil
}

func (p *Payments) Charge(_ context.Context, in ChargeInput) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.charges[in.InvoiceID]++
	if p.charges[in.InvoiceID] == 1 {
		return "", errors.New("connection reset by peer") // it happened; the reply was lost
	}
	return "charged " + in.InvoiceID, nil
}

func (p *Payments) count(m map[string]int, invoice string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return m[invoice]
}

// ApprovedWorkflow runs one activity with a StartToClose timeout of seconds, retried at most
// twice: far shorter than any person's answer.
func ApprovedWorkflow(ctx workflow.Context, activity string, in ChargeInput) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2},
	})
	var out string
	err := latchtemporal.NewWaiter(&latchtemporal.WaitConfig{PollEvery: 30 * time.Minute}).Execute(ctx, &out, activity, in)
	return out, err
}

type waitFixture struct {
	guard *latch.Guard
	pay   *Payments
	suite testsuite.WorkflowTestSuite
}

func newWaitFixture(t *testing.T) *waitFixture {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(approvalPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, "sqlite", "latchtemporal")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return &waitFixture{guard: g, pay: &Payments{refunds: map[string]int{}, charges: map[string]int{}}}
}

func (f *waitFixture) env() *testsuite.TestWorkflowEnvironment {
	env := f.suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{
		DeadlockDetectionTimeout: time.Minute,
		Interceptors: []interceptor.WorkerInterceptor{latchtemporal.NewInterceptor(f.guard, &latchtemporal.Config{
			Principal: latch.Principal{Agent: "billing-worker"},
			Actions:   map[string]string{"Refund": "billing.refund", "Charge": "billing.charge"},
		})},
	})
	env.RegisterWorkflow(ApprovedWorkflow)
	env.RegisterActivity(f.pay)
	return env
}

// pendingRequest returns the one pending approval request of the store.
func (f *waitFixture) pendingRequest(t *testing.T) *store.Approval {
	t.Helper()
	as, err := f.guard.Store().Approvals(context.Background(), store.ApprovalFilter{Status: store.Pending})
	if err != nil || len(as) != 1 {
		t.Fatalf("pending approvals = %d, %v; want one", len(as), err)
	}
	return as[0]
}

// TestExecuteApprovedWaitsDurably: an activity that needs approval does not fail its workflow.
// The workflow waits (a signal, a poll timer, a timer to the request's expiry: all in its
// history, skipped by the test environment's clock) for hours while the activity's timeout is
// seconds; a person grants the request with Guard.Approve, and the activity runs once. Denied,
// the workflow ends with a typed refusal and the activity never ran.
func TestExecuteApprovedWaitsDurably(t *testing.T) {
	t.Run("granted and signaled", func(t *testing.T) {
		f := newWaitFixture(t)
		env := f.env()
		var signaled interrupt.Answer
		env.RegisterDelayedCallback(func() {
			a := f.pendingRequest(t)
			if _, err := f.guard.Approve(context.Background(), a.ID, "alice"); err != nil {
				t.Errorf("Approve: %v", err)
			}
			ans, err := latchtemporal.SignalApproval(context.Background(), signalEnv{env}, f.guard, "", "", a.ID)
			if err != nil {
				t.Errorf("SignalApproval: %v", err)
			}
			signaled = ans
		}, 3*time.Hour+7*time.Minute) // between two polls: only the signal wakes it now
		start := env.Now()
		env.ExecuteWorkflow(ApprovedWorkflow, "Refund", ChargeInput{InvoiceID: "r1", Amount: 100})
		if !env.IsWorkflowCompleted() {
			t.Fatal("workflow did not complete")
		}
		if err := env.GetWorkflowError(); err != nil {
			t.Fatalf("workflow error = %v, want the refund's result", err)
		}
		var out string
		if err := env.GetWorkflowResult(&out); err != nil || out != "refunded r1 100" {
			t.Fatalf("workflow result = %q, %v", out, err)
		}
		if n := f.pay.count(f.pay.refunds, "r1"); n != 1 {
			t.Fatalf("refund ran %d times, want 1", n)
		}
		if signaled.Status != interrupt.Resume || signaled.By != "alice" || signaled.EffectKey != "" && signaled.EffectKey != "refund:r1" {
			t.Fatalf("signaled answer = %+v, want resume by alice", signaled)
		}
		// Woken by the signal, not by the next poll (at 3h30m).
		if took := env.Now().Sub(start); took < 3*time.Hour || took >= 3*time.Hour+30*time.Minute {
			t.Fatalf("workflow took %v of its time, want it to end when signaled (3h07m)", took)
		}
		eff, err := f.guard.Store().Effect(context.Background(), "refund:r1")
		if err != nil || eff.State != store.Committed {
			t.Fatalf("effect = %+v, %v; want committed", eff, err)
		}
	})

	t.Run("granted on the command line, no signal", func(t *testing.T) {
		f := newWaitFixture(t)
		env := f.env()
		env.RegisterDelayedCallback(func() {
			if _, err := f.guard.Approve(context.Background(), f.pendingRequest(t).ID, "alice"); err != nil {
				t.Errorf("Approve: %v", err)
			}
		}, 5*time.Hour+10*time.Minute)
		start := env.Now()
		env.ExecuteWorkflow(ApprovedWorkflow, "Refund", ChargeInput{InvoiceID: "r2", Amount: 100})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatalf("workflow error = %v", err)
		}
		if n := f.pay.count(f.pay.refunds, "r2"); n != 1 {
			t.Fatalf("refund ran %d times, want 1", n)
		}
		// The next poll after the grant (5h30m) found it.
		if took := env.Now().Sub(start); took != 5*time.Hour+30*time.Minute {
			t.Fatalf("workflow took %v, want the first poll after the grant (5h30m)", took)
		}
	})

	t.Run("denied", func(t *testing.T) {
		f := newWaitFixture(t)
		env := f.env()
		var denied string
		env.RegisterDelayedCallback(func() {
			a := f.pendingRequest(t)
			denied = a.ID
			if _, err := f.guard.Deny(context.Background(), a.ID, "bob"); err != nil {
				t.Errorf("Deny: %v", err)
			}
			if _, err := latchtemporal.SignalApproval(context.Background(), signalEnv{env}, f.guard, "", "", a.ID); err != nil {
				t.Errorf("SignalApproval: %v", err)
			}
		}, 2*time.Hour)
		env.ExecuteWorkflow(ApprovedWorkflow, "Refund", ChargeInput{InvoiceID: "r3", Amount: 100})
		err := env.GetWorkflowError()
		d, typ, ok := latchtemporal.DetailsOf(err)
		if !ok || typ != latchtemporal.ErrTypeRefused || d.Reason != string(latch.ReasonApprovalDenied) || d.ApprovalID != denied {
			t.Fatalf("workflow error = %v (details %+v, type %q), want %s approval_denied naming %s", err, d, typ, latchtemporal.ErrTypeRefused, denied)
		}
		if r := d.Refusal(); r.Kind != latch.KindApprovalRefused {
			t.Fatalf("refusal = %+v, want kind approval_refused", r)
		}
		if n := f.pay.count(f.pay.refunds, "r3"); n != 0 {
			t.Fatalf("refund ran %d times, want 0", n)
		}
	})

	t.Run("denied on the command line, no signal", func(t *testing.T) {
		f := newWaitFixture(t)
		env := f.env()
		env.RegisterDelayedCallback(func() {
			if _, err := f.guard.Deny(context.Background(), f.pendingRequest(t).ID, "bob"); err != nil {
				t.Errorf("Deny: %v", err)
			}
		}, time.Hour)
		env.ExecuteWorkflow(ApprovedWorkflow, "Refund", ChargeInput{InvoiceID: "r4", Amount: 100})
		d, _, ok := latchtemporal.DetailsOf(env.GetWorkflowError())
		if !ok || d.Reason != string(latch.ReasonApprovalDenied) || d.Pending == "" {
			t.Fatalf("workflow error = %v (details %+v), want approval_denied naming the request asked again", env.GetWorkflowError(), d)
		}
		if n := f.pay.count(f.pay.refunds, "r4"); n != 0 {
			t.Fatalf("refund ran %d times, want 0", n)
		}
	})

	t.Run("expired", func(t *testing.T) {
		f := newWaitFixture(t)
		env := f.env()
		env.ExecuteWorkflow(ApprovedWorkflow, "Refund", ChargeInput{InvoiceID: "r5", Amount: 100})
		d, _, ok := latchtemporal.DetailsOf(env.GetWorkflowError())
		if !ok || d.Reason != string(latch.ReasonApprovalExpired) || d.ApprovalID == "" {
			t.Fatalf("workflow error = %v (details %+v), want approval_expired", env.GetWorkflowError(), d)
		}
		if n := f.pay.count(f.pay.refunds, "r5"); n != 0 {
			t.Fatalf("refund ran %d times, want 0", n)
		}
	})

	t.Run("ambiguous, resolved and signaled", func(t *testing.T) {
		f := newWaitFixture(t)
		env := f.env()
		env.RegisterDelayedCallback(func() {
			// A person found the lost charge did not happen.
			if _, err := f.guard.Resolve(context.Background(), "charge:c1", store.Failed, "ops"); err != nil {
				t.Errorf("Resolve: %v", err)
			}
			if _, err := latchtemporal.SignalResolved(context.Background(), signalEnv{env}, f.guard, "", "", "charge:c1"); err != nil {
				t.Errorf("SignalResolved: %v", err)
			}
		}, 100*time.Minute) // between two polls (1h30m, 2h): only the signal wakes it now
		start := env.Now()
		env.ExecuteWorkflow(ApprovedWorkflow, "Charge", ChargeInput{InvoiceID: "c1", Amount: 5})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatalf("workflow error = %v", err)
		}
		if n := f.pay.count(f.pay.charges, "c1"); n != 2 {
			t.Fatalf("charge ran %d times, want 2 (the lost one, resolved failed, and the one after)", n)
		}
		if took := env.Now().Sub(start); took != 100*time.Minute {
			t.Fatalf("workflow took %v, want it to end when signaled (1h40m)", took)
		}
	})
}

// PlainWorkflow runs one activity with workflow.ExecuteActivity: no wait.
func PlainWorkflow(ctx workflow.Context, activity string, in ChargeInput) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, activity, in).Get(ctx, &out)
	return out, err
}

// TestApprovalRequiredDetails: the error a workflow gets for an activity that needs approval
// names the request (its id, the action hash a person approves, its expiry) and the effect.
func TestApprovalRequiredDetails(t *testing.T) {
	t.Parallel()
	f := newWaitFixture(t)
	env := f.env()
	env.RegisterWorkflow(PlainWorkflow)
	env.ExecuteWorkflow(PlainWorkflow, "Refund", ChargeInput{InvoiceID: "r9", Amount: 100})
	err := env.GetWorkflowError()
	d, typ, ok := latchtemporal.DetailsOf(err)
	if !ok || typ != latchtemporal.ErrTypeRefused {
		t.Fatalf("workflow error = %v, want %s with details", err, latchtemporal.ErrTypeRefused)
	}
	req := f.pendingRequest(t)
	if d.Reason != "approval_required" || d.ApprovalID != req.ID || d.EffectKey != "refund:r9" || d.ActionHash != req.ActionHash ||
		!d.ExpiresAt.Equal(req.ExpiresAt) {
		t.Fatalf("details = %+v, want approval_required naming %s (%s, expires %v) and refund:r9", d, req.ID, req.ActionHash, req.ExpiresAt)
	}
	if r := d.Refusal(); r.Kind != latch.KindApprovalRequired || r.ApprovalID != req.ID || r.EffectKey != "refund:r9" {
		t.Fatalf("Details.Refusal() = %+v", r)
	}
}
