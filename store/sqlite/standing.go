package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latchkit/latch/store"
)

// standingVersion is the schema that added standing approvals (migration 19).
const standingVersion = 19

// errNoStanding refuses a standing approval on a store kept at an older schema.
var errNoStanding = errors.New("the store's schema predates standing approvals: open it with a writer to migrate it")

// hasStanding reports whether the transaction's schema keeps standing approvals.
func (t *txn) hasStanding() bool { return t.version == 0 || t.version >= standingVersion }

// standing reads standing approval id in the transaction, nil when there is none.
func (t *txn) standing(id string) (*store.Standing, error) {
	if !t.hasStanding() {
		return nil, errNoStanding
	}
	var doc string
	found, err := t.c.queryRow(`SELECT doc FROM standing_approvals WHERE standing_id = ?`, []any{id},
		func(sc scanner) error { return sc.Scan(&doc) })
	if err != nil {
		return nil, fmt.Errorf("read standing approval %s: %w", id, err)
	}
	if !found {
		return nil, nil
	}
	return decodeStanding(doc)
}

func decodeStanding(doc string) (*store.Standing, error) {
	var s store.Standing
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		return nil, fmt.Errorf("read standing approval: %w", err)
	}
	return &s, nil
}

// applyStanding writes a standing approval: an insert, or a compare-and-set on the status and
// uses the plan read.
func (t *txn) applyStanding(w *store.StandingWrite) error {
	if w == nil {
		return nil
	}
	if !t.hasStanding() {
		return errNoStanding
	}
	doc, err := json.Marshal(&w.Next)
	if err != nil {
		return fmt.Errorf("standing approval %s: %w", w.Next.ID, err)
	}
	if w.Prev == nil {
		var b binder
		created := b.nanos(w.Next.CreatedAt)
		if b.err != nil {
			return fmt.Errorf("standing approval %s: %w", w.Next.ID, b.err)
		}
		_, err := t.c.exec(`INSERT INTO standing_approvals (standing_id, status, uses, created_at, doc) VALUES (?, ?, ?, ?, ?)`,
			w.Next.ID, w.Next.Status, w.Next.Uses, created, string(doc))
		if err != nil {
			return fmt.Errorf("standing approval %s: %w", w.Next.ID, err)
		}
		return nil
	}
	rows, err := t.c.exec(`UPDATE standing_approvals SET status = ?, uses = ?, doc = ? WHERE standing_id = ? AND status = ? AND uses = ?`,
		w.Next.Status, w.Next.Uses, string(doc), w.Prev.ID, w.Prev.Status, w.Prev.Uses)
	return checkRows(rows, err, "standing approval "+w.Prev.ID)
}

// Standing reads one standing approval (store.StandingStore).
func (s *Store) Standing(ctx context.Context, id string) (*store.Standing, error) {
	if s.version != 0 && s.version < standingVersion {
		return nil, fmt.Errorf("standing approval %s: %w", id, store.ErrNotFound)
	}
	var doc string
	err := s.r.QueryRowContext(ctx, `SELECT doc FROM standing_approvals WHERE standing_id = ?`, id).Scan(&doc)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("standing approval %s: %w", id, store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("read standing approval %s: %w", id, err)
	}
	return decodeStanding(doc)
}

// Standings lists standing approvals, newest first (store.StandingStore).
func (s *Store) Standings(ctx context.Context, f store.StandingFilter) ([]*store.Standing, error) {
	if s.version != 0 && s.version < standingVersion {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT doc FROM standing_approvals ORDER BY created_at DESC, standing_id`)
	if err != nil {
		return nil, fmt.Errorf("read standing approvals: %w", err)
	}
	defer rows.Close()
	var out []*store.Standing
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("read standing approvals: %w", err)
		}
		st, err := decodeStanding(doc)
		if err != nil {
			return nil, err
		}
		if f.Match(st) {
			out = append(out, st)
		}
	}
	return out, rows.Err()
}

// RevokeStanding revokes a standing approval and writes its event in one transaction
// (store.StandingStore).
func (s *Store) RevokeStanding(ctx context.Context, req *store.RevokeStandingRequest) (*store.Standing, error) {
	if req == nil {
		return nil, errors.New("revoke standing approval: nil request")
	}
	var out *store.Standing
	var refusal error
	err := s.write(ctx, func(t *txn) error {
		st, err := t.standing(req.ID)
		if err != nil {
			return err
		}
		w, events, planErr := store.PlanRevokeStanding(req, st)
		if planErr != nil {
			refusal = planErr
			return errRefused
		}
		if err := t.applyStanding(w); err != nil {
			return err
		}
		if _, err := t.insertEvents(events, req.Now, nil); err != nil {
			return err
		}
		out = &w.Next
		return nil
	})
	switch {
	case errors.Is(err, errRefused):
		return nil, refusal
	case err != nil:
		return nil, fmt.Errorf("revoke standing approval %s: %w", req.ID, err)
	}
	return out, nil
}
