package latchtemporal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// SignalName is the name of the signal a Waiter waits on: its argument is an interrupt.Answer
// (SignalApproval and SignalResolved send it). A signal wakes the workflow at once; without
// one, the workflow looks again every PollEvery.
const SignalName = "latch.answer"

// Defaults of a Waiter.
const (
	// DefaultPollEvery is how often, by default, a waiting workflow runs its activity again to
	// meet an answer given without a signal (latch approve on the command line, the console).
	DefaultPollEvery = 5 * time.Minute
	// DefaultResolveFor is how long, by default, a workflow waits for an ambiguous effect to be
	// resolved before the activity's error is returned.
	DefaultResolveFor = 7 * 24 * time.Hour
)

// WaitConfig configures a Waiter. A nil *WaitConfig means all defaults.
type WaitConfig struct {
	// PollEvery is how often the workflow runs the activity again while it waits: the run meets
	// an answer given without a signal. A run while the request is still pending asks nothing
	// new (the guard hands back the pending request), and a run while the effect is still
	// ambiguous is refused before the activity runs. Default DefaultPollEvery.
	PollEvery time.Duration
	// ResolveFor is how long the workflow waits for an ambiguous effect (ErrTypeAmbiguous) to
	// be resolved, by a person (latch resolve) or the action's reconcile hook; after it the
	// activity's error is returned. Default DefaultResolveFor. A wait for approval ends when the
	// request expires (approval_expired).
	ResolveFor time.Duration
}

// Waiter is latch's interrupt.Interrupter for Temporal workflows: it waits durably — a signal
// (SignalName), a poll timer, and a timer to the approval request's expiry, all in the
// workflow's history — for a person to answer an approval request, or for an ambiguous effect
// to be resolved, however much longer that takes than the activity's timeouts.
type Waiter struct {
	cfg WaitConfig
}

// NewWaiter returns a Waiter configured by cfg (nil for the defaults).
func NewWaiter(cfg *WaitConfig) *Waiter {
	var c WaitConfig
	if cfg != nil {
		c = *cfg
	}
	if c.PollEvery <= 0 {
		c.PollEvery = DefaultPollEvery
	}
	if c.ResolveFor <= 0 {
		c.ResolveFor = DefaultResolveFor
	}
	return &Waiter{cfg: c}
}

var _ interrupt.Interrupter[workflow.Context] = (*Waiter)(nil)

// ExecuteApproved runs an activity like workflow.ExecuteActivity(ctx, activity, args...).Get(ctx,
// valuePtr), waiting with a default Waiter when latch refuses it approval_required or its
// effect's outcome is unknown: see Waiter.Execute.
func ExecuteApproved(ctx workflow.Context, valuePtr any, activity any, args ...any) error {
	return NewWaiter(nil).Execute(ctx, valuePtr, activity, args...)
}

// Execute runs an activity as workflow.ExecuteActivity does, under ctx's activity options, and
// decodes its result into valuePtr. When the worker's interceptor refuses the activity
// approval_required, or reports its effect's outcome unknown (ErrTypeAmbiguous), the workflow
// does not fail: it waits (Interrupt) and runs the activity again, which finds the grant (or
// the resolved effect) by itself and runs once. A denied or expired request ends the wait with
// a non-retryable application error of type ErrTypeRefused whose Details say approval_denied or
// approval_expired; any other error is returned as it is.
func (w *Waiter) Execute(ctx workflow.Context, valuePtr any, activity any, args ...any) error {
	for {
		err := workflow.ExecuteActivity(ctx, activity, args...).Get(ctx, valuePtr)
		if err == nil {
			return nil
		}
		r, ok := waitable(err)
		if !ok {
			return err
		}
		ans, ierr := w.Interrupt(ctx, r)
		if ierr != nil {
			return errors.Join(err, ierr)
		}
		if ans.Status != interrupt.Resume {
			return refusalError(ans)
		}
	}
}

// waitable returns the refusal an activity's error carries when a person or a resolution can
// end it.
func waitable(err error) (*latch.Refusal, bool) {
	d, typ, ok := DetailsOf(err)
	if !ok || typ != ErrTypeRefused && typ != ErrTypeAmbiguous {
		return nil, false
	}
	r := d.Refusal()
	return r, interrupt.Interruptible(r)
}

// refusalError is the error a wait that ended on a denial or an expiry returns.
func refusalError(ans interrupt.Answer) error {
	r := ans.Refusal()
	if r == nil {
		return fmt.Errorf("latchtemporal: wait ended %s", ans.Status)
	}
	return temporal.NewNonRetryableApplicationError("latchtemporal: "+string(r.Reason)+": "+r.Detail, ErrTypeRefused, nil,
		Details{EffectKey: ans.EffectKey, Reason: string(r.Reason), ApprovalID: ans.ApprovalID, Pending: ans.Pending})
}

// Interrupt waits durably until the wait for r is over, or it is time to look again:
//
//   - a signal named SignalName whose Answer is about r's request (or, for an ambiguous
//     effect, r's effect) ends it with that answer: Denied and Expired stop the workflow's
//     call, Resume runs it again. A signal about anything else wakes the workflow to look again
//     (Resume): the activity's run meets its own truth.
//   - every PollEvery without a signal: Resume, to look again.
//   - for approval_required, the request's expiry: Expired.
//   - for an ambiguous effect, ResolveFor after the wait began (in the workflow's time; a
//     workflow that looks again starts a new ResolveFor): an error.
func (w *Waiter) Interrupt(ctx workflow.Context, r *latch.Refusal) (interrupt.Answer, error) {
	if !interrupt.Interruptible(r) {
		return interrupt.Answer{}, interrupt.ErrNotInterruptible
	}
	approval := r.Kind == latch.KindApprovalRequired
	now := workflow.Now(ctx)
	deadline := now.Add(w.cfg.ResolveFor)
	if approval && !r.ExpiresAt.IsZero() {
		deadline = r.ExpiresAt
	}
	if !now.Before(deadline) {
		if approval {
			return interrupt.Answer{Status: interrupt.Expired, ApprovalID: r.ApprovalID, EffectKey: r.EffectKey}, nil
		}
		return interrupt.Answer{}, fmt.Errorf("latchtemporal: effect %q not resolved within %s", r.EffectKey, w.cfg.ResolveFor)
	}
	wait := min(w.cfg.PollEvery, deadline.Sub(now))
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(tctx, wait)
	var (
		ans      interrupt.Answer
		signaled bool
	)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalName), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, &ans)
		signaled = true
	})
	sel.AddFuture(timer, func(workflow.Future) {})
	sel.Select(ctx)
	if signaled {
		if about(ans, r) && ans.Status != interrupt.Waiting {
			return ans, nil
		}
		return interrupt.Answer{Status: interrupt.Resume, ApprovalID: r.ApprovalID, EffectKey: r.EffectKey}, nil
	}
	if err := ctx.Err(); err != nil {
		return interrupt.Answer{}, err
	}
	if !workflow.Now(ctx).Before(deadline) {
		if approval {
			return interrupt.Answer{Status: interrupt.Expired, ApprovalID: r.ApprovalID, EffectKey: r.EffectKey}, nil
		}
		return interrupt.Answer{}, fmt.Errorf("latchtemporal: effect %q not resolved within %s", r.EffectKey, w.cfg.ResolveFor)
	}
	return interrupt.Answer{Status: interrupt.Resume, ApprovalID: r.ApprovalID, EffectKey: r.EffectKey}, nil
}

// about reports whether the signaled answer a is about the wait for r.
func about(a interrupt.Answer, r *latch.Refusal) bool {
	if r.Kind == latch.KindApprovalRequired {
		return a.ApprovalID == r.ApprovalID || a.Status == interrupt.Denied && a.Pending == r.ApprovalID
	}
	return a.ApprovalID == "" && a.EffectKey == r.EffectKey
}

// Signaler sends a signal to a workflow execution: client.Client does.
type Signaler interface {
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
}

// SignalApproval tells the workflow workflowID (runID "" for its current run), waiting in a
// Waiter, that the approval request approvalID was answered: it reads the answer from g's store
// (interrupt.Check) and signals it, unless the request is still waiting. Call it after
// Guard.Approve or Guard.Deny — from the approving service, or a hook on the guard's
// approval_granted and approval_denied events. It returns the answer it read.
func SignalApproval(ctx context.Context, s Signaler, g *latch.Guard, workflowID, runID, approvalID string) (interrupt.Answer, error) {
	return signal(ctx, s, g, workflowID, runID, &latch.Refusal{Kind: latch.KindApprovalRequired, Reason: latch.ReasonApprovalRequired, ApprovalID: approvalID})
}

// SignalResolved tells the workflow workflowID (runID "" for its current run), waiting in a
// Waiter for the ambiguous effect key, that it was resolved: call it after Guard.Resolve or
// Guard.ResolveEffect (latch resolve). It returns the answer it read; an effect still
// ambiguous is not signaled.
func SignalResolved(ctx context.Context, s Signaler, g *latch.Guard, workflowID, runID, key string) (interrupt.Answer, error) {
	return signal(ctx, s, g, workflowID, runID, &latch.Refusal{Kind: latch.KindAmbiguous, Reason: latch.ReasonAmbiguous, EffectKey: key})
}

func signal(ctx context.Context, s Signaler, g *latch.Guard, workflowID, runID string, r *latch.Refusal) (interrupt.Answer, error) {
	ans, err := interrupt.Check(ctx, g, r)
	if err != nil || ans.Status == interrupt.Waiting {
		return ans, err
	}
	if r.Kind != latch.KindApprovalRequired {
		ans.ApprovalID = ""
	}
	if err := s.SignalWorkflow(ctx, workflowID, runID, SignalName, ans); err != nil {
		return ans, fmt.Errorf("signal workflow %s: %w", workflowID, err)
	}
	return ans, nil
}
