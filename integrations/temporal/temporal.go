// Package latchtemporal protects Temporal activities with latch, so that an activity whose
// effect already happened, or whose earlier attempt's outcome is unknown, does not run it again.
//
// Temporal retries an activity attempt that failed or timed out, as its RetryPolicy says, and
// cannot tell "nothing happened" from "I don't know what happened": a worker that crashed after
// charging, or a reply lost on the way back, looks like any other failure. The worker interceptor
// NewInterceptor runs every activity as a latch action whose arguments are the activity's input
// — its effect key rendered by the policy's effect template — and turns latch's answer into
// Temporal's:
//
//	committed          the activity's result
//	duplicate of a     the stored result, without running (a retried attempt or a new
//	committed effect   workflow for an effect that already happened)
//	NotExecuted        the activity's error, retryable: Temporal retries as the RetryPolicy
//	                   says, and the retry reserves the key again as a new attempt
//	ambiguous          with a reconcile hook for the action, a retryable application error of
//	                   type ErrTypeAwaitingReconcile: the RetryPolicy retries the activity while
//	                   the hook may still settle the effect — the retry asks it, and the guard's
//	                   sweeper (latch.Guard.SweepEvery) may have resolved it meanwhile — and the
//	                   retry runs on what it proves. With no hook, on the RetryPolicy's last
//	                   attempt, or after ReconcileFor: a non-retryable application error of type
//	                   ErrTypeAmbiguous naming the effect; a person resolves it
//	in progress        a retryable application error of type ErrTypeInProgress: another attempt
//	                   holds the key under a live lease
//	approval required  a non-retryable application error of type ErrTypeRefused whose Details
//	                   name the request (ApprovalID, ExpiresAt) and the effect: a workflow that
//	                   runs the activity with ExecuteApproved (or a Waiter) waits durably for
//	                   the answer instead of failing, and the activity's next run finds the
//	                   grant by itself. A request whose exact action a person denied is
//	                   approval_denied (Details name the denied request and the pending one)
//	refused            denied, attempts exhausted, key conflict: a non-retryable application
//	                   error of type ErrTypeRefused
//
// Any other error (the store could not be reached) is returned as it is, retryable: the activity
// did not run, and the retry meets latch again.
//
// How to set the activity's RetryPolicy and timeouts alongside, and what happens on each failure,
// is in docs/integrations/temporal.md of the latch repository.
package latchtemporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
)

// Application error types of the errors the interceptor returns, for workflows to branch on
// (temporal.ApplicationError.Type).
const (
	// ErrTypeAmbiguous: the effect's outcome is unknown (this attempt's, or an earlier one's).
	// Non-retryable.
	ErrTypeAmbiguous = "LatchAmbiguous"
	// ErrTypeRefused: latch refused the activity (denied, approval required, attempts
	// exhausted, key conflict, invalid input). Non-retryable.
	ErrTypeRefused = "LatchRefused"
	// ErrTypeInProgress: another attempt holds the effect key under a live lease. Retryable.
	ErrTypeInProgress = "LatchInProgress"
	// ErrTypeAwaitingReconcile: the effect's outcome is unknown and the action's reconcile hook
	// may still settle it. Retryable: the next attempt meets what the hook proved.
	ErrTypeAwaitingReconcile = "LatchAwaitingReconcile"
)

// DefaultReconcileFor is how long, by default, an activity is retried while a reconcile hook
// may settle its ambiguous effect, counted from when the effect became ambiguous.
const DefaultReconcileFor = 24 * time.Hour

// Details are the details of an application error the interceptor returns
// (temporal.ApplicationError.Details), and of the refusal ExecuteApproved ends a wait with.
type Details struct {
	// EffectKey is the effect the refusal is about: every effect refusal names it, and so does
	// approval_required for a keyed action.
	EffectKey string `json:"effect_key,omitempty"`
	// Reason is latch's reason word (latch.RefusalOf, docs/errors.md): outcome_unknown (this
	// attempt's outcome is unknown), ambiguous (an earlier attempt's), in_progress,
	// attempts_exhausted, key_conflict, denied, approval_required, approval_denied, …
	Reason string `json:"reason"`
	// ApprovalID is, with approval_required, the request a person answers (latch approve
	// ApprovalID); with approval_denied or approval_expired, the request that was denied or
	// expired.
	ApprovalID string `json:"approval_id,omitempty"`
	// ActionHash is, with approval_required, the hash of the exact action the person approves.
	ActionHash string `json:"action_hash,omitempty"`
	// ExpiresAt is, with approval_required, when the request expires unanswered.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Pending is, with approval_denied, the request a later attempt asked again after the
	// denial: a person may still grant it.
	Pending string `json:"pending,omitempty"`
}

// DetailsOf returns the Details an error of the interceptor (or of ExecuteApproved) carries,
// however wrapped (a workflow sees an activity's error inside a *temporal.ActivityError), and
// the error's type; ok is false for an error that carries none.
func DetailsOf(err error) (d Details, errType string, ok bool) {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !ae.HasDetails() {
		return Details{}, "", false
	}
	if ae.Details(&d) != nil {
		return Details{}, "", false
	}
	return d, ae.Type(), true
}

// Refusal is the latch refusal d describes: its kind, reason word, effect and request.
func (d Details) Refusal() *latch.Refusal {
	return &latch.Refusal{Kind: latch.Reason(d.Reason).Kind(), Reason: latch.Reason(d.Reason), EffectKey: d.EffectKey,
		ApprovalID: d.ApprovalID, ActionHash: d.ActionHash, ExpiresAt: d.ExpiresAt}
}

// Config configures NewInterceptor. A nil *Config means all defaults.
type Config struct {
	// Principal is who the worker's activities act as (Agent required when set). Zero: the
	// principal of the activity's context or the guard's identity provider; with neither, every
	// activity is refused no_principal.
	Principal latch.Principal
	// Options are every protected call's options: an effect key template overriding the
	// policy's, the lease, a reconcile hook, Wait for approvals.
	Options *latch.Options
	// Actions maps an activity type to its latch action. An activity type not listed is the
	// action of its own name: every activity of the worker is an action, so one the policy does
	// not list is denied, never run unprotected.
	Actions map[string]string
	// TaskFromWorkflow makes each activity's call carry its workflow as its task,
	// "temporal:workflow:<workflow id>" (WorkflowTask), which a grant bound to tasks (tasks:
	// ["temporal:workflow:**"]) requires. The workflow id, not the run id: it stays the same
	// across the retries and continuations of one piece of work. Leave Options.Task empty with
	// it: a call has one task, and two different ones refuse it invalid_argument.
	TaskFromWorkflow bool
	// ReconcileFor is how long an activity whose effect is ambiguous is retried, when its action
	// has a reconcile hook (Options.Reconcile, registered for the guard's sweeper on the
	// activity's first run, or one registered on the guard), counted from when the effect became
	// ambiguous; after it the activity fails ErrTypeAmbiguous as without a hook. Default
	// DefaultReconcileFor. The RetryPolicy bounds and spaces the retries as for any error.
	ReconcileFor time.Duration
	// Logger receives one line for each attempt answered as a duplicate, each one retried for a
	// reconcile hook and each one stopped; default: discarded.
	Logger *slog.Logger
}

// WorkflowTask is the task an activity's call carries with Config.TaskFromWorkflow:
// "temporal:workflow:<workflow id>". A workflow id is free text: one holding ':' is more than
// one segment to a grant's task patterns, so "temporal:workflow:**" is the pattern that
// matches every workflow.
func WorkflowTask(workflowID string) string { return "temporal:workflow:" + workflowID }

// NewInterceptor returns a worker interceptor that protects the worker's activities:
//
//	w := worker.New(c, "billing", worker.Options{
//		Interceptors: []interceptor.WorkerInterceptor{latchtemporal.NewInterceptor(g, cfg)},
//	})
//
// An activity takes one input after its context, which must encode to a JSON object (a struct);
// its JSON fields are the action's arguments. The activity receives a fresh value decoded from
// the canonical bytes latch decided on.
func NewInterceptor(g *latch.Guard, cfg *Config) interceptor.WorkerInterceptor {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ReconcileFor <= 0 {
		c.ReconcileFor = DefaultReconcileFor
	}
	return &workerInterceptor{g: g, cfg: c}
}

type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
	g   *latch.Guard
	cfg Config
}

func (w *workerInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityInterceptor{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, w: w}
}

type activityInterceptor struct {
	interceptor.ActivityInboundInterceptorBase
	w *workerInterceptor
}

func (a *activityInterceptor) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	name := info.ActivityType.Name
	action := name
	if mapped, ok := a.w.cfg.Actions[name]; ok {
		action = mapped
	}
	if len(in.Args) != 1 || in.Args[0] == nil {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("latchtemporal: activity %s takes %d inputs: a protected activity takes exactly one, a struct whose JSON fields are the arguments of %s", name, len(in.Args), action),
			ErrTypeRefused, nil, Details{Reason: "invalid_argument"})
	}
	if a.w.cfg.Principal.Agent != "" {
		ctx = latch.WithPrincipal(ctx, a.w.cfg.Principal)
	}
	if a.w.cfg.TaskFromWorkflow {
		ctx = latch.WithTask(ctx, WorkflowTask(info.WorkflowExecution.ID))
	}
	if o := a.w.cfg.Options; o != nil && o.Reconcile != nil && a.w.g.ReconcileHook(action) == nil {
		a.w.g.RegisterReconcile(action, o.Reconcile) // for the guard's sweeper
	}
	input := in.Args[0]
	call := &latch.Call{Action: action, Options: a.w.cfg.Options}
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("latchtemporal: activity %s: encode input: %v", name, err), ErrTypeRefused, err, Details{Reason: "invalid_argument"})
	}
	call.Arguments = raw
	var result any
	_, err = a.w.g.Execute(ctx, call, func(ctx context.Context, canonical json.RawMessage) (any, error) {
		fresh := reflect.New(reflect.TypeOf(input))
		if err := json.Unmarshal(canonical, fresh.Interface()); err != nil {
			return nil, latch.NotExecuted(fmt.Errorf("decode input of %s: %w", name, err))
		}
		r, err := a.Next.ExecuteActivity(ctx, &interceptor.ExecuteActivityInput{Args: []any{fresh.Elem().Interface()}})
		result = r
		return r, err
	})
	if err == nil {
		return result, nil
	}
	return a.outcome(ctx, info, action, err)
}

// outcome turns latch's refusal or an attempt's failure into what Temporal should do.
func (a *activityInterceptor) outcome(ctx context.Context, info activity.Info, action string, err error) (any, error) {
	key := latch.EffectKeyOf(err)
	name := info.ActivityType.Name
	switch latch.TaskVerdictOf(err) {
	case latch.TaskDuplicate:
		a.w.cfg.Logger.InfoContext(ctx, "latchtemporal: effect already committed; activity not run, stored result returned",
			"activity", name, "workflow_id", info.WorkflowExecution.ID, "attempt", info.Attempt, "effect_key", key)
		var ee *latch.EffectError
		if errors.As(err, &ee) && len(ee.Result) > 0 && string(ee.Result) != "null" {
			return ee.Result, nil
		}
		return nil, nil
	case latch.TaskInProgress:
		return nil, temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("latchtemporal: activity %s: effect %q is held by another attempt; retrying later", name, key),
			ErrTypeInProgress, temporal.ApplicationErrorOptions{Cause: err, Details: []any{Details{EffectKey: key, Reason: latch.TaskReason(err)}}})
	case latch.TaskRetry:
		return nil, err
	}
	r := latch.TaskReason(err)
	if ref := latch.RefusalOf(err); ref.Kind == latch.KindApprovalRequired {
		return nil, a.approvalRequired(ctx, info, ref, err)
	}
	if a.awaitReconcile(ctx, info, action, key, r) {
		a.w.cfg.Logger.InfoContext(ctx, "latchtemporal: effect ambiguous; activity retried while its reconcile hook may settle it",
			"activity", name, "workflow_id", info.WorkflowExecution.ID, "attempt", info.Attempt, "effect_key", key)
		return nil, temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("latchtemporal: activity %s: effect %q is ambiguous and its reconcile hook may settle it; retrying later: %v", name, key, err),
			ErrTypeAwaitingReconcile, temporal.ApplicationErrorOptions{Cause: err, Details: []any{Details{EffectKey: key, Reason: r}}})
	}
	a.w.cfg.Logger.WarnContext(ctx, "latchtemporal: activity stopped", "activity", name,
		"workflow_id", info.WorkflowExecution.ID, "attempt", info.Attempt, "effect_key", key, "reason", r, "error", err)
	if latch.Reason(r).Kind().NeedsResolution() {
		msg := fmt.Sprintf("latchtemporal: activity %s: outcome unknown, not retried: %v", name, err)
		if key != "" {
			msg = fmt.Sprintf("latchtemporal: activity %s: effect %q is ambiguous, so it is not retried: find out whether it happened, "+
				"resolve it (latch resolve %s --committed or --failed), then run it again: %v", name, key, key, err)
		}
		return nil, temporal.NewNonRetryableApplicationError(msg, ErrTypeAmbiguous, err, Details{EffectKey: key, Reason: r})
	}
	return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("latchtemporal: activity %s refused: %s: %v", name, r, err),
		ErrTypeRefused, err, Details{EffectKey: key, Reason: r})
}

// awaitReconcile decides whether an attempt stopped because its effect is ambiguous is retried
// while a reconcile hook may settle the effect: only when the action has a hook, the RetryPolicy
// leaves another attempt, and the effect has been ambiguous for less than ReconcileFor.
func (a *activityInterceptor) awaitReconcile(ctx context.Context, info activity.Info, action, key, reason string) bool {
	g := a.w.g
	if key == "" || !latch.Reason(reason).Kind().NeedsResolution() || g.ReconcileHook(action) == nil {
		return false
	}
	if rp := info.RetryPolicy; rp != nil && rp.MaximumAttempts > 0 && info.Attempt >= rp.MaximumAttempts {
		return false // the last attempt: the workflow gets ErrTypeAmbiguous naming the effect
	}
	eff, err := g.Store().Effect(ctx, key)
	if err != nil {
		return true // cannot tell how long it has waited: the RetryPolicy still bounds it
	}
	return eff.State != latch.StateAmbiguous || time.Since(eff.UpdatedAt) < a.w.cfg.ReconcileFor
}

// approvalRequired is the error of an activity refused approval_required: non-retryable, its
// Details naming the request and the effect, for the workflow to wait on (ExecuteApproved) —
// or approval_denied when the last answer to the exact action was a denial, for the workflow to
// stop on.
func (a *activityInterceptor) approvalRequired(ctx context.Context, info activity.Info, r *latch.Refusal, err error) error {
	name := info.ActivityType.Name
	d := Details{EffectKey: r.EffectKey, Reason: string(r.Reason), ApprovalID: r.ApprovalID, ActionHash: r.ActionHash, ExpiresAt: r.ExpiresAt}
	if ans, cerr := interrupt.Check(ctx, a.w.g, r); cerr == nil && ans.Status == interrupt.Denied {
		d = Details{EffectKey: r.EffectKey, Reason: string(latch.ReasonApprovalDenied), ApprovalID: ans.ApprovalID, Pending: ans.Pending}
		a.w.cfg.Logger.WarnContext(ctx, "latchtemporal: activity stopped", "activity", name, "workflow_id", info.WorkflowExecution.ID,
			"attempt", info.Attempt, "effect_key", d.EffectKey, "reason", d.Reason, "approval_id", d.ApprovalID, "pending", d.Pending)
		denied := ans.Refusal().Err() // the denial, as latch types it (ErrApprovalMismatch, approval_denied)
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("latchtemporal: activity %s refused: approval_denied: approval %s "+
			"(effect %q) was denied; request %s asks again: %v", name, d.ApprovalID, d.EffectKey, d.Pending, denied), ErrTypeRefused, denied, d)
	}
	a.w.cfg.Logger.InfoContext(ctx, "latchtemporal: activity awaits approval", "activity", name, "workflow_id", info.WorkflowExecution.ID,
		"attempt", info.Attempt, "effect_key", d.EffectKey, "approval_id", d.ApprovalID)
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("latchtemporal: activity %s refused: approval_required: approval %s "+
		"(effect %q) awaits a person (latch approve %s); a workflow using ExecuteApproved waits for it: %v", name, d.ApprovalID, d.EffectKey, d.ApprovalID, err),
		ErrTypeRefused, err, d)
}
