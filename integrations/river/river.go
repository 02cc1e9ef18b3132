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
//	ambiguous          the job is cancelled (river.JobCancel) with a *JobError naming the
//	                   effect: never retried until a person or a reconcile hook resolves it
//	in progress        the job is snoozed: another attempt holds the key under a live lease
//	refused            denied, approval required, attempts exhausted, key conflict: the job is
//	                   cancelled with a *JobError saying why
//
// Any other error (the store could not be reached) is returned as it is: the worker did not
// run, and River's retry meets latch again.
//
// The few lines a worker adds, and what happens on each failure, are in
// docs/integrations/river.md of the latch repository.
package latchriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/latchkit/latch"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// DefaultInProgressSnooze is how long a job waits, by default, when another attempt holds its
// effect key under a live lease.
const DefaultInProgressSnooze = 30 * time.Second

// Config configures Wrap. A nil *Config means all defaults.
type Config struct {
	// Principal is who the worker acts as (Agent required when set). Zero: the principal of the
	// work context or the guard's identity provider; with neither, every job is refused
	// no_principal and cancelled.
	Principal latch.Principal
	// Options are the protected call's options: an effect key template overriding the policy's,
	// the lease, a reconcile hook, Wait for approvals.
	Options *latch.Options
	// InProgressSnooze is how long a job is snoozed when another attempt holds its effect key;
	// default DefaultInProgressSnooze.
	InProgressSnooze time.Duration
	// Logger receives one line for each job completed as a duplicate and each job cancelled;
	// default: discarded.
	Logger *slog.Logger
}

// JobError is why a job was cancelled: latch refused to run its effect, or recorded its outcome
// as unknown. Reason is a stable code:
//
//	ambiguous         this attempt's outcome is unknown (a lost reply, a timeout, a crash)
//	ambiguous_effect  an earlier attempt's outcome is unknown
//	attempts_exhausted, key_conflict, denied, approval_required, approval_refused,
//	invalid_argument, authority, identity
//	                  latch refused the call
//
// Err is latch's error (it matches latch's sentinels with errors.Is); Key is the effect key
// when latch named one.
type JobError struct {
	JobID  int64
	Kind   string
	Key    string
	Reason string
	Err    error
}

func (e *JobError) Error() string {
	what := fmt.Sprintf("latchriver: job %d (%s) cancelled", e.JobID, e.Kind)
	switch e.Reason {
	case "ambiguous", "ambiguous_effect":
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
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	p := &protected[T]{inner: w, cfg: c, action: action}
	p.run = latch.Protect(g, action, func(ctx context.Context, args T) (struct{}, error) {
		job := ctx.Value(jobKey{}).(*river.Job[T])
		fresh := *job
		fresh.Args = args
		return struct{}{}, w.Work(ctx, &fresh)
	}, c.Options)
	return p
}

type jobKey struct{}

type protected[T river.JobArgs] struct {
	inner  river.Worker[T]
	cfg    Config
	action string
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
	_, err := p.run(context.WithValue(ctx, jobKey{}, job), job.Args)
	return p.outcome(ctx, job.JobRow, err)
}

// outcome turns latch's answer into River's.
func (p *protected[T]) outcome(ctx context.Context, job *rivertype.JobRow, err error) error {
	if err == nil {
		return nil
	}
	key := effectKey(err)
	switch verdictOf(err) {
	case duplicate:
		p.cfg.Logger.InfoContext(ctx, "latchriver: effect already committed; job completed without running",
			"job_id", job.ID, "kind", job.Kind, "effect_key", key)
		return nil
	case inProgress:
		return river.JobSnooze(p.cfg.InProgressSnooze)
	case retry:
		return err
	}
	je := &JobError{JobID: job.ID, Kind: job.Kind, Key: key, Reason: reason(err), Err: err}
	p.cfg.Logger.WarnContext(ctx, "latchriver: job cancelled", "job_id", job.ID, "kind", job.Kind,
		"effect_key", key, "reason", je.Reason, "error", err)
	return river.JobCancel(je)
}

// verdict is what a queue does with a job after latch's answer.
type verdict int

const (
	done       verdict = iota // the effect committed in this attempt
	duplicate                 // the effect committed earlier: complete without running
	inProgress                // another attempt holds the key: try later, without counting a failure
	retry                     // nothing happened (NotExecuted, or latch could not reach its store): retry
	stop                      // ambiguous or refused: never retry until a person acts
)

// verdictOf maps the error of a protected call to a verdict.
func verdictOf(err error) verdict {
	var ee *latch.EffectError
	switch {
	case err == nil:
		return done
	case errors.As(err, &ee) && ee.Reason == "key_conflict":
		return stop // another call's arguments under this key: a person must look
	case errors.Is(err, latch.ErrAlreadyCommitted):
		return duplicate
	case errors.Is(err, latch.ErrInProgress):
		return inProgress
	case errors.Is(err, latch.ErrAmbiguous), errors.Is(err, latch.ErrAmbiguousEffect),
		errors.Is(err, latch.ErrAttemptsExhausted), errors.Is(err, latch.ErrDenied),
		errors.Is(err, latch.ErrApprovalRequired), errors.Is(err, latch.ErrApprovalMismatch),
		errors.Is(err, latch.ErrAuthority), errors.Is(err, latch.ErrIdentity),
		errors.Is(err, latch.ErrInvalidArgument), errors.Is(err, latch.ErrDuplicateEffect):
		return stop
	}
	// NotExecuted, or an error before the executor ran (the store unreachable): the retry goes
	// through latch again, which refuses it if anything was reserved meanwhile.
	return retry
}

func reason(err error) string {
	var ee *latch.EffectError
	if errors.As(err, &ee) && ee.Reason != "" && ee.Reason != "ambiguous" {
		return ee.Reason
	}
	switch {
	case errors.Is(err, latch.ErrAmbiguous):
		return "ambiguous"
	case errors.Is(err, latch.ErrAmbiguousEffect):
		return "ambiguous_effect"
	case errors.Is(err, latch.ErrAttemptsExhausted):
		return "attempts_exhausted"
	case errors.Is(err, latch.ErrApprovalRequired):
		return "approval_required"
	case errors.Is(err, latch.ErrApprovalMismatch):
		return "approval_refused"
	case errors.Is(err, latch.ErrInvalidArgument):
		return "invalid_argument"
	case errors.Is(err, latch.ErrDenied):
		return "denied"
	case errors.Is(err, latch.ErrAuthority):
		return "authority"
	case errors.Is(err, latch.ErrIdentity):
		return "identity"
	}
	return "refused"
}

// effectKey is the effect key latch's error names, or "".
func effectKey(err error) string {
	var ae *latch.AmbiguousError
	if errors.As(err, &ae) {
		return ae.Key
	}
	var ee *latch.EffectError
	if errors.As(err, &ee) {
		return ee.Key
	}
	return ""
}
