package sqlite

import (
	"context"
	"database/sql"
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

var _ store.ReconcileClaimer = (*Store)(nil)

// claimsVersion is the schema version that added reconcile claims.
const claimsVersion = 14

const claimColumns = `effect_key, attempt, holder, tries, claimed_at, held_until, next_at`

// ClaimReconcile claims asking about an ambiguous attempt, in one transaction;
// store.ErrNothingToSweep when the effect is not ambiguous at that attempt, another sweeper
// holds it, or it is not due.
func (s *Store) ClaimReconcile(ctx context.Context, req *store.ClaimRequest) (*store.ReconcileClaim, error) {
	if req == nil {
		return nil, errors.New("claim reconcile: nil request")
	}
	var out *store.ReconcileClaim
	var refusal error
	err := s.write(ctx, func(t *txn) error {
		eff, err := t.effect(req.Key)
		if err != nil {
			return err
		}
		prev, err := readRow(t, `SELECT `+claimColumns+` FROM reconcile_claims WHERE effect_key = ?`, []any{req.Key}, scanClaim)
		switch {
		case errors.Is(err, store.ErrNotFound):
			prev = nil
		case err != nil:
			return err
		}
		c, err := store.PlanClaim(req, eff, prev)
		if err != nil {
			refusal = err
			return errRefused
		}
		var b binder
		claimed, held, next := b.nanos(c.ClaimedAt), b.nanos(c.HeldUntil), b.nanos(c.NextAt)
		if b.err != nil {
			return b.err
		}
		// The write lock taken before the read makes read, decide and write one step.
		if _, err := t.c.exec(`INSERT OR REPLACE INTO reconcile_claims (`+claimColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			c.Key, c.Attempt, c.Holder, c.Tries, claimed, held, next); err != nil {
			return err
		}
		out = c
		return nil
	})
	if errors.Is(err, errRefused) {
		return nil, refusal
	}
	if err != nil {
		return nil, fmt.Errorf("claim reconcile %s: %w", req.Key, err)
	}
	return out, nil
}

// ReconcileClaims returns every reconcile claim, by effect key.
func (s *Store) ReconcileClaims(ctx context.Context) ([]*store.ReconcileClaim, error) {
	if s.readOnly && s.version < claimsVersion {
		return nil, nil
	}
	out, err := collect(ctx, s.r, `SELECT `+claimColumns+` FROM reconcile_claims ORDER BY effect_key`, nil, scanClaim)
	if err != nil {
		return nil, fmt.Errorf("list reconcile claims: %w", err)
	}
	return out, nil
}

func scanClaim(sc scanner) (*store.ReconcileClaim, error) {
	var c store.ReconcileClaim
	var claimed, held, next sql.NullInt64
	if err := sc.Scan(&c.Key, &c.Attempt, &c.Holder, &c.Tries, &claimed, &held, &next); err != nil {
		return nil, err
	}
	c.ClaimedAt, c.HeldUntil, c.NextAt = fromNanos(claimed), fromNanos(held), fromNanos(next)
	return &c, nil
}
