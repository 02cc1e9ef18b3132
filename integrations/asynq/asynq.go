// Package latchasynq protects asynq task handlers with latch, so that a task whose effect already
// happened, or whose earlier attempt's outcome is unknown, does not run it again.
//
// asynq retries a task whose handler returned an error, and re-queues one whose worker vanished.
// Neither can tell "nothing happened" from "I don't know what happened". Handler (one handler)
// and Middleware (every handler of a ServeMux) reserve the task's effect key — rendered from its
// JSON payload by the policy's effect template — before the handler runs, and turn latch's answer
// into asynq's:
//
//	committed          the task completes
//	duplicate of a     the task completes without running (the effect already happened:
//	committed effect   a re-enqueued or redelivered task)
//	NotExecuted        the handler's error is returned: asynq retries on its schedule, and the
//	                   retry reserves the key again as a new attempt
//	ambiguous          with a reconcile hook for the action, a *TaskError (Waiting) that asynq
//	                   retries on its schedule while the hook may still settle the effect — the
//	                   guard's sweeper (latch.Guard.SweepEvery) or the retry itself asks it — and
//	                   the retry runs on what it proves: "not executed" runs the handler again,
//	                   "committed" completes the task without running. With no hook, after
//	                   ReconcileFor, or once MaxRetry is spent: a *TaskError naming the effect,
//	                   wrapping asynq.SkipRetry: the task is archived, never retried until a
//	                   person resolves it
//	in progress        the error is returned: another attempt holds the key under a live lease,
//	                   and asynq's retry meets latch again
//	approval required  a *TaskError (Waiting) naming the request and the effect: asynq retries
//	                   the task on its schedule (RetryDelayFunc, MaxRetry), and the retry after a
//	                   person grants the request runs on the grant — the guard finds the
//	                   granted, unspent request for the exact action by itself — once. On the
//	                   last retry, or when a person denied the exact action (approval_denied),
//	                   a *TaskError wrapping asynq.SkipRetry: the task is archived
//	refused            denied, attempts exhausted, key conflict: a *TaskError wrapping
//	                   asynq.SkipRetry
//
// Any other error (the store could not be reached) is returned as it is: the handler did not
// run, and asynq's retry meets latch again.
//
// The payload must be a JSON object; its fields are the action's arguments. latch decides on its
// canonical form; the handler receives the task as it came, whose payload holds the same values
// (latch refuses a payload it cannot represent exactly: a float, a duplicate key, invalid UTF-8).
//
// The few lines a server adds, and what happens on each failure, are in
// docs/integrations/asynq.md of the latch repository.
package latchasynq

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
)

// Config configures Handler and Middleware. A nil *Config means all defaults.
type Config struct {
	// Principal is who the handlers act as (Agent required when set). Zero: the principal of the
	// task's context or the guard's identity provider; with neither, every task is refused
	// no_principal.
	Principal latch.Principal
	// Options are the protected call's options: an effect key template overriding the policy's,
	// the lease, a reconcile hook, Wait for approvals.
	Options *latch.Options
	// TaskFromTask makes each task's call carry the asynq task as its latch task,
	// "asynq:task:<id>" (TaskOf), which a grant bound to tasks (tasks: ["asynq:task:*"])
	// requires. Leave Options.Task empty with it: a call has one task, and two different ones
	// refuse it invalid_argument.
	TaskFromTask bool
	// Action names the latch action of a task, for Middleware; default: the task's type. Every
	// task that passes the middleware is an action, so a task type the policy does not list is
	// denied, never run unprotected.
	Action func(*asynq.Task) string
	// ReconcileFor is how long a task whose effect is ambiguous is retried, when its action has
	// a reconcile hook, counted from when the effect became ambiguous; after it the task is
	// archived as without a hook. Default DefaultReconcileFor. The task's MaxRetry and the
	// server's RetryDelayFunc bound and space the retries as for any error.
	ReconcileFor time.Duration
	// Logger receives one line for each task completed as a duplicate, each task retried for a
	// reconcile hook and each task stopped; default: discarded.
	Logger *slog.Logger
}

// DefaultReconcileFor is how long, by default, a task is retried while a reconcile hook may
// settle its ambiguous effect, counted from when the effect became ambiguous.
const DefaultReconcileFor = 24 * time.Hour

// TaskOf is the latch task the call of the asynq task id carries with Config.TaskFromTask:
// "asynq:task:<id>".
func TaskOf(id string) string { return "asynq:task:" + id }

// TaskError is why a task was stopped: latch refused to run its effect, or recorded its outcome
// as unknown. It wraps asynq.SkipRetry, so asynq archives the task instead of retrying it.
// Reason is a stable code:
//
//	outcome_unknown   this attempt's outcome is unknown (a lost reply, a timeout, a crash)
//	ambiguous         an earlier attempt's outcome is unknown
//	any other reason  latch refused the call (attempts_exhausted, key_conflict, denied, …)
//
// The words are latch's one refusal vocabulary (latch.RefusalOf, docs/errors.md).
//
// Err is latch's error (it matches latch's sentinels with errors.Is); Key is the effect key
// when latch named one (every effect refusal, and approval_required for a keyed action).
// ApprovalID is, with approval_required, the request a person answers; with approval_denied,
// the request a person denied, and Pending the request a later attempt asked again, which a
// person may still grant (then run the archived task again); Err is then the denial
// as latch types it (it matches latch.ErrApprovalMismatch; latch.RefusalOf says approval_denied).
type TaskError struct {
	TaskID     string
	Type       string
	Key        string
	Reason     string
	ApprovalID string
	Pending    string
	Err        error
	// Waiting is set when the task waits — for a person to answer its approval request
	// (approval_required), or because the effect is ambiguous and the action's reconcile hook
	// may still settle it: the error then does not wrap asynq.SkipRetry, and asynq retries the
	// task.
	Waiting bool
}

func (e *TaskError) Error() string {
	if e.Waiting && e.Reason == string(latch.ReasonApprovalRequired) {
		return fmt.Sprintf("latchasynq: task %s (%s) waits for approval %s (effect %q): once a person grants it "+
			"(latch approve %s), the task's next retry runs on the grant: %v", e.TaskID, e.Type, e.ApprovalID, e.Key, e.ApprovalID, e.Err)
	}
	if e.Waiting {
		return fmt.Sprintf("latchasynq: task %s (%s) retried later: effect %q is ambiguous and its reconcile hook may settle it: %v",
			e.TaskID, e.Type, e.Key, e.Err)
	}
	what := fmt.Sprintf("latchasynq: task %s (%s) not retried", e.TaskID, e.Type)
	switch latch.Reason(e.Reason) {
	case latch.ReasonApprovalDenied:
		return fmt.Sprintf("%s: approval_denied: approval %s (effect %q) was denied; request %s asks again: "+
			"grant it (latch approve %s), then run the archived task again: %v", what, e.ApprovalID, e.Key, e.Pending, e.Pending, e.Err)
	case latch.ReasonApprovalRequired:
		return fmt.Sprintf("%s: approval_required: approval %s (effect %q) was not granted before the last retry: "+
			"grant it (latch approve %s), then run the archived task again: %v", what, e.ApprovalID, e.Key, e.ApprovalID, e.Err)
	}
	if latch.Reason(e.Reason).Kind().NeedsResolution() {
		if e.Key == "" {
			return fmt.Sprintf("%s: its outcome is unknown: %v", what, e.Err)
		}
		return fmt.Sprintf("%s: effect %q is ambiguous: find out whether it happened, "+
			"resolve it (latch resolve %s --committed or --failed), then run the archived task again: %v", what, e.Key, e.Key, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", what, e.Reason, e.Err)
}

// Unwrap returns latch's error and, unless the task is Waiting, asynq.SkipRetry.
func (e *TaskError) Unwrap() []error {
	if e.Waiting {
		return []error{e.Err}
	}
	return []error{e.Err, asynq.SkipRetry}
}

// Handler returns a handler that runs h as the latch action named action, with the task's JSON
// payload as the action's arguments.
func Handler(g *latch.Guard, action string, h asynq.Handler, cfg *Config) asynq.Handler {
	c := defaults(cfg)
	if c.Options != nil && c.Options.Reconcile != nil {
		g.RegisterReconcile(action, c.Options.Reconcile) // for the guard's sweeper
	}
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		return c.process(ctx, g, action, h, t)
	})
}

// Middleware returns a ServeMux middleware that runs every task as the latch action
// cfg.Action names (default: the task's type):
//
//	mux.Use(latchasynq.Middleware(g, &latchasynq.Config{Principal: latch.Principal{Agent: "worker"}}))
func Middleware(g *latch.Guard, cfg *Config) asynq.MiddlewareFunc {
	c := defaults(cfg)
	return func(h asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			action := t.Type()
			if c.Action != nil {
				action = c.Action(t)
			}
			return c.process(ctx, g, action, h, t)
		})
	}
}

func defaults(cfg *Config) *Config {
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
	return &c
}

func (c *Config) process(ctx context.Context, g *latch.Guard, action string, h asynq.Handler, t *asynq.Task) error {
	if c.Principal.Agent != "" {
		ctx = latch.WithPrincipal(ctx, c.Principal)
	}
	if id, ok := asynq.GetTaskID(ctx); ok && c.TaskFromTask {
		ctx = latch.WithTask(ctx, TaskOf(id))
	}
	if c.Options != nil && c.Options.Reconcile != nil && g.ReconcileHook(action) == nil {
		g.RegisterReconcile(action, c.Options.Reconcile) // a middleware's action is known per task
	}
	var args json.RawMessage
	if len(t.Payload()) > 0 {
		args = t.Payload()
	}
	_, err := g.Execute(ctx, &latch.Call{Action: action, Arguments: args, Options: c.Options},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			return nil, h.ProcessTask(ctx, t)
		})
	if err == nil {
		return nil
	}
	id, _ := asynq.GetTaskID(ctx)
	key := latch.EffectKeyOf(err)
	switch latch.TaskVerdictOf(err) {
	case latch.TaskDuplicate:
		c.Logger.InfoContext(ctx, "latchasynq: effect already committed; task completed without running",
			"task_id", id, "type", t.Type(), "effect_key", key)
		return nil
	case latch.TaskInProgress, latch.TaskRetry:
		return err
	}
	te := &TaskError{TaskID: id, Type: t.Type(), Key: key, Reason: latch.TaskReason(err), Err: err}
	if r := latch.RefusalOf(err); r.Kind == latch.KindApprovalRequired {
		te.ApprovalID = r.ApprovalID
		return c.awaitApproval(ctx, g, r, te)
	}
	if c.awaitReconcile(ctx, g, action, te) {
		c.Logger.InfoContext(ctx, "latchasynq: effect ambiguous; task retried later while its reconcile hook may settle it",
			"task_id", id, "type", t.Type(), "effect_key", key)
		te.Waiting = true
		return te
	}
	c.Logger.WarnContext(ctx, "latchasynq: task not retried", "task_id", id, "type", t.Type(),
		"effect_key", key, "reason", te.Reason, "error", err)
	return te
}

// awaitReconcile decides whether a task stopped because its effect is ambiguous is retried
// while a reconcile hook may settle the effect: only when the action has a hook, the task has a
// retry left, and the effect has been ambiguous for less than ReconcileFor.
func (c *Config) awaitReconcile(ctx context.Context, g *latch.Guard, action string, te *TaskError) bool {
	if te.Key == "" || !latch.Reason(te.Reason).Kind().NeedsResolution() || g.ReconcileHook(action) == nil {
		return false
	}
	retried, ok1 := asynq.GetRetryCount(ctx)
	maxRetry, ok2 := asynq.GetMaxRetry(ctx)
	if ok1 && ok2 && retried >= maxRetry {
		return false // the last retry: archived naming the effect, for a person
	}
	eff, err := g.Store().Effect(ctx, te.Key)
	if err != nil {
		return true // cannot tell how long it has waited: asynq's retries still bound it
	}
	return eff.State != latch.StateAmbiguous || time.Since(eff.UpdatedAt) < c.ReconcileFor
}

// awaitApproval turns approval_required into asynq's answer: the task is retried, on its
// schedule, until a person answers the request — the retry after a grant runs on it — unless the
// last answer to the exact action was a denial, or this was the task's last retry: then it is
// archived.
func (c *Config) awaitApproval(ctx context.Context, g *latch.Guard, r *latch.Refusal, te *TaskError) error {
	if ans, err := interrupt.Check(ctx, g, r); err == nil && ans.Status == interrupt.Denied {
		// The error is the denial's, as latch types it (ErrApprovalMismatch, approval_denied).
		te.Reason, te.ApprovalID, te.Pending, te.Err = string(latch.ReasonApprovalDenied), ans.ApprovalID, ans.Pending, ans.Refusal().Err()
	} else {
		retried, ok1 := asynq.GetRetryCount(ctx)
		maxRetry, ok2 := asynq.GetMaxRetry(ctx)
		te.Waiting = !ok1 || !ok2 || retried < maxRetry
	}
	if te.Waiting {
		c.Logger.InfoContext(ctx, "latchasynq: task waits for approval; retried on its schedule", "task_id", te.TaskID,
			"type", te.Type, "effect_key", te.Key, "approval_id", te.ApprovalID)
		return te
	}
	c.Logger.WarnContext(ctx, "latchasynq: task not retried", "task_id", te.TaskID, "type", te.Type,
		"effect_key", te.Key, "reason", te.Reason, "approval_id", te.ApprovalID, "pending", te.Pending)
	return te
}
