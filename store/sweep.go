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
	next := *a
	next.Status = Expired
	ev := NewEvent(EventApprovalInvalidated, req.Now, "", "", a.ID,
		map[string]any{"reason": "expired", "status": string(a.Status), "by": "sweeper"})
	return &ApprovalWrite{PrevStatus: a.Status, Next: next}, []Event{ev}, nil
}
