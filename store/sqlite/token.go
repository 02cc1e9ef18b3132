package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/latchkit/latch/store"
)

var _ store.TokenStore = (*Store)(nil)

// tokensVersion is the schema version that added tokens.
const tokensVersion = 5

const tokenColumns = `token_id, hash, kind, agent, principal_user, approver, created_at, expires_at, revoked_at`

// CreateToken inserts a token.
func (s *Store) CreateToken(ctx context.Context, tk *store.Token) error {
	if err := store.CheckToken(tk); err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	var b binder
	created, expires := b.time(tk.CreatedAt), b.time(tk.ExpiresAt)
	if b.err != nil {
		return fmt.Errorf("create token %s: %w", tk.ID, b.err)
	}
	err := s.write(ctx, func(t *txn) error {
		_, err := t.c.exec(`INSERT INTO tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)`,
			tk.ID, tk.Hash, tk.Kind, tk.Agent, tk.User, tk.Approver, created, expires)
		return err
	})
	if err != nil {
		return fmt.Errorf("create token %s: %w", tk.ID, err)
	}
	return nil
}

// TokenByHash returns the token whose secret hashes to hash.
func (s *Store) TokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	if err := store.CheckText("token hash", hash); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	if s.readOnly && s.version < tokensVersion {
		return nil, fmt.Errorf("token: %w", store.ErrNotFound)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	c, err := s.lookups.take(s.path)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	var tk *store.Token
	found, err := c.queryRowArgs(selectToken, []arg{text(hash)}, func(sc scanner) (err error) {
		tk, err = scanToken(sc)
		return err
	})
	s.lookups.give(c, err)
	switch {
	case err != nil:
		return nil, fmt.Errorf("token: %w", err)
	case !found:
		return nil, fmt.Errorf("token: %w", store.ErrNotFound)
	}
	return tk, nil
}

const selectToken = `SELECT ` + tokenColumns + ` FROM tokens WHERE hash = ?`

// checkToken reads the token of tc in the write transaction t and decides it (store.TokenCheck).
func (t *txn) checkToken(tc *store.TokenCheck) error {
	valid, err := t.c.queryRowArgs(selectValidToken, []arg{text(tc.Hash)}, func(scanner) error { return nil })
	if err != nil {
		return fmt.Errorf("read the call's token: %w", err)
	}
	return tc.Decide(valid)
}

const selectValidToken = `SELECT 1 FROM tokens WHERE hash = ? AND revoked_at IS NULL`

// Tokens returns every token in creation order.
func (s *Store) Tokens(ctx context.Context) ([]*store.Token, error) {
	if s.readOnly && s.version < tokensVersion {
		return nil, nil
	}
	out, err := collect(ctx, s.r, `SELECT `+tokenColumns+` FROM tokens ORDER BY created_at, token_id`, nil, scanToken)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken marks a token revoked.
func (s *Store) RevokeToken(ctx context.Context, id string, now time.Time) (*store.Token, error) {
	if err := store.CheckText("token id", id); err != nil {
		return nil, fmt.Errorf("revoke token: %w", err)
	}
	var out *store.Token
	err := s.write(ctx, func(t *txn) error {
		tk, err := readRow(t, `SELECT `+tokenColumns+` FROM tokens WHERE token_id = ?`, []any{id}, scanToken)
		switch {
		case err != nil:
			return err
		case !tk.RevokedAt.IsZero():
			return store.ErrRevoked
		}
		var b binder
		at := b.time(now)
		if b.err != nil {
			return b.err
		}
		if _, err := t.c.exec(`UPDATE tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL`, at, id); err != nil {
			return err
		}
		tk.RevokedAt = now.UTC()
		out = tk
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("revoke token %s: %w", id, err)
	}
	return out, nil
}

func scanToken(sc scanner) (*store.Token, error) {
	var tk store.Token
	var created, expires, revoked sql.NullInt64
	if err := sc.Scan(&tk.ID, &tk.Hash, &tk.Kind, &tk.Agent, &tk.User, &tk.Approver, &created, &expires, &revoked); err != nil {
		return nil, err
	}
	tk.CreatedAt, tk.ExpiresAt, tk.RevokedAt = fromNanos(created), fromNanos(expires), fromNanos(revoked)
	return &tk, nil
}
