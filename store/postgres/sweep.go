package postgres

import (
	"context"
	"errors"

	"github.com/latchkit/latch/store"
)

// swept is what a sweep write returns: the row as written and its events.
type swept struct {
	effect   *store.Effect
	approval *store.Approval
	events   []store.Event
}

// LapseLease writes a lapsed lease ambiguous with its event, in one transaction, compare-and-set
// on the attempt read; store.ErrNothingToSweep when the record is not, or no longer, a lapsed
// lease of that attempt.
func (s *Store) LapseLease(ctx context.Context, req *store.LapseRequest) (*store.Effect, []store.Event, error) {
	if req == nil {
		return nil, nil, errors.New("lapse lease: nil request")
	}
	w, err := s.write(ctx, "lapse lease on "+req.Key, func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil { // it appends a record: the head first (the lock order)
			return err
		}
		eff, err := t.readEffect(ctx, req.Key)
		if err != nil {
			return err
		}
		ew, evs, err := store.PlanLapse(req, eff)
		if err != nil {
			return refused{err}
		}
		written, _, err := t.apply(ctx, ew, nil, evs, req.Now, store.LeaseLapsedRecord(&ew.Next, req.Now))
		if err != nil {
			return err
		}
		t.w.result = &swept{effect: &ew.Next, events: written}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	r := w.result.(*swept)
	return r.effect, r.events, nil
}

// ExpireApproval writes an expired approval request expired with its event, in one
// transaction, compare-and-set on its status; store.ErrNothingToSweep when it is not, or no
// longer, pending or granted and expired.
func (s *Store) ExpireApproval(ctx context.Context, req *store.ExpireRequest) (*store.Approval, []store.Event, error) {
	if req == nil {
		return nil, nil, errors.New("expire approval: nil request")
	}
	w, err := s.write(ctx, "expire approval "+req.ID, func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil { // it appends a record: the head first (the lock order)
			return err
		}
		a, err := t.readApproval(ctx, req.ID)
		if err != nil {
			return err
		}
		aw, evs, err := store.PlanExpire(req, a)
		if err != nil {
			return refused{err}
		}
		written, _, err := t.apply(ctx, nil, aw, evs, req.Now, store.ExpiryRecord(&aw.Next, req.Now))
		if err != nil {
			return err
		}
		t.w.result = &swept{approval: &aw.Next, events: written}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	r := w.result.(*swept)
	return r.approval, r.events, nil
}
