package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchkit/latch/store"
)

// LapseLease writes a lapsed lease ambiguous with its event, in one transaction;
// store.ErrNothingToSweep when the record is not, or no longer, a lapsed lease of that attempt.
func (s *Store) LapseLease(ctx context.Context, req *store.LapseRequest) (*store.Effect, []store.Event, error) {
	if req == nil {
		return nil, nil, errors.New("lapse lease: nil request")
	}
	var out *store.Effect
	var events []store.Event
	var refusal error
	err := s.write(ctx, func(t *txn) error {
		eff, err := t.effect(req.Key)
		if err != nil {
			return err
		}
		w, evs, err := store.PlanLapse(req, eff)
		if err != nil {
			refusal = err
			return errRefused
		}
		if events, _, err = t.apply(w, nil, evs, req.Now, store.LeaseLapsedRecord(&w.Next, req.Now)); err != nil {
			return err
		}
		out = &w.Next
		return nil
	})
	if errors.Is(err, errRefused) {
		return nil, nil, refusal
	}
	if err != nil {
		return nil, nil, fmt.Errorf("lapse lease on %s: %w", req.Key, err)
	}
	return out, events, nil
}

// ExpireApproval writes an expired approval request expired with its event, in one
// transaction; store.ErrNothingToSweep when it is not, or no longer, pending or granted and
// expired.
func (s *Store) ExpireApproval(ctx context.Context, req *store.ExpireRequest) (*store.Approval, []store.Event, error) {
	if req == nil {
		return nil, nil, errors.New("expire approval: nil request")
	}
	var out *store.Approval
	var events []store.Event
	var refusal error
	err := s.write(ctx, func(t *txn) error {
		a, err := t.approval(req.ID)
		if err != nil {
			return err
		}
		w, evs, err := store.PlanExpire(req, a)
		if err != nil {
			refusal = err
			return errRefused
		}
		if events, _, err = t.apply(nil, w, evs, req.Now, store.ExpiryRecord(&w.Next, req.Now)); err != nil {
			return err
		}
		out = &w.Next
		return nil
	})
	if errors.Is(err, errRefused) {
		return nil, nil, refusal
	}
	if err != nil {
		return nil, nil, fmt.Errorf("expire approval %s: %w", req.ID, err)
	}
	return out, events, nil
}
