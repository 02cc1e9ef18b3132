package postgres

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

// standingVersion is the schema that added standing approvals (migration 18).
const standingVersion = 18

// errNoStanding refuses a standing approval on a store kept at an older schema.
var errNoStanding = errors.New("the store's schema predates standing approvals: open it with a writer to migrate it")

// lockStanding reads standing approval id, locking its row, nil when there is none: two
// reservations spending one standing approval take turns, so each counts the uses before it.
func (t *txn) lockStanding(ctx context.Context, id string) (*store.Standing, error) {
	if t.s.version < standingVersion {
		return nil, errNoStanding
	}
	var doc []byte
	err := t.QueryRow(ctx, `SELECT doc FROM `+t.s.quoted()+`.standing_approvals WHERE standing_id = $1 FOR UPDATE`, id).Scan(&doc)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, t.checkPending(ctx)
	case err != nil:
		return nil, fmt.Errorf("read standing approval %s: %w", id, err)
	}
	if err := t.checkPending(ctx); err != nil {
		return nil, err
	}
	return decodeStanding(doc)
}

func decodeStanding(doc []byte) (*store.Standing, error) {
	if hexed, ok := bytes.CutPrefix(doc, []byte(`\x`)); ok {
		// Written by an earlier version through a pooler (default_query_exec_mode=exec), which
		// sent the document as bytea to this text column: the text of its hex form. A JSON
		// document never starts with a backslash.
		raw := make([]byte, hex.DecodedLen(len(hexed)))
		if _, err := hex.Decode(raw, hexed); err != nil {
			return nil, fmt.Errorf("read standing approval: %w", err)
		}
		doc = raw
	}
	var s store.Standing
	if err := json.Unmarshal(doc, &s); err != nil {
		return nil, fmt.Errorf("read standing approval: %w", err)
	}
	return &s, nil
}

// writeStanding writes a standing approval: an insert, or a compare-and-set on the status and
// uses the plan read (errConflict when another transaction wrote first).
func (t *txn) writeStanding(ctx context.Context, w *store.StandingWrite) error {
	if w == nil {
		return nil
	}
	if t.s.version < standingVersion {
		return errNoStanding
	}
	raw, err := json.Marshal(&w.Next)
	if err != nil {
		return fmt.Errorf("standing approval %s: %w", w.Next.ID, err)
	}
	// The column is text: a string is sent as text in every exec mode, where []byte would be
	// sent as bytea (and stored as the text of its hex form) when the statement is not prepared.
	doc := string(raw)
	q := t.s.quoted()
	if w.Prev == nil {
		created, err := nanos(w.Next.CreatedAt)
		if err != nil {
			return fmt.Errorf("standing approval %s: %w", w.Next.ID, err)
		}
		return t.insert(ctx, "standing approval "+w.Next.ID,
			`INSERT INTO `+q+`.standing_approvals (standing_id, status, uses, created_at, doc) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT DO NOTHING`, []any{w.Next.ID, w.Next.Status, w.Next.Uses, created, doc},
			presence{`SELECT count(*) FROM ` + q + `.standing_approvals WHERE standing_id = $1`, []any{w.Next.ID}})
	}
	tag, err := t.Exec(ctx, `UPDATE `+q+`.standing_approvals SET status = $1, uses = $2, doc = $3
		WHERE standing_id = $4 AND status = $5 AND uses = $6`,
		w.Next.Status, w.Next.Uses, doc, w.Prev.ID, w.Prev.Status, w.Prev.Uses)
	switch {
	case err != nil:
		return fmt.Errorf("write standing approval %s: %w", w.Prev.ID, err)
	case tag.RowsAffected() != 1:
		return errConflict
	}
	return nil
}

// Standing reads one standing approval (store.StandingStore).
func (s *Store) Standing(ctx context.Context, id string) (*store.Standing, error) {
	if err := store.CheckText("standing id", id); err != nil {
		return nil, fmt.Errorf("standing approval: %w", err)
	}
	if s.version < standingVersion {
		return nil, fmt.Errorf("standing approval %s: %w", id, store.ErrNotFound)
	}
	var doc []byte
	err := s.readTx(ctx, "begin read", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT doc FROM `+s.quoted()+`.standing_approvals WHERE standing_id = $1`, id).Scan(&doc)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("standing approval %s: %w", id, store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("standing approval %s: %w", id, err)
	}
	return decodeStanding(doc)
}

// Standings lists standing approvals, newest first (store.StandingStore).
func (s *Store) Standings(ctx context.Context, f store.StandingFilter) ([]*store.Standing, error) {
	if s.version < standingVersion {
		return nil, nil
	}
	var out []*store.Standing
	err := s.readTx(ctx, "begin read", func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, `SELECT doc FROM `+s.quoted()+`.standing_approvals ORDER BY created_at DESC, standing_id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var doc []byte
			if err := rows.Scan(&doc); err != nil {
				return err
			}
			st, err := decodeStanding(doc)
			if err != nil {
				return err
			}
			if f.Match(st) {
				out = append(out, st)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read standing approvals: %w", err)
	}
	return out, nil
}

// RevokeStanding revokes a standing approval and writes its event in one transaction
// (store.StandingStore).
func (s *Store) RevokeStanding(ctx context.Context, req *store.RevokeStandingRequest) (*store.Standing, error) {
	if req == nil {
		return nil, errors.New("revoke standing approval: nil request")
	}
	if err := store.CheckText("standing id", req.ID); err != nil {
		return nil, fmt.Errorf("revoke standing approval: %w", err)
	}
	w, err := s.write(ctx, "revoke standing approval "+req.ID, func(ctx context.Context, t *txn) error {
		st, err := t.lockStanding(ctx, req.ID)
		if err != nil {
			return err
		}
		sw, events, planErr := store.PlanRevokeStanding(req, st)
		if planErr != nil {
			return refused{planErr}
		}
		if err := t.writeStanding(ctx, sw); err != nil {
			return err
		}
		if _, err := t.insertEvents(ctx, events, req.Now); err != nil {
			return err
		}
		t.w.result = &sw.Next
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w.result.(*store.Standing), nil
}
