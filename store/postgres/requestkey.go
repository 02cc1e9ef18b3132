package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

// requestKeysVersion is the schema that added request keys (migration 11).
const requestKeysVersion = 11

// reserveKeyed is Reserve for a request with a request key or budget charges, in a transaction
// of its own rather than a batch: it reads and writes the key's row and the budget ledger
// beside the effect and the approval, and a replay writes nothing. It takes its locks in the
// lock order (the chain head first: a refusal appends a receipt; then the budgets' advisory
// locks, ascending), so keyed reservations of one key are serialized, and so are charges of one
// budget; a lost commit is settled as every write's is (write, in tx.go): by its events, and by
// the key row it inserted. The ledger rows are inserted in the same transaction, so a lost
// commit leaves the reservation and its charges, or neither.
func (s *Store) reserveKeyed(ctx context.Context, op string, req *store.ReserveRequest) (*store.ReserveResult, error) {
	if req.RequestKey != "" && s.version < requestKeysVersion {
		return nil, fmt.Errorf("%s: the store's schema predates request keys: open it with a writer to migrate it", op)
	}
	w, err := s.write(ctx, op, func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil {
			return err
		}
		held, err := t.held(ctx, req.Charges, req.Now)
		if err != nil {
			return err
		}
		var rk *store.RequestKey
		if req.RequestKey != "" {
			if rk, err = t.readRequestKey(ctx, req.RequestKey); err != nil {
				return err
			}
		}
		var eff *store.Effect
		var apr *store.Approval
		if req.EffectKey != "" {
			if eff, err = t.readEffect(ctx, req.EffectKey); err != nil {
				return err
			}
		}
		var st *store.Standing
		switch {
		case store.IsStandingID(req.ApprovalID):
			if st, err = t.lockStanding(ctx, req.ApprovalID); err != nil {
				return err
			}
		case req.ApprovalID != "":
			if apr, err = t.readApproval(ctx, req.ApprovalID); err != nil {
				return err
			}
		}
		p, err := store.PlanKeyedReserve(req, rk, eff, apr, st, held)
		if err != nil {
			return refused{fmt.Errorf("%s: %w", op, err)}
		}
		events, sealed, err := t.apply(ctx, p.Effect, p.Approval, p.Events, req.Now, p.Receipt)
		if err != nil {
			return err
		}
		if err := t.insertCharges(ctx, p.Charges); err != nil {
			return err
		}
		if err := t.writeRequestKey(ctx, p.RequestKey); err != nil {
			return err
		}
		if err := t.writeStanding(ctx, p.Standing); err != nil {
			return err
		}
		res := p.Result
		res.Events, res.Receipt = events, sealed
		t.w.result = &res
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w.result.(*store.ReserveResult), nil
}

// readRequestKey reads the request key, nil when it was never used. In a re-issue it then looks
// for the lost attempt, as every read of a write does.
func (t *txn) readRequestKey(ctx context.Context, key string) (*store.RequestKey, error) {
	var rk store.RequestKey
	var attempt int64
	var created, updated stamp
	err := t.QueryRow(ctx, `SELECT request_key, agent, principal_user, action_hash, effect_key, approval_id, action_id,
		attempt, created_at, updated_at FROM `+t.s.tbl("request_keys")+` WHERE request_key = $1 FOR UPDATE`, key).Scan(
		&rk.Key, &rk.Agent, &rk.User, &rk.ActionHash, &rk.EffectKey, &rk.ApprovalID, &rk.ActionID, &attempt, &created, &updated)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, t.checkPending(ctx)
	case err != nil:
		return nil, fmt.Errorf("read request key: %w", err)
	}
	if err := t.checkPending(ctx); err != nil {
		return nil, err
	}
	rk.Attempt, rk.CreatedAt, rk.UpdatedAt = int(attempt), fromNanos(created), fromNanos(updated)
	return &rk, nil
}

// writeRequestKey writes a request key: an insert, or a compare-and-set on the reservation it
// named. No row written is errConflict: another transaction wrote the key first, and the next
// try decides from what it wrote.
func (t *txn) writeRequestKey(ctx context.Context, w *store.RequestKeyWrite) error {
	if w == nil {
		return nil
	}
	n := w.Next
	created, err := nanos(n.CreatedAt)
	if err != nil {
		return fmt.Errorf("request key: %w", err)
	}
	updated, err := nanos(n.UpdatedAt)
	if err != nil {
		return fmt.Errorf("request key: %w", err)
	}
	var sql string
	var args []any
	if w.Prev == nil {
		sql = `INSERT INTO ` + t.s.tbl("request_keys") + ` (request_key, agent, principal_user, action_hash, effect_key,
			approval_id, action_id, attempt, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT (request_key) DO NOTHING`
		args = []any{n.Key, n.Agent, n.User, n.ActionHash, n.EffectKey, n.ApprovalID, n.ActionID, int64(n.Attempt), created, updated}
	} else {
		sql = `UPDATE ` + t.s.tbl("request_keys") + ` SET action_id = $1, attempt = $2, updated_at = $3
			WHERE request_key = $4 AND action_id = $5 AND attempt = $6`
		args = []any{n.ActionID, int64(n.Attempt), updated, n.Key, w.Prev.ActionID, int64(w.Prev.Attempt)}
	}
	tag, err := t.Exec(ctx, sql, args...)
	switch {
	case err != nil:
		return fmt.Errorf("write request key: %w", err)
	case tag.RowsAffected() != 1:
		return errConflict
	}
	// The row names this transaction's action id, which nobody else writes: seen, it landed.
	t.w.inserted = append(t.w.inserted, presence{`SELECT count(*) FROM ` + t.s.tbl("request_keys") +
		` WHERE request_key = $1 AND action_id = $2 AND attempt = $3`, []any{n.Key, n.ActionID, int64(n.Attempt)}})
	return nil
}

// RequestKey reads the request key key (store.RequestKeyReader).
func (s *Store) RequestKey(ctx context.Context, key string) (*store.RequestKey, error) {
	var rk store.RequestKey
	var attempt int64
	var created, updated stamp
	err := s.pool.QueryRow(ctx, `SELECT request_key, agent, principal_user, action_hash, effect_key, approval_id, action_id,
		attempt, created_at, updated_at FROM `+s.tbl("request_keys")+` WHERE request_key = $1`, key).Scan(
		&rk.Key, &rk.Agent, &rk.User, &rk.ActionHash, &rk.EffectKey, &rk.ApprovalID, &rk.ActionID, &attempt, &created, &updated)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("request key: %w", store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("read request key: %w", err)
	}
	rk.Attempt, rk.CreatedAt, rk.UpdatedAt = int(attempt), fromNanos(created), fromNanos(updated)
	return &rk, nil
}
