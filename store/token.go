package store

import (
	"context"
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
