package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch/internal/safetext"
)

// ErrNothingToSweep refuses a sweep write whose record is not, or no longer, due: the lease is
// live, the holder reported, someone else swept it first, the approval was answered or spent.
// Nothing was written.
var ErrNothingToSweep = errors.New("nothing to sweep")

// LapseRequest asks a store to write ambiguous the executing record of Key whose lease lapsed
// at or before Now, as a reservation that met it would (docs/guarantees.md#effect-states), so
// that it is seen without waiting for a contender. ActionID and Attempt name the attempt the
// sweeper read: the write is a compare-and-set on them.
type LapseRequest struct {
	Now      time.Time
	Key      string
	ActionID string
	Attempt  int
}

// ExpireRequest asks a store to write expired an approval request, pending or granted, whose
// expiry passed at or before Now.
type ExpireRequest struct {
	Now time.Time
	ID  string
	// Deny writes a pending request denied instead, by ExpiryApprover: its action's
	// approvers.on_expiry is deny (PlanExpiry).
	Deny bool
}

// Sweeper is implemented by stores that settle what time alone ended, each as one
// compare-and-set write with its event; both built-in stores do. Any number of sweepers may
// race on one store: one of them writes, the others get ErrNothingToSweep.
type Sweeper interface {
	// LapseLease writes a lapsed lease ambiguous and returns the record and the event written
	// (with its store id).
	LapseLease(ctx context.Context, req *LapseRequest) (*Effect, []Event, error)
	// ExpireApproval writes an expired request expired and returns it and the event written.
	ExpireApproval(ctx context.Context, req *ExpireRequest) (*Approval, []Event, error)
}

// PlanLapse decides a LapseRequest from the record the backend read (nil when none).
func PlanLapse(req *LapseRequest, eff *Effect) (*EffectWrite, []Event, error) {
	if err := CheckText("effect key", req.Key); err != nil {
		return nil, nil, fmt.Errorf("lapse lease: %w", err)
	}
	if eff == nil || eff.ActionID != req.ActionID || eff.Attempt != req.Attempt || !LeaseLapsed(eff, req.Now) {
		return nil, nil, fmt.Errorf("lapse lease on %s: %w", safetext.Quote(req.Key), ErrNothingToSweep)
	}
	next := lapse(eff, req.Now)
	ev := NewEvent(EventExecutionAmbiguous, req.Now, eff.ActionID, eff.Key, "",
		map[string]any{"cause": "lease_expired", "holder": eff.ActionID, "attempt": eff.Attempt, "by": "sweeper"})
	return &EffectWrite{Prev: eff, Next: next}, []Event{ev}, nil
}

// PlanExpire decides an ExpireRequest from the request the backend read (nil when none).
func PlanExpire(req *ExpireRequest, a *Approval) (*ApprovalWrite, []Event, error) {
	if err := CheckText("approval id", req.ID); err != nil {
		return nil, nil, fmt.Errorf("expire approval: %w", err)
	}
	if a == nil || (a.Status != Pending && a.Status != Granted) || req.Now.Before(a.ExpiresAt) {
		return nil, nil, fmt.Errorf("expire approval %s: %w", safetext.Quote(req.ID), ErrNothingToSweep)
	}
	w, ev := PlanExpiry(a, req.Now, req.Deny, ExpiredBySweeper)
	return w, []Event{ev}, nil
}

// ReconcileClaim is a sweeper's claim on asking the reconcile hook about one ambiguous attempt
// of an effect (docs/guarantees.md#the-sweeper-asks-reconcile-hooks). While it is held (until
// HeldUntil) no other sweeper, in any process, asks about that effect; after it, none asks about
// the same attempt before NextAt, so a hook that keeps answering "unknown" is asked again
// later, with a growing wait, never in a loop.
type ReconcileClaim struct {
	Key       string
	Attempt   int    // the ambiguous attempt asked about
	Holder    string // the sweeper that claimed it
	Tries     int    // how many times the hook was asked about this attempt, this claim included
	ClaimedAt time.Time
	HeldUntil time.Time // the claim excludes other sweepers until then
	NextAt    time.Time // the earliest next claim on the same attempt
}

// ClaimRequest asks a store to claim asking about attempt Attempt of the ambiguous effect Key,
// for Holder, at Now.
type ClaimRequest struct {
	Now     time.Time
	Key     string
	Attempt int
	Holder  string
	// Hold is how long the claim excludes other sweepers: the hook's deadline and a margin.
	Hold time.Duration
	// Backoff is the wait after the first ask before the next; it doubles after each further
	// ask of the same attempt, up to MaxBackoff. The next ask is never sooner than Hold.
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// ReconcileClaimer is implemented by stores that keep reconcile claims; both built-in stores
// do. A claim is one compare-and-set write, so of any number of sweepers racing for one effect
// exactly one gets it.
type ReconcileClaimer interface {
	// ClaimReconcile claims asking about an ambiguous attempt and returns the claim written;
	// ErrNothingToSweep, writing nothing, when the effect is not ambiguous at that attempt, another
	// sweeper holds it, or the attempt is not due yet (NextAt).
	ClaimReconcile(ctx context.Context, req *ClaimRequest) (*ReconcileClaim, error)
	// ReconcileClaims returns every claim, by effect key: one per effect, the last one made.
	ReconcileClaims(ctx context.Context) ([]*ReconcileClaim, error)
}

// ReconcileBackoff is the wait after the tries-th ask of one attempt: base, doubled after each
// further ask, at most ceiling.
func ReconcileBackoff(tries int, base, ceiling time.Duration) time.Duration {
	d := base
	for i := 1; i < tries && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

// PlanClaim decides a ClaimRequest from the effect record (nil when none) and the effect's
// current claim (nil when none) the backend read.
func PlanClaim(req *ClaimRequest, eff *Effect, prev *ReconcileClaim) (*ReconcileClaim, error) {
	if err := CheckText("effect key", req.Key); err != nil {
		return nil, fmt.Errorf("claim reconcile: %w", err)
	}
	if err := CheckText("sweeper", req.Holder); err != nil {
		return nil, fmt.Errorf("claim reconcile %s: %w", safetext.Quote(req.Key), err)
	}
	if req.Holder == "" {
		return nil, fmt.Errorf("claim reconcile %s: no sweeper named", safetext.Quote(req.Key))
	}
	if req.Attempt < 1 || req.Hold <= 0 || req.Backoff < 0 || req.MaxBackoff < req.Backoff {
		return nil, fmt.Errorf("claim reconcile %s: attempt %d, hold %v, backoff %v up to %v: want an attempt from 1, a positive hold and a backoff no longer than its maximum",
			safetext.Quote(req.Key), req.Attempt, req.Hold, req.Backoff, req.MaxBackoff)
	}
	nothing := func(why string) error {
		return fmt.Errorf("claim reconcile %s: %s: %w", safetext.Quote(req.Key), why, ErrNothingToSweep)
	}
	switch {
	case eff == nil || eff.State != Ambiguous || eff.Attempt != req.Attempt:
		return nil, nothing("not ambiguous at that attempt")
	case prev != nil && req.Now.Before(prev.HeldUntil):
		return nil, nothing("claimed by " + prev.Holder)
	case prev != nil && prev.Attempt == req.Attempt && req.Now.Before(prev.NextAt):
		return nil, nothing("not due")
	}
	tries := 1
	if prev != nil && prev.Attempt == req.Attempt {
		tries = prev.Tries + 1
	}
	return &ReconcileClaim{Key: req.Key, Attempt: req.Attempt, Holder: req.Holder, Tries: tries, ClaimedAt: req.Now,
		HeldUntil: req.Now.Add(req.Hold), NextAt: req.Now.Add(max(req.Hold, ReconcileBackoff(tries, req.Backoff, req.MaxBackoff)))}, nil
}
