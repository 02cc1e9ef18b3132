// Package interrupt is the contract between latch and a framework that can pause a piece of work
// for a person and resume it with the answer: a workflow that waits on a signal, a queue that
// runs a job again later, an MCP gateway that holds a call, an agent graph that interrupts.
//
// A protected call refused approval_required, or whose effect's outcome is unknown, is not a
// failure to report: it waits for a person (who answers the approval request) or for a
// resolution (a person or a reconcile hook settles the effect). An adapter that can wait routes
// such a refusal (Interruptible) through its framework's own pause — an Interrupter — and
// resumes with the Answer:
//
//	Resume    run the call again, unchanged: it meets the answer. The guard finds the granted,
//	          unspent request for the exact action by itself (no approval id is passed), spends
//	          it once and runs; a resolved effect runs again (failed) or is a duplicate with its
//	          stored result (committed).
//	Denied    stop: a person denied the request. Answer.Refusal is approval_denied.
//	Expired   stop: nobody answered before the request expired. Answer.Refusal is
//	          approval_expired.
//
// Check reads, once, where the wait stands in the guard's store; an Interrupter polls it (Poller
// does, for work that can block), or wakes on a notification (a Temporal signal, a webhook) and
// then reads it. How each adapter of
// the latch repository maps onto the contract is in docs/integrations/interrupts.md.
package interrupt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// Status is where the wait for a person or a resolution stands.
type Status string

// Statuses of a wait.
const (
	// Waiting: no answer yet. The request is pending and unexpired, or the effect is still
	// ambiguous.
	Waiting Status = "waiting"
	// Resume: the call may run again and meets the answer: the request was granted (or spent by
	// another attempt of the same action, which the next one meets as a duplicate), or the
	// effect was resolved.
	Resume Status = "resume"
	// Denied: a person denied the request (or, for the request an attempt was handed, the last
	// answer to its exact action was a denial).
	Denied Status = "denied"
	// Expired: the request expired before anyone answered it.
	Expired Status = "expired"
)

// Answer is how an interrupt ended, or where it stands: what the framework resumes with.
type Answer struct {
	Status Status `json:"status"`
	// ApprovalID is the request the answer is about: the request waited on, or with Denied the
	// request a person denied.
	ApprovalID string `json:"approval_id,omitempty"`
	// EffectKey is the effect the call is for ("" for an unkeyed action).
	EffectKey string `json:"effect_key,omitempty"`
	// By is who answered (the approver, or who resolved the effect); "" when unknown.
	By string `json:"by,omitempty"`
	// Pending is, with Denied, a request for the same action asked after the denial (a later
	// attempt asked again): granting it and running the work again proceeds.
	Pending string `json:"pending,omitempty"`
}

// Refusal returns the refusal a call that stops on a reports: approval_denied for Denied,
// approval_expired for Expired, nil for Waiting and Resume.
func (a Answer) Refusal() *latch.Refusal {
	var reason latch.Reason
	switch a.Status {
	case Denied:
		reason = latch.ReasonApprovalDenied
	case Expired:
		reason = latch.ReasonApprovalExpired
	default:
		return nil
	}
	detail := fmt.Sprintf("approval %s %s", a.ApprovalID, a.Status)
	if a.By != "" {
		detail += " by " + a.By
	}
	return &latch.Refusal{Kind: latch.KindApprovalRefused, Reason: reason, ApprovalID: a.ApprovalID, EffectKey: a.EffectKey, Detail: detail}
}

// Interrupter routes a refusal a framework can wait out through the framework's own pause, and
// returns the answer it resumed with: it blocks (durably, where the framework can) until the
// wait for r is over, then returns an Answer whose Status is Resume, Denied or Expired. C is the
// framework's context: context.Context for most, workflow.Context for a Temporal workflow.
//
// An error means the wait itself failed (the context ended, the store could not be read): the
// work neither resumes nor stops on a person's answer, and the framework handles the error as
// any other.
type Interrupter[C any] interface {
	Interrupt(ctx C, r *latch.Refusal) (Answer, error)
}

// Interruptible reports whether r is a refusal a framework can wait out: approval_required with
// its request named, or an effect whose outcome is unknown (ambiguous, outcome_conflict,
// outcome_unknown, key_lost) with its effect key named.
func Interruptible(r *latch.Refusal) bool {
	if r == nil {
		return false
	}
	if r.Kind == latch.KindApprovalRequired {
		return r.ApprovalID != ""
	}
	return r.EffectKey != "" && r.Kind.NeedsResolution()
}

// ErrNotInterruptible is returned by Check for a refusal no answer or resolution ends.
var ErrNotInterruptible = errors.New("interrupt: not a refusal a person or a resolution answers")

// Check reads, once, where the wait for the refusal r stands in g's store:
//
//   - approval_required: the request r names. Pending and unexpired is Waiting, unless the
//     request records that the last answer to its exact action was a denial (a later attempt of
//     a denied call asked again): that is Denied, naming the denied request, with the new one in
//     Answer.Pending. Granted or consumed is Resume; denied is Denied; expired (or pending past
//     its expiry) is Expired.
//   - an unknown outcome: the effect r names. Still ambiguous is Waiting; resolved is Resume.
func Check(ctx context.Context, g *latch.Guard, r *latch.Refusal) (Answer, error) {
	if !Interruptible(r) {
		return Answer{}, ErrNotInterruptible
	}
	if r.Kind != latch.KindApprovalRequired {
		eff, err := g.Store().Effect(ctx, r.EffectKey)
		if err != nil {
			return Answer{}, fmt.Errorf("check effect %s: %w", r.EffectKey, err)
		}
		if eff.State == store.Ambiguous {
			return Answer{Status: Waiting, EffectKey: r.EffectKey}, nil
		}
		return Answer{Status: Resume, EffectKey: r.EffectKey, By: eff.ResolvedBy}, nil
	}
	a, err := g.Store().Approval(ctx, r.ApprovalID)
	if err != nil {
		return Answer{}, fmt.Errorf("check approval %s: %w", r.ApprovalID, err)
	}
	ans := Answer{ApprovalID: a.ID, EffectKey: r.EffectKey, By: a.Approver}
	switch a.Status {
	case store.Granted, store.Consumed:
		ans.Status = Resume
	case store.Denied:
		ans.Status = Denied
	case store.Expired:
		ans.Status = Expired
	default:
		switch {
		case a.PreviousDenied != "":
			ans.Status, ans.ApprovalID, ans.By, ans.Pending = Denied, a.PreviousDenied, a.PreviousDeniedBy, a.ID
		case !g.Now().Before(a.ExpiresAt):
			ans.Status = Expired
		default:
			ans.Status = Waiting
		}
	}
	return ans, nil
}

// DefaultPollEvery is how often, by default, a Poller reads where a wait stands.
const DefaultPollEvery = 2 * time.Second

// Poller is the Interrupter for work that can block in its own goroutine (an in-process tool
// call, an MCP server's handler, a worker that holds its job): Interrupt reads Check every Every
// (default DefaultPollEvery) until the wait is over or ctx ends. It is not durable: a process
// that stops loses the wait (the request stays stored, and the call run again meets it).
type Poller struct {
	Guard *latch.Guard
	Every time.Duration
}

var _ Interrupter[context.Context] = Poller{}

// Interrupt blocks until the wait for r is over — Resume, Denied or Expired — or ctx ends (an
// error matching ctx's).
func (p Poller) Interrupt(ctx context.Context, r *latch.Refusal) (Answer, error) {
	every := p.Every
	if every <= 0 {
		every = DefaultPollEvery
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return Answer{}, fmt.Errorf("interrupt: wait for %s: %w", what(r), ctx.Err())
		case <-t.C:
		}
		ans, err := Check(ctx, p.Guard, r)
		if err != nil || ans.Status != Waiting {
			return ans, err
		}
		t.Reset(every)
	}
}

func what(r *latch.Refusal) string {
	if r != nil && r.ApprovalID != "" {
		return "approval " + r.ApprovalID
	}
	if r != nil {
		return "effect " + r.EffectKey
	}
	return "nothing"
}
