package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	zsqlite "zombiezen.com/go/sqlite"

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

// lookupPool holds the read connections of TokenByHash, which latch serve runs on every
// request. They are SQLite connections used directly, each keeping the lookup's statement
// prepared, rather than the database/sql reader pool: through database/sql, whose per-query
// work (connection checkout, argument conversion, rows) was half of the lookup's time, the
// lookup cost about a tenth of the server's CPU. Connections are opened when no idle one is
// free, and at most lookupIdle are kept.
type lookupPool struct {
	mu     sync.Mutex
	idle   []*wconn
	closed bool
}

// lookupIdle bounds the idle connections a lookupPool keeps.
const lookupIdle = 4

// take returns an idle connection, or a new read-only connection to path.
func (p *lookupPool) take(path string) (*wconn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("store closed")
	}
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	c, err := zsqlite.OpenConn(uri(path), zsqlite.OpenReadOnly|zsqlite.OpenURI|zsqlite.OpenNoMutex)
	if err != nil {
		return nil, err
	}
	c.SetBusyTimeout(busyTimeoutMillis * time.Millisecond)
	w := &wconn{c: c}
	if err := w.pragma(`PRAGMA query_only = 1`); err != nil {
		c.Close()
		return nil, err
	}
	return w, nil
}

// give returns c after a lookup that ended with err: kept if the lookup succeeded and fewer
// than lookupIdle are idle, closed otherwise.
func (p *lookupPool) give(c *wconn, err error) {
	p.mu.Lock()
	if err == nil && !p.closed && len(p.idle) < lookupIdle {
		p.idle = append(p.idle, c)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = c.c.Close()
}

// close closes the idle connections; a connection in use is closed when it is given back.
func (p *lookupPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for _, c := range p.idle {
		errs = append(errs, c.c.Close())
	}
	p.idle = nil
	return errors.Join(errs...)
}

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
