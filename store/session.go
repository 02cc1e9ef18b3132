package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Session is a login session of the console of `latch serve`: a person logged in as Name,
// authenticated by Method (MethodSession: an account's password; MethodProxy: the trusted
// proxy's header). The secret the browser holds in its cookie is never stored: only its SHA-256
// (Hash, SessionHash), so a copy of the store holds no usable session. Kept in the store, a
// session outlives a restart of the server and is seen alike by every replica on the store.
type Session struct {
	Hash      string // SessionHash of the secret
	Name      string // the approver the session answers as
	Method    string // MethodSession or MethodProxy
	CreatedAt time.Time
	SeenAt    time.Time // its last request (the console writes it at most once a minute)
	ExpiresAt time.Time // its end, however busy: CreatedAt plus the console's session lifetime
}

// SessionHash is the form under which the secret of a console session is stored and looked up:
// "sha256:" and 64 hex digits.
func SessionHash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(h[:])
}

// SessionStore is implemented by backends that keep the console's sessions. Names are compared
// as SameName compares them. An account's removal ends its sessions in the same write
// (AccountStore.RemoveAccount).
type SessionStore interface {
	// CreateSession inserts a session; an existing hash is an error.
	CreateSession(ctx context.Context, s *Session) error
	// Session returns the session whose secret hashes to hash; ErrNotFound when there is none
	// (never created, ended, or swept).
	Session(ctx context.Context, hash string) (*Session, error)
	// TouchSession records a request of the session at at (SeenAt only moves forward);
	// ErrNotFound when the session is gone.
	TouchSession(ctx context.Context, hash string, at time.Time) error
	// EndSession deletes the session (a logout); ErrNotFound when it is gone already.
	EndSession(ctx context.Context, hash string) error
	// EndSessions deletes every session of name and returns how many there were.
	EndSessions(ctx context.Context, name string) (int, error)
	// SweepSessions deletes the sessions that have expired at now or were last seen before
	// idleSince, and returns how many.
	SweepSessions(ctx context.Context, now, idleSince time.Time) (int, error)
}

// CheckSession validates a session before it is stored: a hash and a name, texts a store keeps
// (CheckText), a method, and its times in order.
func CheckSession(s *Session) error {
	switch {
	case s == nil || s.Hash == "" || s.Name == "":
		return &InputError{Field: "session", Reason: "has no hash or name"}
	case s.Method != MethodSession && s.Method != MethodProxy:
		return &InputError{Field: "session method", Value: s.Method, Reason: "is neither " + MethodSession + " nor " + MethodProxy}
	case s.CreatedAt.IsZero() || s.SeenAt.Before(s.CreatedAt) || !s.ExpiresAt.After(s.CreatedAt):
		return &InputError{Field: "session times", Reason: "want created_at <= seen_at and created_at < expires_at"}
	}
	return checkTexts("session hash", s.Hash, "session name", s.Name)
}
