package latchtemporal_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	latchtemporal "github.com/latchkit/latch/integrations/temporal"
	"github.com/latchkit/latch/internal/remotetest"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const testPolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
`

type ChargeInput struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
}

// Activities charges through the remote: a refusal before acting is NotExecuted, anything else
// that is not an answer is unknown. It records the attempt number of each run.
type Activities struct {
	remote   *remotetest.Server
	mu       sync.Mutex
	attempts map[string][]int32
}

func (a *Activities) Charge(ctx context.Context, in ChargeInput) (string, error) {
	a.mu.Lock()
	a.attempts[in.InvoiceID] = append(a.attempts[in.InvoiceID], activity.GetInfo(ctx).Attempt)
	a.mu.Unlock()
	reply, err := a.remote.Act(ctx, in.InvoiceID)
	if errors.Is(err, remotetest.ErrRefused) {
		return "", latch.NotExecuted(err)
	}
	return reply, err
}

// Refund is not in the policy: it is denied.
func (a *Activities) Refund(ctx context.Context, in ChargeInput) (string, error) {
	return a.remote.Act(ctx, "refund:"+in.InvoiceID)
}

func (a *Activities) runs(invoice string) []int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int32(nil), a.attempts[invoice]...)
}

// ChargeWorkflow runs Charge with a RetryPolicy that would retry up to 5 times.
func ChargeWorkflow(ctx workflow.Context, in ChargeInput) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5},
	})
	var a *Activities
	var out string
	err := workflow.ExecuteActivity(ctx, a.Charge, in).Get(ctx, &out)
	return out, err
}

type fixture struct {
	guard   *latch.Guard
	acts    *Activities
	suite   testsuite.WorkflowTestSuite
	options *latch.Options // the interceptor's call options
	asked   atomic.Int32   // how many times the options' hook was asked
	// fromWorkflow is the interceptor's TaskFromWorkflow; workflowID, when set, the id the
	// workflow runs under.
	fromWorkflow bool
	workflowID   string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	return setupPolicy(t, testPolicy)
}

// setupPolicy is setup under the policy doc.
func setupPolicy(t *testing.T, doc string) *fixture {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, "sqlite", "latchtemporal")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return &fixture{guard: g, acts: &Activities{remote: remotetest.New(t), attempts: map[string][]int32{}}}
}

func (f *fixture) interceptors() worker.Options {
	return worker.Options{
		// The test environment's workflow goroutine must yield within this, or it is reported as a
		// deadlock: 1s by default, which a loaded machine running -race can exceed.
		DeadlockDetectionTimeout: time.Minute,
		Interceptors: []interceptor.WorkerInterceptor{
			latchtemporal.NewInterceptor(f.guard, &latchtemporal.Config{
				Principal:        latch.Principal{Agent: "billing-worker"},
				Actions:          map[string]string{"Charge": "billing.charge", "Refund": "billing.refund"},
				Options:          f.options,
				TaskFromWorkflow: f.fromWorkflow,
			}),
		}}
}

// runWorkflow runs ChargeWorkflow in a fresh test environment (one workflow execution) with the
// worker's latch interceptor.
func (f *fixture) runWorkflow(t *testing.T, in ChargeInput) (string, error) {
	t.Helper()
	env := f.suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(f.interceptors())
	if f.workflowID != "" {
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: f.workflowID})
	}
	env.RegisterWorkflow(ChargeWorkflow)
	env.RegisterActivity(f.acts)
	env.ExecuteWorkflow(ChargeWorkflow, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return "", err
	}
	var out string
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return out, nil
}

func (f *fixture) state(t *testing.T, key string) latch.State {
	t.Helper()
	e, err := f.guard.Store().Effect(t.Context(), key)
	if err != nil {
		t.Fatalf("Effect(%s): %v", key, err)
	}
	return e.State
}

// appError returns the application error in a workflow's error chain.
func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("workflow error %v carries no application error", err)
	}
	return ae
}

func TestTemporal(t *testing.T) {
	t.Parallel()

	t.Run("retry after commit does not run again", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		first, err := f.runWorkflow(t, ChargeInput{InvoiceID: "inv_1", Amount: 100})
		if err != nil || first != "done:inv_1" {
			t.Fatalf("first workflow = %q, %v, want done:inv_1", first, err)
		}
		// A second workflow for the same invoice, and a bare activity run with the same input:
		// both get the stored result without running.
		second, err := f.runWorkflow(t, ChargeInput{InvoiceID: "inv_1", Amount: 100})
		if err != nil || second != first {
			t.Errorf("second workflow = %q, %v, want the stored result %q", second, err, first)
		}
		env := f.suite.NewTestActivityEnvironment()
		env.SetWorkerOptions(f.interceptors())
		env.RegisterActivity(f.acts)
		val, err := env.ExecuteActivity(f.acts.Charge, ChargeInput{InvoiceID: "inv_1", Amount: 100})
		if err != nil {
			t.Fatalf("activity retried after commit: %v", err)
		}
		var got string
		if err := val.Get(&got); err != nil || got != first {
			t.Errorf("activity retried after commit = %q, %v, want the stored result %q", got, err, first)
		}
		if n := f.acts.remote.Acts("inv_1"); n != 1 {
			t.Errorf("remote acted %d times for inv_1, want 1", n)
		}
	})

	t.Run("lost reply is ambiguous and no retry runs", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.acts.remote.Fail("inv_2", remotetest.DropReply)
		_, err := f.runWorkflow(t, ChargeInput{InvoiceID: "inv_2", Amount: 200})
		ae := appError(t, err)
		if ae.Type() != latchtemporal.ErrTypeAmbiguous || !ae.NonRetryable() {
			t.Fatalf("workflow error type %q (non-retryable %v), want %s, non-retryable", ae.Type(), ae.NonRetryable(), latchtemporal.ErrTypeAmbiguous)
		}
		var d latchtemporal.Details
		if err := ae.Details(&d); err != nil || d.EffectKey != "charge:inv_2" || d.Reason != "outcome_unknown" {
			t.Errorf("details = %+v, %v, want effect_key charge:inv_2, reason ambiguous", d, err)
		}
		if !strings.Contains(ae.Error(), `effect "charge:inv_2" is ambiguous`) {
			t.Errorf("error = %q, want it to name the effect", ae.Error())
		}
		if runs := f.acts.runs("inv_2"); len(runs) != 1 {
			t.Errorf("activity ran %d times (attempts %v), want once: the RetryPolicy must not retry an ambiguous attempt", len(runs), runs)
		}
		if s := f.state(t, "charge:inv_2"); s != latch.StateAmbiguous {
			t.Errorf("effect charge:inv_2 = %s, want ambiguous", s)
		}
		// The next try (a new workflow for the same invoice) is refused without running.
		_, err = f.runWorkflow(t, ChargeInput{InvoiceID: "inv_2", Amount: 200})
		ae = appError(t, err)
		if err := ae.Details(&d); ae.Type() != latchtemporal.ErrTypeAmbiguous || err != nil || d.Reason != "ambiguous" {
			t.Errorf("next try: type %q, details %+v, want %s, ambiguous", ae.Type(), d, latchtemporal.ErrTypeAmbiguous)
		}
		if runs := f.acts.runs("inv_2"); len(runs) != 1 {
			t.Errorf("activity ran %d times, want once", len(runs))
		}
		if n := f.acts.remote.Acts("inv_2"); n != 1 {
			t.Errorf("remote acted %d times for inv_2, want 1", n)
		}
	})

	t.Run("NotExecuted is retried by the RetryPolicy and runs once", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.acts.remote.Fail("inv_3", remotetest.Refuse)
		out, err := f.runWorkflow(t, ChargeInput{InvoiceID: "inv_3", Amount: 300})
		if err != nil || out != "done:inv_3" {
			t.Fatalf("workflow = %q, %v, want done:inv_3 after a retry", out, err)
		}
		if runs := f.acts.runs("inv_3"); len(runs) != 2 || runs[0] != 1 || runs[1] != 2 {
			t.Errorf("activity attempts = %v, want [1 2]", runs)
		}
		if n := f.acts.remote.Acts("inv_3"); n != 1 {
			t.Errorf("remote acted %d times for inv_3, want 1", n)
		}
		if s := f.state(t, "charge:inv_3"); s != latch.StateCommitted {
			t.Errorf("effect charge:inv_3 = %s, want committed", s)
		}
	})

	t.Run("activity not allowed by the policy is refused without running", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		env := f.suite.NewTestActivityEnvironment()
		env.SetWorkerOptions(f.interceptors())
		env.RegisterActivity(f.acts)
		_, err := env.ExecuteActivity(f.acts.Refund, ChargeInput{InvoiceID: "inv_4"})
		ae := appError(t, err)
		if ae.Type() != latchtemporal.ErrTypeRefused || !ae.NonRetryable() || !strings.Contains(ae.Error(), "denied") {
			t.Errorf("refund error = %v (type %q), want a non-retryable %s, denied", ae, ae.Type(), latchtemporal.ErrTypeRefused)
		}
		if n := f.acts.remote.Acts("refund:inv_4"); n != 0 {
			t.Errorf("remote acted %d times for the refund, want 0", n)
		}
	})
}

// TestTemporalReconcile: with a reconcile hook that asks the remote what it did, an attempt
// whose effect went ambiguous is retried by the RetryPolicy instead of failing the workflow:
// the retry asks the hook, and runs the activity once more ("not executed") or returns what the
// hook found ("committed"), with nobody resolving anything. A hook that never knows is retried
// as the RetryPolicy allows, asked once per attempt, never running the activity again.
func TestTemporalReconcile(t *testing.T) {
	t.Parallel()
	setupHooked := func(t *testing.T) *fixture {
		f := setup(t)
		remote := f.acts.remote
		f.options = &latch.Options{Reconcile: latch.Reconciler(func(_ context.Context, _ *latch.Attempt, in ChargeInput) (latch.Outcome, string, error) {
			f.asked.Add(1)
			switch {
			case in.InvoiceID == "inv_9":
				return latch.OutcomeUnknown, "", errors.New("the provider's ledger is down")
			case remote.Acts(in.InvoiceID) == 0:
				return latch.OutcomeNotExecuted, "", nil
			}
			return latch.OutcomeCommitted, "done:" + in.InvoiceID, nil
		})}
		return f
	}

	t.Run("not executed: the retry runs the activity once more", func(t *testing.T) {
		t.Parallel()
		f := setupHooked(t)
		f.acts.remote.Fail("inv_7", remotetest.HangUp)
		out, err := f.runWorkflow(t, ChargeInput{InvoiceID: "inv_7", Amount: 700})
		if err != nil || out != "done:inv_7" {
			t.Fatalf("workflow = %q, %v, want done:inv_7 after the hook proved the first attempt did nothing", out, err)
		}
		if runs := f.acts.runs("inv_7"); len(runs) != 2 || runs[1] != 2 {
			t.Errorf("activity attempts = %v, want [1 2]", runs)
		}
		if n := f.acts.remote.Acts("inv_7"); n != 1 {
			t.Errorf("remote acted %d times for inv_7, want 1", n)
		}
		e, err := f.guard.Store().Effect(t.Context(), "charge:inv_7")
		if err != nil || e.State != latch.StateCommitted || e.Attempt != 2 {
			t.Errorf("effect charge:inv_7 = %+v, %v, want committed at attempt 2", e, err)
		}
	})

	t.Run("committed: the retry returns what the hook found", func(t *testing.T) {
		t.Parallel()
		f := setupHooked(t)
		f.acts.remote.Fail("inv_8", remotetest.DropReply)
		out, err := f.runWorkflow(t, ChargeInput{InvoiceID: "inv_8", Amount: 800})
		if err != nil || out != "done:inv_8" {
			t.Fatalf("workflow = %q, %v, want the hook's done:inv_8", out, err)
		}
		if runs := f.acts.runs("inv_8"); len(runs) != 1 {
			t.Errorf("activity ran %d times (attempts %v), want once", len(runs), runs)
		}
		if n := f.acts.remote.Acts("inv_8"); n != 1 {
			t.Errorf("remote acted %d times for inv_8, want 1", n)
		}
		e, err := f.guard.Store().Effect(t.Context(), "charge:inv_8")
		if err != nil || e.State != latch.StateCommitted || e.ResolvedBy != "reconcile:billing.charge" {
			t.Errorf("effect charge:inv_8 = %+v, %v, want committed by reconcile:billing.charge", e, err)
		}
	})

	t.Run("unknown: retried until the RetryPolicy gives up", func(t *testing.T) {
		t.Parallel()
		f := setupHooked(t)
		f.acts.remote.Fail("inv_9", remotetest.HangUp)
		_, err := f.runWorkflow(t, ChargeInput{InvoiceID: "inv_9", Amount: 900})
		ae := appError(t, err)
		// The test environment does not show the activity its RetryPolicy (a server does, and then
		// the last attempt fails LatchAmbiguous): here the fifth attempt's LatchAwaitingReconcile
		// ends the workflow, as MaximumAttempts says.
		var d latchtemporal.Details
		if err := ae.Details(&d); ae.Type() != latchtemporal.ErrTypeAwaitingReconcile || err != nil || d.EffectKey != "charge:inv_9" || d.Reason != "ambiguous" {
			t.Errorf("workflow error type %q, details %+v, want %s, ambiguous on charge:inv_9", ae.Type(), d, latchtemporal.ErrTypeAwaitingReconcile)
		}
		if got := f.asked.Load(); got != 4 {
			t.Errorf("hook asked %d times, want 4 (attempts 2 to 5, each before it reserves)", got)
		}
		if runs := f.acts.runs("inv_9"); len(runs) != 1 {
			t.Errorf("activity ran %d times (attempts %v), want once: the retries meet latch, not the remote", len(runs), runs)
		}
		if n := f.acts.remote.Acts("inv_9"); n != 0 {
			t.Errorf("remote acted %d times for inv_9, want 0", n)
		}
		if s := f.state(t, "charge:inv_9"); s != latch.StateAmbiguous {
			t.Errorf("effect charge:inv_9 = %s, want still ambiguous", s)
		}
	})
}
