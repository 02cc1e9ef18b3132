// Package auth checks the credentials every latch server takes — the API tokens of `latch token
// create` (kept in the store as hashes) and, through an identity provider, verified JWTs — and
// tells an agent's credential from a person's by construction: an agent token or an unmarked
// JWT proposes actions and reports outcomes; an approver token or a JWT the identity provider
// marks as a person's answers approvals and resolves effects, and never proposes. latch serve,
// latch gateway and latch mcp-operator share one Authenticator, so a credential means the same
// principal or person on each.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/store"
)

// TokenPrefix begins every API token secret, so a leaked one is recognisable (and a credential
// that lacks it is given to Config.Identity instead).
const TokenPrefix = "latch_"

// HashToken returns what the store keeps of a secret: sha256: and the hex SHA-256 of it.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	// Written into one buffer: every authenticated request hashes its token.
	const prefix = "sha256:"
	var b [len(prefix) + 2*sha256.Size]byte
	copy(b[:], prefix)
	hex.Encode(b[len(prefix):], sum[:])
	return string(b[:])
}

// NewToken describes a token to create.
type NewToken struct {
	Kind     string // store.TokenAgent or store.TokenApprover
	Agent    string // an agent token's principal (required for one)
	User     string // optional user of an agent token
	Approver string // an approver token's name (required for one)
	TTL      time.Duration
}

// CreateToken creates an API token in ts and returns its secret — shown to the person who
// created it once, and never stored — with the stored record.
func CreateToken(ctx context.Context, ts store.TokenStore, req *NewToken, now time.Time) (string, *store.Token, error) {
	switch req.Kind {
	case store.TokenAgent:
		if strings.TrimSpace(req.Agent) == "" || req.Approver != "" {
			return "", nil, errors.New("create token: an agent token names an agent and no approver")
		}
		if err := store.CheckApprover(req.Agent); err != nil {
			return "", nil, fmt.Errorf("create token: agent: %w", err)
		}
		if req.User != "" {
			if err := store.CheckApprover(req.User); err != nil {
				return "", nil, fmt.Errorf("create token: user: %w", err)
			}
		}
	case store.TokenApprover:
		if req.Agent != "" || req.User != "" {
			return "", nil, errors.New("create token: an approver token names no agent or user")
		}
		if err := store.CheckApprover(req.Approver); err != nil {
			return "", nil, fmt.Errorf("create token: %w", err)
		}
	default:
		return "", nil, fmt.Errorf("create token: unknown kind %q", req.Kind)
	}
	if req.TTL < 0 {
		return "", nil, errors.New("create token: negative expiry")
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	var id [16]byte
	_, _ = rand.Read(id[:])
	tk := &store.Token{ID: "tok_" + hex.EncodeToString(id[:]), Hash: HashToken(secret), Kind: req.Kind,
		Agent: req.Agent, User: req.User, Approver: req.Approver, CreatedAt: now.UTC()}
	if req.TTL > 0 {
		tk.ExpiresAt = now.Add(req.TTL).UTC()
	}
	if err := ts.CreateToken(ctx, tk); err != nil {
		return "", nil, err
	}
	return secret, tk, nil
}

// Authenticator checks bearer credentials: the latch API tokens kept in Tokens and, when
// Identity is set, any other credential Identity verifies (a JWT, with the identity package).
// latch serve, latch gateway and latch mcp-operator share it, so one credential means the same
// principal or approver on each. Checking writes nothing.
//
// Agents and people are told apart by their credential, never by the route it is sent to: an
// agent token is an agent's and an approver token a person's; a credential Identity verifies is
// an agent's unless Identity implements PeopleProvider and names a person for it
// (identity.Config's approver marks). An agent's credential never answers or resolves, a
// person's never proposes.
type Authenticator struct {
	Tokens   store.TokenStore
	Identity latch.IdentityProvider
	Now      func() time.Time // the clock tokens expire by; nil is time.Now
	// CacheTTL, when positive, keeps each API token read from Tokens in memory for that long
	// (by the monotonic clock), so that a busy caller does not cost a store read per request: a
	// token revoked meanwhile is refused from at most CacheTTL after the revocation (on every
	// server sharing the store). Expiry is still checked on every request. Zero reads the store
	// on every request. Only tokens the store knows are kept, at most tokenCacheMax of them.
	CacheTTL time.Duration

	mu    sync.Mutex
	cache map[string]cachedToken // by HashToken of the secret: the secret itself is never kept
	// known are the valid tokens last read from Tokens, by hash, for AuthenticateDeferred: a
	// token found revoked or unknown by any read is forgotten.
	known map[string]*store.Token
}

// tokenCacheMax bounds the tokens an Authenticator keeps in memory; past it the cache starts
// again empty (a server with that many live callers reads each one again once).
const tokenCacheMax = 4096

type cachedToken struct {
	tk   *store.Token
	read time.Time // when it was read from the store (monotonic)
}

// PeopleProvider is implemented by an identity provider that tells a person's credential from an
// agent's; identity.JWT does, by the approver marks of its Config. When Authenticator.Identity
// implements it, Identify is asked instead of Principal: a credential it names a *Person for is
// that person's (an approver, method jwt), and any other is the agent's whose principal it
// returns. A provider that does not implement it verifies agents only.
type PeopleProvider interface {
	Identify(ctx context.Context) (latch.Principal, *identity.Person, error)
}

// token reads the token whose secret hashes to hash, from the cache when it was read less than
// CacheTTL ago (and cached is set).
func (a *Authenticator) token(ctx context.Context, hash string, cached bool) (*store.Token, error) {
	if a.CacheTTL <= 0 || !cached {
		return a.Tokens.TokenByHash(ctx, hash)
	}
	a.mu.Lock()
	c, ok := a.cache[hash]
	a.mu.Unlock()
	if ok && time.Since(c.read) < a.CacheTTL {
		return c.tk, nil
	}
	read := time.Now()
	tk, err := a.Tokens.TokenByHash(ctx, hash)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.cache == nil || len(a.cache) >= tokenCacheMax {
		a.cache = make(map[string]cachedToken)
	}
	a.cache[hash] = cachedToken{tk: tk, read: read}
	a.mu.Unlock()
	return tk, nil
}

// Caller is an authenticated credential: an agent's (Kind store.TokenAgent, Principal) or a
// person's (Kind store.TokenApprover, Approver).
type Caller struct {
	Kind      string          // store.TokenAgent or store.TokenApprover
	Principal latch.Principal // an agent credential's principal
	Approver  string          // a person's name: an approver token's, or a person's JWT's
	Method    string          // how the person was authenticated: store.MethodToken or MethodJWT; "" for an agent
	TokenID   string          // the API token's id; "" for a credential Identity verified
	ExpiresAt time.Time       // when the credential stops being accepted; zero for never
}

// AuthError is a refused credential: the HTTP status and the snake_case reason latch serve
// answers with (unauthenticated, invalid_token, token_revoked, token_expired,
// store_unavailable, and for a JWT a revocation feed refuses credential_revoked or
// revocation_feed_stale), and a detail for people that never quotes the credential.
type AuthError struct {
	Status int
	Reason string
	Detail string
}

func (e *AuthError) Error() string { return e.Reason + ": " + e.Detail }

func authError(status int, reason, detail string) *AuthError {
	return &AuthError{Status: status, Reason: reason, Detail: detail}
}

// Authenticate checks cred, the credential of an Authorization: Bearer header. A refusal is an
// *AuthError.
func (a *Authenticator) Authenticate(ctx context.Context, cred string) (*Caller, error) {
	return a.authenticate(ctx, cred, true)
}

// Recheck checks cred again as Authenticate does, but reads an API token from the store even
// when it was read less than CacheTTL ago: for a credential held for a long time (an event
// stream), whose revocation must be seen at once.
func (a *Authenticator) Recheck(ctx context.Context, cred string) (*Caller, error) {
	return a.authenticate(ctx, cred, false)
}

// AuthenticateDeferred is Authenticate for a request whose writes confirm its API token in their
// own transactions (store.TokenCheck): an API token this Authenticator read valid from the
// store before is taken from memory, without a store read, and returned with the TokenCheck
// that the request's writes must confirm (store.WithTokenCheck) — and that the caller must
// confirm with Recheck before answering if no write did. A token read from the store now (the
// first time, or after a refusal) returns a nil check: it was checked already. Its expiry is
// checked on every request, as Authenticate checks it. With CacheTTL set, and for credentials
// that are not API tokens, it is Authenticate, with a nil check.
func (a *Authenticator) AuthenticateDeferred(ctx context.Context, cred string) (*Caller, *store.TokenCheck, error) {
	if a.CacheTTL > 0 || !strings.HasPrefix(cred, TokenPrefix) {
		c, err := a.authenticate(ctx, cred, true)
		return c, nil, err
	}
	hash := HashToken(cred)
	a.mu.Lock()
	tk := a.known[hash]
	a.mu.Unlock()
	if tk == nil {
		c, err := a.authenticate(ctx, cred, false)
		return c, nil, err
	}
	c, err := a.callerOf(tk, nil)
	if err != nil {
		return nil, nil, err
	}
	return c, &store.TokenCheck{Hash: hash}, nil
}

// remember keeps a token read valid from the store for AuthenticateDeferred (tk nil: forgets the
// token of hash).
func (a *Authenticator) remember(hash string, tk *store.Token) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tk == nil {
		delete(a.known, hash)
		return
	}
	if a.known == nil || len(a.known) >= tokenCacheMax {
		a.known = make(map[string]*store.Token)
	}
	a.known[hash] = tk
}

func (a *Authenticator) authenticate(ctx context.Context, cred string, cached bool) (*Caller, error) {
	if cred == "" {
		return nil, authError(http.StatusUnauthorized, "unauthenticated", "no credential: send Authorization: Bearer TOKEN")
	}
	if !strings.HasPrefix(cred, TokenPrefix) {
		return a.verified(ctx, cred)
	}
	hash := HashToken(cred)
	tk, err := a.token(ctx, hash, cached)
	c, cerr := a.callerOf(tk, err)
	switch {
	case a.CacheTTL > 0:
	case cerr == nil:
		a.remember(hash, tk)
	case err == nil || errors.Is(err, store.ErrNotFound):
		a.remember(hash, nil) // revoked, expired or unknown now: never taken from memory again
	}
	return c, cerr
}

// callerOf is the caller of the API token tk, read with err, or the refusal of it.
func (a *Authenticator) callerOf(tk *store.Token, err error) (*Caller, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, authError(http.StatusUnauthorized, "invalid_token", "unknown token")
	case err != nil:
		return nil, authError(http.StatusServiceUnavailable, "store_unavailable", "cannot read tokens: "+err.Error())
	case !tk.RevokedAt.IsZero():
		return nil, authError(http.StatusUnauthorized, "token_revoked", fmt.Sprintf("token %s was revoked at %s", tk.ID, tk.RevokedAt.UTC().Format(time.RFC3339)))
	case !tk.ExpiresAt.IsZero() && !now().Before(tk.ExpiresAt):
		return nil, authError(http.StatusUnauthorized, "token_expired", fmt.Sprintf("token %s expired at %s", tk.ID, tk.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	c := &Caller{Kind: tk.Kind, TokenID: tk.ID, ExpiresAt: tk.ExpiresAt}
	if tk.Kind == store.TokenApprover {
		c.Approver, c.Method = tk.Approver, store.MethodToken
	} else {
		c.Principal = latch.Principal{Agent: tk.Agent, User: tk.User, Issuer: "latch-token:" + tk.ID}
	}
	return c, nil
}

// verified checks a credential that is not a latch API token with Identity: an agent's unless
// Identity is a PeopleProvider that names a person for it.
func (a *Authenticator) verified(ctx context.Context, cred string) (*Caller, error) {
	if a.Identity == nil {
		return nil, authError(http.StatusUnauthorized, "invalid_token", "not a latch API token, and this server verifies no other credential")
	}
	ctx = latch.WithCredential(ctx, cred)
	var p latch.Principal
	var person *identity.Person
	var err error
	if pp, ok := a.Identity.(PeopleProvider); ok {
		p, person, err = pp.Identify(ctx)
	} else {
		p, err = a.Identity.Principal(ctx)
	}
	var expired *latch.ExpiredCredentialError
	var ie *identity.Error
	switch {
	case errors.As(err, &expired):
		return nil, authError(http.StatusUnauthorized, "token_expired", "the credential expired at "+expired.Principal.ExpiresAt.UTC().Format(time.RFC3339))
	case errors.As(err, &ie) && latch.Reason(ie.Reason).Kind() == latch.KindIdentity:
		// credential_revoked, revocation_feed_stale: the refusal's own word on every surface.
		return nil, authError(http.StatusUnauthorized, ie.Reason, ie.Msg)
	case errors.As(err, &ie) && ie.Reason == "expired": // a person's expired JWT
		return nil, authError(http.StatusUnauthorized, "token_expired", "the credential does not verify: "+err.Error())
	case err != nil:
		return nil, authError(http.StatusUnauthorized, "invalid_token", "the credential does not verify: "+err.Error())
	case person != nil:
		name, err := store.NormalizeApprover(person.Name)
		if err != nil {
			return nil, authError(http.StatusUnauthorized, "invalid_token", "the credential's person: "+err.Error())
		}
		return &Caller{Kind: store.TokenApprover, Approver: name, Method: store.MethodJWT, ExpiresAt: person.ExpiresAt}, nil
	case p.Agent == "":
		return nil, authError(http.StatusUnauthorized, "invalid_token", "the credential names no agent")
	}
	return &Caller{Kind: store.TokenAgent, Principal: p, ExpiresAt: p.ExpiresAt}, nil
}
