package server

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
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// TokenPrefix begins every API token secret, so a leaked one is recognisable (and a credential
// that lacks it is given to Config.Identity instead).
const TokenPrefix = "latch_"

// HashToken returns what the store keeps of a secret: sha256: and the hex SHA-256 of it.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])
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

// caller is an authenticated request's credential.
type caller struct {
	kind      string // store.TokenAgent or store.TokenApprover
	principal latch.Principal
	approver  string
}

// authenticate reads the bearer credential of r. Each way it can be wrong is its own problem,
// and none of them writes anything.
func (s *Server) authenticate(r *http.Request) (*caller, *Problem) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, problem(http.StatusUnauthorized, "unauthenticated", "no credential: send Authorization: Bearer TOKEN")
	}
	scheme, cred, ok := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	if !ok || !strings.EqualFold(scheme, "Bearer") || cred == "" {
		return nil, problem(http.StatusUnauthorized, "unauthenticated", "the Authorization header must be Bearer TOKEN")
	}
	if !strings.HasPrefix(cred, TokenPrefix) {
		if s.cfg.Identity == nil {
			return nil, problem(http.StatusUnauthorized, "invalid_token", "not a latch API token, and this server verifies no other credential")
		}
		p, err := s.cfg.Identity.Principal(latch.WithCredential(r.Context(), cred))
		var expired *latch.ExpiredCredentialError
		switch {
		case errors.As(err, &expired):
			return nil, problem(http.StatusUnauthorized, "token_expired", "the credential expired at "+expired.Principal.ExpiresAt.UTC().Format(time.RFC3339))
		case err != nil:
			return nil, problem(http.StatusUnauthorized, "invalid_token", "the credential does not verify: "+err.Error())
		case p.Agent == "":
			return nil, problem(http.StatusUnauthorized, "invalid_token", "the credential names no agent")
		}
		return &caller{kind: store.TokenAgent, principal: p}, nil
	}
	tk, err := s.tokens.TokenByHash(r.Context(), HashToken(cred))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, problem(http.StatusUnauthorized, "invalid_token", "unknown token")
	case err != nil:
		return nil, problem(http.StatusServiceUnavailable, "store_unavailable", "cannot read tokens: "+err.Error())
	case !tk.RevokedAt.IsZero():
		return nil, problem(http.StatusUnauthorized, "token_revoked", fmt.Sprintf("token %s was revoked at %s", tk.ID, tk.RevokedAt.UTC().Format(time.RFC3339)))
	case !tk.ExpiresAt.IsZero() && !s.cfg.Now().Before(tk.ExpiresAt):
		return nil, problem(http.StatusUnauthorized, "token_expired", fmt.Sprintf("token %s expired at %s", tk.ID, tk.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	c := &caller{kind: tk.Kind}
	if tk.Kind == store.TokenApprover {
		c.approver = tk.Approver
	} else {
		c.principal = latch.Principal{Agent: tk.Agent, User: tk.User, Issuer: "latch-token:" + tk.ID}
	}
	return c, nil
}

// agentOnly refuses an approver credential where a principal proposes.
func (c *caller) agentOnly() *Problem {
	if c.kind != store.TokenAgent {
		return problem(http.StatusForbidden, "forbidden", "an approver token cannot propose actions or report outcomes: use an agent token")
	}
	return nil
}

// approverOnly refuses an agent credential where a person answers or resolves.
func (c *caller) approverOnly() *Problem {
	if c.kind != store.TokenApprover {
		return problem(http.StatusForbidden, "forbidden", "this route needs an approver token (latch token create --approver NAME)")
	}
	return nil
}
