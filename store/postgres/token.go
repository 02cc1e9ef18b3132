package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

var _ store.TokenStore = (*Store)(nil)

// tokensVersion is the schema version that added tokens.
const tokensVersion = 4

const tokenColumns = `token_id, hash, kind, agent, principal_user, approver, created_at, expires_at, revoked_at`

// CreateToken inserts a token; an existing id or hash is an error.
func (s *Store) CreateToken(ctx context.Context, tk *store.Token) error {
	if err := store.CheckToken(tk); err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	created, err1 := nanos(tk.CreatedAt)
	expires, err2 := nanos(tk.ExpiresAt)
	if err := errors.Join(err1, err2); err != nil || !created.Valid {
		return fmt.Errorf("create token %s: %v", tk.ID, errors.Join(err, errors.New("created_at required")))
	}
	args := []any{tk.ID, tk.Hash, tk.Kind, tk.Agent, tk.User, tk.Approver, created, expires}
	present := presence{`SELECT count(*) FROM ` + s.quoted() + `.tokens WHERE token_id = $1 AND hash = $2`, args[:2]}
	_, err := s.write(ctx, "create token "+tk.ID, func(ctx context.Context, t *txn) error {
		return t.insert(ctx, "token "+tk.ID, `INSERT INTO `+s.quoted()+`.tokens (`+tokenColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL) ON CONFLICT DO NOTHING`, args, present)
	})
	return err
}

// TokenByHash returns the token whose secret hashes to hash.
func (s *Store) TokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	if err := store.CheckText("token hash", hash); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	if s.version < tokensVersion {
		return nil, fmt.Errorf("token: %w", store.ErrNotFound)
	}
	tk, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM `+s.quoted()+`.tokens WHERE hash = $1`, hash))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("token: %w", store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("token: %w", err)
	}
	return tk, nil
}

// Tokens returns every token in creation order.
func (s *Store) Tokens(ctx context.Context) ([]*store.Token, error) {
	if s.version < tokensVersion {
		return nil, nil
	}
	return list(ctx, s, "tokens", `SELECT `+tokenColumns+` FROM `+s.quoted()+`.tokens ORDER BY created_at, token_id`, nil, scanToken)
}

// RevokeToken marks a token revoked, compare-and-set on its not being revoked yet.
func (s *Store) RevokeToken(ctx context.Context, id string, now time.Time) (*store.Token, error) {
	if err := store.CheckText("token id", id); err != nil {
		return nil, fmt.Errorf("revoke token: %w", err)
	}
	op := "revoke token " + id
	at, err := nanos(now)
	if err != nil || !at.Valid {
		return nil, fmt.Errorf("%s: time: %v", op, errors.Join(err, errors.New("time required")))
	}
	w, err := s.write(ctx, op, func(ctx context.Context, t *txn) error {
		tk, err := readForWrite(ctx, t, op, "token", t.QueryRow(ctx, `SELECT `+tokenColumns+` FROM `+s.quoted()+`.tokens WHERE token_id = $1`, id), scanToken)
		if err != nil {
			return err
		}
		if !tk.RevokedAt.IsZero() {
			return refused{fmt.Errorf("%s: %w", op, store.ErrRevoked)}
		}
		tag, err := t.Exec(ctx, `UPDATE `+s.quoted()+`.tokens SET revoked_at = $2 WHERE token_id = $1 AND revoked_at IS NULL`, id, at)
		switch {
		case err != nil:
			return fmt.Errorf("revoke token: %w", err)
		case tag.RowsAffected() != 1:
			return errConflict
		}
		// A revoked token never changes again: its row with this revocation time proves the
		// write landed if the commit's reply is lost.
		t.w.inserted = append(t.w.inserted, presence{`SELECT count(*) FROM ` + s.quoted() + `.tokens WHERE token_id = $1 AND revoked_at = $2`, []any{id, at}})
		tk.RevokedAt = fromNanos(at)
		t.w.result = tk
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w.result.(*store.Token), nil
}

func scanToken(row pgx.Row) (*store.Token, error) {
	var tk store.Token
	var created int64
	var expires, revoked stamp
	if err := row.Scan(&tk.ID, &tk.Hash, &tk.Kind, &tk.Agent, &tk.User, &tk.Approver, &created, &expires, &revoked); err != nil {
		return nil, err
	}
	tk.CreatedAt = fromNanos(stamp{Int64: created, Valid: true})
	tk.ExpiresAt, tk.RevokedAt = fromNanos(expires), fromNanos(revoked)
	return &tk, nil
}

// checkToken reads the token of tc in the write transaction t and decides it (store.TokenCheck);
// a refusal is returned as the write's answer, with nothing written.
func (t *txn) checkToken(ctx context.Context, op string, tc *store.TokenCheck) error {
	rows, err := t.Query(ctx, t.s.q.validTokens, []string{tc.Hash})
	var valid []string
	if err == nil {
		valid, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return fmt.Errorf("read the call's token: %w", err)
	}
	if err := tc.Decide(len(valid) > 0); err != nil {
		return refused{fmt.Errorf("%s: %w", op, err)}
	}
	return nil
}
