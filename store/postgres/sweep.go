package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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

var _ store.ReconcileClaimer = (*Store)(nil)

// claimsVersion is the schema version that added reconcile claims.
const claimsVersion = 13

const claimColumns = `effect_key, attempt, holder, tries, claimed_at, held_until, next_at`

// ClaimReconcile claims asking about an ambiguous attempt, in one transaction, compare-and-set
// on the claim read (or on its absence); store.ErrNothingToSweep when the effect is not
// ambiguous at that attempt, another sweeper holds it, or it is not due.
func (s *Store) ClaimReconcile(ctx context.Context, req *store.ClaimRequest) (*store.ReconcileClaim, error) {
	if req == nil {
		return nil, errors.New("claim reconcile: nil request")
	}
	w, err := s.write(ctx, "claim reconcile "+req.Key, func(ctx context.Context, t *txn) error {
		eff, err := t.readEffect(ctx, req.Key)
		if err != nil {
			return err
		}
		prev, err := scanClaim(t.QueryRow(ctx, `SELECT `+claimColumns+` FROM `+s.quoted()+`.reconcile_claims WHERE effect_key = $1`, req.Key))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			prev = nil
		case err != nil:
			return fmt.Errorf("read reconcile claim: %w", err)
		}
		if err := t.checkPending(ctx); err != nil {
			return err
		}
		c, err := store.PlanClaim(req, eff, prev)
		if err != nil {
			return refused{err}
		}
		if err := t.writeClaim(ctx, prev, c); err != nil {
			return err
		}
		t.w.result = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w.result.(*store.ReconcileClaim), nil
}

// writeClaim inserts c, or replaces prev by it: either matches no row when another sweeper
// wrote first (errConflict: the write is decided again from what it wrote).
func (t *txn) writeClaim(ctx context.Context, prev, c *store.ReconcileClaim) error {
	claimed, err1 := nanos(c.ClaimedAt)
	held, err2 := nanos(c.HeldUntil)
	next, err3 := nanos(c.NextAt)
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	args := []any{c.Key, c.Attempt, c.Holder, c.Tries, claimed, held, next}
	q := `INSERT INTO ` + t.s.quoted() + `.reconcile_claims (` + claimColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`
	if prev != nil {
		was, err := nanos(prev.ClaimedAt)
		if err != nil {
			return err
		}
		q = `UPDATE ` + t.s.quoted() + `.reconcile_claims SET attempt = $2, holder = $3, tries = $4, claimed_at = $5, held_until = $6, next_at = $7
			WHERE effect_key = $1 AND attempt = $8 AND holder = $9 AND tries = $10 AND claimed_at = $11`
		args = append(args, prev.Attempt, prev.Holder, prev.Tries, was)
	}
	tag, err := t.Exec(ctx, q, args...)
	switch {
	case err != nil:
		return fmt.Errorf("write reconcile claim: %w", err)
	case tag.RowsAffected() != 1:
		if err := t.checkPending(ctx); err != nil {
			return err
		}
		return errConflict
	}
	// This sweeper's name and the claim's time and count identify the row as written, should
	// the commit's reply be lost.
	t.w.inserted = append(t.w.inserted, presence{`SELECT count(*) FROM ` + t.s.quoted() + `.reconcile_claims
		WHERE effect_key = $1 AND attempt = $2 AND holder = $3 AND tries = $4 AND claimed_at = $5`, args[:5]})
	return nil
}

// ReconcileClaims returns every reconcile claim, by effect key.
func (s *Store) ReconcileClaims(ctx context.Context) ([]*store.ReconcileClaim, error) {
	if s.version < claimsVersion {
		return nil, nil
	}
	return list(ctx, s, "reconcile claims", `SELECT `+claimColumns+` FROM `+s.quoted()+`.reconcile_claims ORDER BY effect_key`, nil, scanClaim)
}

func scanClaim(row pgx.Row) (*store.ReconcileClaim, error) {
	var c store.ReconcileClaim
	var claimed, held, next stamp
	if err := row.Scan(&c.Key, &c.Attempt, &c.Holder, &c.Tries, &claimed, &held, &next); err != nil {
		return nil, err
	}
	c.ClaimedAt, c.HeldUntil, c.NextAt = fromNanos(claimed), fromNanos(held), fromNanos(next)
	return &c, nil
}
