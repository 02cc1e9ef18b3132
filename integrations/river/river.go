// Package latchriver protects River workers with latch, so that a job whose effect already
// happened, or whose earlier attempt's outcome is unknown, does not run it again.
//
// River retries a job whose Work returned an error, and rescues a job whose worker vanished.
// Neither can tell "nothing happened" from "I don't know what happened". Wrap reserves the
// job's effect key (rendered from the job's args by the policy's effect template) before the
// worker runs, and turns latch's answer into River's:
//
//	committed          the job completes
//	duplicate of a     the job completes without running (the effect already happened:
//	committed effect   a redelivered or re-inserted job)
//	NotExecuted        the worker's error is returned: River retries on its schedule, and the
//	                   retry reserves the key again as a new attempt
//	ambiguous          with a reconcile hook for the action, the job is snoozed
//	                   (ReconcileSnooze) while the hook may still settle the effect — the
//	                   guard's sweeper (latch.Guard.SweepEvery) or the job's own next run asks
//	                   it — and runs on what it proves: "not executed" runs the job again,
//	                   "committed" completes it without running. After ReconcileFor without an
//	                   answer, or with no hook, the job is cancelled (river.JobCancel) with a
//	                   *JobError naming the effect: never retried until a person resolves it
//	in progress        the job is snoozed: another attempt holds the key under a live lease
//	approval required  a *JobError (Waiting) naming the request and the effect is returned:
//	                   River retries the job on its schedule (NextRetry), and the attempt after
//	                   a person grants the request runs on the grant — the guard finds the
//	                   granted, unspent request for the exact action by itself — once. A
//	                   request whose exact action a person denied cancels the job
//	                   (approval_denied)
//	refused            denied, attempts exhausted, key conflict: the job is cancelled with a
//	                   *JobError saying why
//
// Any other error (the store could not be reached) is returned as it is: the worker did not
// run, and River's retry meets latch again.
//
// The few lines a worker adds, and what happens on each failure, are in
// docs/integrations/river.md of the latch repository.
package latchriver

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// DefaultInProgressSnooze is how long a job waits, by default, when another attempt holds its
// effect key under a live lease.
const DefaultInProgressSnooze = 30 * time.Second

// Defaults of the wait for a reconcile hook.
const (
	// DefaultReconcileSnooze is how long a job whose effect is ambiguous waits, by default,
	// between two looks at whether its reconcile hook settled the effect.
	DefaultReconcileSnooze = time.Minute
	// DefaultReconcileFor is how long, by default, a job waits for a reconcile hook to settle
	// its ambiguous effect, counted from when the effect became ambiguous.
	DefaultReconcileFor = 24 * time.Hour
)

// Config configures Wrap. A nil *Config means all defaults.
type Config struct {
	// Principal is who the worker acts as (Agent required when set). Zero: the principal of the
	// work context or the guard's identity provider; with neither, every job is refused
	// no_principal and cancelled.
	Principal latch.Principal
	// Options are the protected call's options: an effect key template overriding the policy's,
	// the lease, a reconcile hook, Wait for approvals.
	Options *latch.Options
	// TaskFromJob makes each job's call carry the job as its task, "river:job:<id>", which a
	// grant bound to tasks (tasks: ["river:job:*"]) requires. Leave Options.Task empty with it: a
	// call has one task, and two different ones refuse it invalid_argument.
	TaskFromJob bool
	// InProgressSnooze is how long a job is snoozed when another attempt holds its effect key;
	// default DefaultInProgressSnooze.
	InProgressSnooze time.Duration
	// ReconcileSnooze is how long a job whose effect is ambiguous is snoozed when the action
	// has a reconcile hook (Options.Reconcile, which Wrap registers for the guard's sweeper, or
	// one registered with latch.Guard.RegisterReconcile); default DefaultReconcileSnooze. A
	// snooze is not a River attempt.
	ReconcileSnooze time.Duration
	// ReconcileFor is how long a job waits for the hook, counted from when its effect became
	// ambiguous; after it the job is cancelled as without a hook, for a person to resolve.
	// Default DefaultReconcileFor.
	ReconcileFor time.Duration
	// Logger receives one line for each job completed as a duplicate, each job snoozed for a
	// reconcile hook and each job cancelled; default: discarded.
	Logger *slog.Logger
}

// JobError is why a job was cancelled: latch refused to run its effect, or recorded its outcome
// as unknown. Reason is a stable code:
//
//	outcome_unknown   this attempt's outcome is unknown (a lost reply, a timeout, a crash)
//	ambiguous         an earlier attempt's outcome is unknown
//	any other reason  latch refused the call (attempts_exhausted, key_conflict, denied, …)
//
// The words are latch's one refusal vocabulary (latch.RefusalOf, docs/errors.md).
//
// Err is latch's error (it matches latch's sentinels with errors.Is); Key is the effect key
// when latch named one (every effect refusal, and approval_required for a keyed action).
//
// A job waiting for a person (Waiting, Reason approval_required) is not cancelled: the error is
// returned to River, which retries the job. ApprovalID names the request to answer; the job's
// attempt after it is granted runs once on the grant. With Reason approval_denied the job is
// cancelled: ApprovalID is the request a person denied, and Pending the request a later
// attempt asked again, which a person may still grant (then retry the job); Err is then the denial
// as latch types it (it matches latch.ErrApprovalMismatch; latch.RefusalOf says approval_denied).
type JobError struct {
	JobID      int64
	Kind       string
	Key        string
	Reason     string
	ApprovalID string
	Pending    string
	Waiting    bool
	Err        error
}

func (e *JobError) Error() string {
	if e.Waiting {
		return fmt.Sprintf("latchriver: job %d (%s) waits for approval %s (effect %q): once a person grants it "+
			"(latch approve %s), the job's next attempt runs on the grant: %v", e.JobID, e.Kind, e.ApprovalID, e.Key, e.ApprovalID, e.Err)
	}
	what := fmt.Sprintf("latchriver: job %d (%s) cancelled", e.JobID, e.Kind)
	if e.Reason == string(latch.ReasonApprovalDenied) {
		return fmt.Sprintf("%s: approval_denied: approval %s (effect %q) was denied; request %s asks again: "+
			"grant it (latch approve %s), then retry the job: %v", what, e.ApprovalID, e.Key, e.Pending, e.Pending, e.Err)
	}
	if latch.Reason(e.Reason).Kind().NeedsResolution() {
		if e.Key == "" {
			return fmt.Sprintf("%s: its outcome is unknown, so the job is not retried: %v", what, e.Err)
		}
		return fmt.Sprintf("%s: effect %q is ambiguous, so the job is not retried: find out whether it happened, "+
			"resolve it (latch resolve %s --committed or --failed), then retry the job: %v", what, e.Key, e.Key, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", what, e.Reason, e.Err)
}

// Unwrap returns latch's error.
func (e *JobError) Unwrap() error { return e.Err }

// Wrap returns a worker that runs w's Work as the latch action named action, with the job's args
// as the action's arguments. The args w receives are decoded afresh from the canonical bytes
// latch decided on; the job row is the one River fetched. w's Middleware, NextRetry and Timeout
// are kept.
//
// Wrap records the action and the args type for latch's Guard.Check, like latch.Protect.
func Wrap[T river.JobArgs](g *latch.Guard, action string, w river.Worker[T], cfg *Config) river.Worker[T] {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.InProgressSnooze <= 0 {
		c.InProgressSnooze = DefaultInProgressSnooze
	}
	if c.ReconcileSnooze <= 0 {
		c.ReconcileSnooze = DefaultReconcileSnooze
	}
	if c.ReconcileFor <= 0 {
		c.ReconcileFor = DefaultReconcileFor
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	p := &protected[T]{inner: w, cfg: c, action: action, g: g}
	p.run = latch.Protect(g, action, func(ctx context.Context, args T) (struct{}, error) {
		job := ctx.Value(jobKey{}).(*river.Job[T])
		fresh := *job
		fresh.Args = args
		return struct{}{}, w.Work(ctx, &fresh)
	}, c.Options)
	return p
}

type jobKey struct{}

// JobTask is the task a job's call carries with Config.TaskFromJob: "river:job:<id>".
func JobTask(id int64) string { return "river:job:" + strconv.FormatInt(id, 10) }

type protected[T river.JobArgs] struct {
	inner  river.Worker[T]
	cfg    Config
	action string
	g      *latch.Guard
	run    func(context.Context, T) (struct{}, error)
}

func (p *protected[T]) Middleware(job *rivertype.JobRow) []rivertype.WorkerMiddleware {
	return p.inner.Middleware(job)
}

func (p *protected[T]) NextRetry(job *river.Job[T]) time.Time { return p.inner.NextRetry(job) }

func (p *protected[T]) Timeout(job *river.Job[T]) time.Duration { return p.inner.Timeout(job) }

func (p *protected[T]) Work(ctx context.Context, job *river.Job[T]) error {
	if p.cfg.Principal.Agent != "" {
		ctx = latch.WithPrincipal(ctx, p.cfg.Principal)
	}
	if p.cfg.TaskFromJob {
		ctx = latch.WithTask(ctx, JobTask(job.ID))
	}
	_, err := p.run(context.WithValue(ctx, jobKey{}, job), job.Args)
	return p.outcome(ctx, job.JobRow, err)
}

// outcome turns latch's answer into River's.
func (p *protected[T]) outcome(ctx context.Context, job *rivertype.JobRow, err error) error {
	if err == nil {
		return nil
	}
	key := latch.EffectKeyOf(err)
	switch latch.TaskVerdictOf(err) {
	case latch.TaskDuplicate:
		p.cfg.Logger.InfoContext(ctx, "latchriver: effect already committed; job completed without running",
			"job_id", job.ID, "kind", job.Kind, "effect_key", key)
		return nil
	case latch.TaskInProgress:
		return river.JobSnooze(p.cfg.InProgressSnooze)
	case latch.TaskRetry:
		return err
	}
	reason := latch.TaskReason(err)
	if r := latch.RefusalOf(err); r.Kind == latch.KindApprovalRequired {
		return p.awaitApproval(ctx, job, r, err)
	}
	if wait, ok := p.awaitReconcile(ctx, key, reason); ok {
		p.cfg.Logger.InfoContext(ctx, "latchriver: effect ambiguous; job snoozed while its reconcile hook may settle it",
			"job_id", job.ID, "kind", job.Kind, "effect_key", key, "snooze", wait)
		return river.JobSnooze(wait)
	}
	je := &JobError{JobID: job.ID, Kind: job.Kind, Key: key, Reason: reason, Err: err}
	p.cfg.Logger.WarnContext(ctx, "latchriver: job cancelled", "job_id", job.ID, "kind", job.Kind,
		"effect_key", key, "reason", je.Reason, "error", err)
	return river.JobCancel(je)
}

// awaitReconcile decides whether a job stopped because its effect is ambiguous waits for a
// reconcile hook instead of being cancelled, and for how long: only when the action has a hook
// and the effect has been ambiguous for less than ReconcileFor. An effect settled since the
// refusal is looked at again at once.
func (p *protected[T]) awaitReconcile(ctx context.Context, key, reason string) (time.Duration, bool) {
	if key == "" || !latch.Reason(reason).Kind().NeedsResolution() || p.g.ReconcileHook(p.action) == nil {
		return 0, false
	}
	eff, err := p.g.Store().Effect(ctx, key)
	switch {
	case err != nil:
		return p.cfg.ReconcileSnooze, true // cannot tell how long it has waited: look again later
	case eff.State != latch.StateAmbiguous:
		return 0, true
	case time.Since(eff.UpdatedAt) >= p.cfg.ReconcileFor:
		return 0, false
	}
	return p.cfg.ReconcileSnooze, true
}

// awaitApproval turns approval_required into River's answer: the job is retried, on its
// schedule, until a person answers the request — the attempt after a grant runs on it — unless
// the last answer to the exact action was a denial, which cancels the job.
func (p *protected[T]) awaitApproval(ctx context.Context, job *rivertype.JobRow, r *latch.Refusal, err error) error {
	je := &JobError{JobID: job.ID, Kind: job.Kind, Key: r.EffectKey, Reason: string(r.Reason), ApprovalID: r.ApprovalID, Err: err}
	if ans, cerr := interrupt.Check(ctx, p.g, r); cerr == nil && ans.Status == interrupt.Denied {
		// The error is the denial's, as latch types it (ErrApprovalMismatch, approval_denied).
		je.Reason, je.ApprovalID, je.Pending, je.Err = string(latch.ReasonApprovalDenied), ans.ApprovalID, ans.Pending, ans.Refusal().Err()
		p.cfg.Logger.WarnContext(ctx, "latchriver: job cancelled", "job_id", job.ID, "kind", job.Kind,
			"effect_key", je.Key, "reason", je.Reason, "approval_id", je.ApprovalID, "pending", je.Pending)
		return river.JobCancel(je)
	}
	je.Waiting = true
	p.cfg.Logger.InfoContext(ctx, "latchriver: job waits for approval; retried on its schedule",
		"job_id", job.ID, "kind", job.Kind, "effect_key", je.Key, "approval_id", je.ApprovalID, "attempt", job.Attempt)
	return je
}
