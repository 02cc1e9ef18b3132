package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/latchkit/latch/store"
)

var _ store.SessionStore = (*Store)(nil)

// sessionsVersion is the schema version that added the console's sessions.
const sessionsVersion = 13

const sessionColumns = `hash, name, method, created_at, seen_at, expires_at`

// CreateSession inserts a console session.
func (s *Store) CreateSession(ctx context.Context, se *store.Session) error {
	if err := store.CheckSession(se); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	var b binder
	created, seen, expires := b.nanos(se.CreatedAt), b.nanos(se.SeenAt), b.nanos(se.ExpiresAt)
	if b.err != nil {
		return fmt.Errorf("create session of %s: %w", se.Name, b.err)
	}
	err := s.write(ctx, func(t *txn) error {
		_, err := t.c.exec(`INSERT INTO console_sessions (hash, name, name_key, method, created_at, seen_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, se.Hash, se.Name, store.NameKey(se.Name), se.Method, created, seen, expires)
		return err
	})
	if err != nil {
		return fmt.Errorf("create session of %s: %w", se.Name, err)
	}
	return nil
}

// Session returns the console session whose secret hashes to hash.
func (s *Store) Session(ctx context.Context, hash string) (*store.Session, error) {
	if err := store.CheckText("session hash", hash); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	if s.readOnly && s.version < sessionsVersion {
		return nil, fmt.Errorf("session: %w", store.ErrNotFound)
	}
	se, err := collectOne(ctx, s.r, `SELECT `+sessionColumns+` FROM console_sessions WHERE hash = ?`, []any{hash}, scanSession)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	return se, nil
}

// TouchSession moves the session's last request forward to at.
func (s *Store) TouchSession(ctx context.Context, hash string, at time.Time) error {
	var b binder
	n := b.nanos(at)
	if b.err != nil {
		return fmt.Errorf("touch session: %w", b.err)
	}
	err := s.write(ctx, func(t *txn) error {
		if _, err := readRow(t, `SELECT `+sessionColumns+` FROM console_sessions WHERE hash = ?`, []any{hash}, scanSession); err != nil {
			return err
		}
		_, err := t.c.exec(`UPDATE console_sessions SET seen_at = max(seen_at, ?) WHERE hash = ?`, n, hash)
		return err
	})
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	return nil
}

// EndSession deletes a console session.
func (s *Store) EndSession(ctx context.Context, hash string) error {
	err := s.write(ctx, func(t *txn) error {
		n, err := t.c.exec(`DELETE FROM console_sessions WHERE hash = ?`, hash)
		if err == nil && n == 0 {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// EndSessions deletes every console session of name.
func (s *Store) EndSessions(ctx context.Context, name string) (int, error) {
	var out int64
	err := s.write(ctx, func(t *txn) error {
		var err error
		out, err = t.c.exec(`DELETE FROM console_sessions WHERE name_key = ?`, store.NameKey(name))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("end sessions of %s: %w", name, err)
	}
	return int(out), nil
}

// SweepSessions deletes the console sessions expired at now or idle since idleSince.
func (s *Store) SweepSessions(ctx context.Context, now, idleSince time.Time) (int, error) {
	var b binder
	n, idle := b.nanos(now), b.nanos(idleSince)
	if b.err != nil {
		return 0, fmt.Errorf("sweep sessions: %w", b.err)
	}
	var out int64
	err := s.write(ctx, func(t *txn) error {
		var err error
		out, err = t.c.exec(`DELETE FROM console_sessions WHERE expires_at <= ? OR seen_at < ?`, n, idle)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sweep sessions: %w", err)
	}
	return int(out), nil
}

func scanSession(sc scanner) (*store.Session, error) {
	var se store.Session
	var created, seen, expires sql.NullInt64
	if err := sc.Scan(&se.Hash, &se.Name, &se.Method, &created, &seen, &expires); err != nil {
		return nil, err
	}
	se.CreatedAt, se.SeenAt, se.ExpiresAt = fromNanos(created), fromNanos(seen), fromNanos(expires)
	return &se, nil
}
