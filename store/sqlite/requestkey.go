package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/latchkit/latch/store"
)

// requestKeysVersion is the schema that added request keys (migration 12).
const requestKeysVersion = 12

// errNoRequestKeys refuses a request key on a store kept at an older schema.
var errNoRequestKeys = errors.New("the store's schema predates request keys: open it with a writer to migrate it")

const selectRequestKey = `SELECT request_key, agent, principal_user, action_hash, effect_key, approval_id, action_id,
	attempt, created_at, updated_at FROM request_keys WHERE request_key = ?`

// requestKey reads the request key in the transaction, nil when it was never used.
func (t *txn) requestKey(key string) (*store.RequestKey, error) {
	if t.version != 0 && t.version < requestKeysVersion {
		return nil, errNoRequestKeys
	}
	var rk *store.RequestKey
	_, err := t.c.queryRowArgs(selectRequestKey, []arg{text(key)}, func(sc scanner) error {
		r := sc.(*zrow)
		var rc rowCheck
		rk = &store.RequestKey{Key: rc.text(r, 0), Agent: rc.text(r, 1), User: rc.text(r, 2), ActionHash: rc.text(r, 3),
			EffectKey: rc.text(r, 4), ApprovalID: rc.text(r, 5), ActionID: rc.text(r, 6), Attempt: int(rc.integer(r, 7)),
			CreatedAt: fromNanos(rc.nullInteger(r, 8)), UpdatedAt: fromNanos(rc.nullInteger(r, 9))}
		return rc.err
	})
	if err != nil {
		return nil, fmt.Errorf("read request key: %w", err)
	}
	return rk, nil
}

// applyRequestKey writes a request key: an insert, or a compare-and-set on the reservation it
// named.
func (t *txn) applyRequestKey(w *store.RequestKeyWrite) error {
	if w == nil {
		return nil
	}
	var b binder
	n := w.Next
	created, updated := b.timeArg(n.CreatedAt), b.timeArg(n.UpdatedAt)
	if b.err != nil {
		return fmt.Errorf("request key: %w", b.err)
	}
	if w.Prev == nil {
		_, err := t.c.execArgs(`INSERT INTO request_keys (request_key, agent, principal_user, action_hash, effect_key,
			approval_id, action_id, attempt, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			text(n.Key), text(n.Agent), text(n.User), text(n.ActionHash), text(n.EffectKey), text(n.ApprovalID),
			text(n.ActionID), integer(int64(n.Attempt)), created, updated)
		if err != nil {
			return fmt.Errorf("request key: %w", err)
		}
		return nil
	}
	rows, err := t.c.execArgs(`UPDATE request_keys SET action_id = ?, attempt = ?, updated_at = ?
		WHERE request_key = ? AND action_id = ? AND attempt = ?`,
		text(n.ActionID), integer(int64(n.Attempt)), updated, text(w.Prev.Key), text(w.Prev.ActionID), integer(int64(w.Prev.Attempt)))
	return checkRows(rows, err, "request key")
}

// RequestKey reads the request key key (store.RequestKeyReader).
func (s *Store) RequestKey(ctx context.Context, key string) (*store.RequestKey, error) {
	var (
		rk               store.RequestKey
		attempt          int64
		created, updated sql.NullInt64
	)
	err := s.r.QueryRowContext(ctx, selectRequestKey, key).Scan(&rk.Key, &rk.Agent, &rk.User, &rk.ActionHash,
		&rk.EffectKey, &rk.ApprovalID, &rk.ActionID, &attempt, &created, &updated)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("request key: %w", store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("read request key: %w", err)
	}
	rk.Attempt, rk.CreatedAt, rk.UpdatedAt = int(attempt), fromNanos(created), fromNanos(updated)
	return &rk, nil
}
