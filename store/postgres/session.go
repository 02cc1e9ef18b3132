package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

var _ store.SessionStore = (*Store)(nil)

// sessionsVersion is the schema version that added the console's sessions.
const sessionsVersion = 12

const sessionColumns = `hash, name, method, created_at, seen_at, expires_at`

// times returns the stamps of ts, or the first that a column cannot hold.
func times(ts ...time.Time) ([]stamp, error) {
	out := make([]stamp, len(ts))
	for i, t := range ts {
		n, err := nanos(t)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// CreateSession inserts a console session.
func (s *Store) CreateSession(ctx context.Context, se *store.Session) error {
	if err := store.CheckSession(se); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	op := "create session of " + se.Name
	ts, err := times(se.CreatedAt, se.SeenAt, se.ExpiresAt)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	args := []any{se.Hash, se.Name, store.NameKey(se.Name), se.Method, ts[0], ts[1], ts[2]}
	// The hash is of a fresh random secret: a row under it is this call's own insert.
	present := presence{`SELECT count(*) FROM ` + s.quoted() + `.console_sessions WHERE hash = $1`, args[:1]}
	_, err = s.write(ctx, op, func(ctx context.Context, t *txn) error {
		return t.insert(ctx, "session", `INSERT INTO `+s.quoted()+`.console_sessions (hash, name, name_key, method, created_at, seen_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`, args, present)
	})
	return err
}

// Session returns the console session whose secret hashes to hash.
func (s *Store) Session(ctx context.Context, hash string) (*store.Session, error) {
	if err := store.CheckText("session hash", hash); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	if s.version < sessionsVersion {
		return nil, fmt.Errorf("session: %w", store.ErrNotFound)
	}
	se, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM `+s.quoted()+`.console_sessions WHERE hash = $1`, hash))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("session: %w", store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("session: %w", err)
	}
	return se, nil
}

// TouchSession moves the session's last request forward to at. Running it twice is running it
// once, so a lost commit needs no settling beyond the write's own.
func (s *Store) TouchSession(ctx context.Context, hash string, at time.Time) error {
	op := "touch session"
	n, err := nanos(at)
	if err != nil || !n.Valid {
		return fmt.Errorf("%s: time: %v", op, errors.Join(err, errors.New("time required")))
	}
	_, err = s.write(ctx, op, func(ctx context.Context, t *txn) error {
		tag, err := t.Exec(ctx, `UPDATE `+s.quoted()+`.console_sessions SET seen_at = greatest(seen_at, $2) WHERE hash = $1`, hash, n)
		switch {
		case err != nil:
			return fmt.Errorf("update session: %w", err)
		case tag.RowsAffected() == 0:
			return refused{fmt.Errorf("%s: %w", op, store.ErrNotFound)}
		}
		return nil
	})
	return err
}

// EndSession deletes a console session. A delete run twice is run once: a lost commit is
// settled by the row's absence.
func (s *Store) EndSession(ctx context.Context, hash string) error {
	op := "end session"
	_, err := s.write(ctx, op, func(ctx context.Context, t *txn) error {
		tag, err := t.Exec(ctx, `DELETE FROM `+s.quoted()+`.console_sessions WHERE hash = $1`, hash)
		switch {
		case err != nil:
			return fmt.Errorf("delete session: %w", err)
		case tag.RowsAffected() == 0:
			if err := t.checkPending(ctx); err != nil {
				return err
			}
			return refused{fmt.Errorf("%s: %w", op, store.ErrNotFound)}
		}
		t.w.inserted = append(t.w.inserted, presence{`SELECT (NOT EXISTS (SELECT 1 FROM ` + s.quoted() + `.console_sessions WHERE hash = $1))::int`, []any{hash}})
		return nil
	})
	return err
}

// EndSessions deletes every console session of name.
func (s *Store) EndSessions(ctx context.Context, name string) (int, error) {
	return s.deleteSessions(ctx, "end sessions of "+name, `name_key = $1`, store.NameKey(name))
}

// SweepSessions deletes the console sessions expired at now or idle since idleSince.
func (s *Store) SweepSessions(ctx context.Context, now, idleSince time.Time) (int, error) {
	ts, err := times(now, idleSince)
	if err != nil {
		return 0, fmt.Errorf("sweep sessions: %w", err)
	}
	return s.deleteSessions(ctx, "sweep sessions", `expires_at <= $1 OR seen_at < $2`, ts[0], ts[1])
}

// deleteSessions deletes the sessions where matches, and counts them. Whether a lost commit
// landed need not be told: the delete is re-issued, and deletes what is left to delete.
func (s *Store) deleteSessions(ctx context.Context, op, where string, args ...any) (int, error) {
	w, err := s.write(ctx, op, func(ctx context.Context, t *txn) error {
		tag, err := t.Exec(ctx, `DELETE FROM `+s.quoted()+`.console_sessions WHERE `+where, args...)
		if err != nil {
			return fmt.Errorf("delete sessions: %w", err)
		}
		t.w.result = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return 0, err
	}
	n, _ := w.result.(int)
	return n, nil
}

func scanSession(row pgx.Row) (*store.Session, error) {
	var se store.Session
	var created, seen, expires int64
	if err := row.Scan(&se.Hash, &se.Name, &se.Method, &created, &seen, &expires); err != nil {
		return nil, err
	}
	se.CreatedAt = fromNanos(stamp{Int64: created, Valid: true})
	se.SeenAt = fromNanos(stamp{Int64: seen, Valid: true})
	se.ExpiresAt = fromNanos(stamp{Int64: expires, Valid: true})
	return &se, nil
}
