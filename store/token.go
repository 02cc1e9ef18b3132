package store

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Token kinds.
const (
	// TokenAgent authenticates callers of `latch serve` as the principal it names: the calls
	// it proposes are that principal's.
	TokenAgent = "agent"
	// TokenApprover authenticates a person who answers approval requests and resolves
	// ambiguous effects over `latch serve`.
	TokenApprover = "approver"
)

// Token is a stored API token of `latch serve`. The secret itself is never stored: only its
// SHA-256 (Hash), so a copy of the store does not hold usable credentials.
type Token struct {
	ID        string // tok_ + 32 hex: how the token is listed and revoked
	Hash      string // sha256: + 64 hex of the secret
	Kind      string // TokenAgent or TokenApprover
	Agent     string // the principal of an agent token
	User      string // optional user of an agent token
	Approver  string // the name an approver token answers as
	CreatedAt time.Time
	ExpiresAt time.Time // zero: never
	RevokedAt time.Time // zero: not revoked
}

// TokenStore is implemented by backends that keep the API tokens of `latch serve`.
type TokenStore interface {
	// CreateToken inserts a token; an existing id or hash is an error.
	CreateToken(ctx context.Context, t *Token) error
	// TokenByHash returns the token whose secret hashes to hash; ErrNotFound when none does.
	TokenByHash(ctx context.Context, hash string) (*Token, error)
	// Tokens returns every token, revoked and expired ones included, in creation order.
	Tokens(ctx context.Context) ([]*Token, error)
	// RevokeToken marks a token revoked at now, in one compare-and-set write: ErrNotFound when
	// there is no such token, ErrRevoked when it is already revoked.
	RevokeToken(ctx context.Context, id string, now time.Time) (*Token, error)
}

// CheckToken refuses a token whose id, hash, kind or names no backend can keep faithfully (a
// NUL byte, or longer than MaxText), as ErrInvalidInput, before anything is written; and one
// without an id or hash.
func CheckToken(t *Token) error {
	if t == nil || t.ID == "" || t.Hash == "" {
		return &InputError{Field: "token", Reason: "has no id or hash"}
	}
	return checkTexts("token id", t.ID, "token hash", t.Hash, "token kind", t.Kind,
		"token agent", t.Agent, "token user", t.User, "token approver", t.Approver)
}

// TokenCheck asks the writes made with a context that carries it (WithTokenCheck) to confirm,
// inside their own transactions, that an API token is still valid: known to the store and not
// revoked. A server that answers a caller from its memory of the tokens it verified earlier
// passes one with the call, so that the call's reservation or record reads the token in the
// very transaction that writes it — no read transaction of its own per request — and a token
// revoked by any process sharing the store refuses the next write made with it, which writes
// nothing and returns a *TokenRefusedError. Expiry is not the store's to check: a token's
// expiry never changes, and the server checks it from what it verified.
//
// Every write method of the shipped stores makes the check when its context carries one:
// SQLite in each write transaction, Postgres in each transaction and in each batch, per write.
type TokenCheck struct {
	Hash      string // what the store keeps of the token's secret (auth.HashToken)
	confirmed atomic.Bool
}

type tokenCheckKey struct{}

// WithTokenCheck returns ctx carrying c: each write made with it confirms c in its transaction.
func WithTokenCheck(ctx context.Context, c *TokenCheck) context.Context {
	return context.WithValue(ctx, tokenCheckKey{}, c)
}

// TokenCheckOf returns the TokenCheck ctx carries, or nil.
func TokenCheckOf(ctx context.Context) *TokenCheck {
	c, _ := ctx.Value(tokenCheckKey{}).(*TokenCheck)
	return c
}

// Confirmed reports whether a write transaction found the token valid since c was made: the
// caller's request was then checked against the store as it was after the request arrived.
func (c *TokenCheck) Confirmed() bool { return c.confirmed.Load() }

// Decide is the stores' decision on what a write's transaction read of the token of c.Hash:
// valid when a row has the hash and is not revoked. Otherwise it returns a *TokenRefusedError,
// which refuses the write before it writes anything; when valid, c is confirmed.
func (c *TokenCheck) Decide(valid bool) error {
	if !valid {
		return &TokenRefusedError{}
	}
	c.confirmed.Store(true)
	return nil
}

// ErrTokenRefused is matched (errors.Is) by a *TokenRefusedError.
var ErrTokenRefused = errors.New("the API token is unknown to the store or revoked")

// TokenRefusedError is a write refused by the TokenCheck of its context. It says no more than
// that the token is no longer valid: the server that made the check reads the token again
// (TokenStore.TokenByHash) to say why.
type TokenRefusedError struct{}

func (e *TokenRefusedError) Error() string { return ErrTokenRefused.Error() }

// Is matches ErrTokenRefused.
func (e *TokenRefusedError) Is(target error) bool { return target == ErrTokenRefused }
