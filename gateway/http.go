package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler serves the gateway over streamable HTTP. Every request must carry an agent API token
// of `latch serve` (Authorization: Bearer latch_…) found in tokens, unrevoked and unexpired; the
// session's principal is the token's. A request without one is refused 401 before it reaches
// MCP. now is the clock tokens expire by; nil is time.Now.
func (g *Gateway) Handler(tokens store.TokenStore, now func() time.Time) http.Handler {
	if now == nil {
		now = time.Now
	}
	srv := g.Server()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	verify := func(ctx context.Context, cred string, _ *http.Request) (*auth.TokenInfo, error) {
		return verifyToken(ctx, tokens, cred, now())
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}

// verifyToken returns the session's token info for an agent token; every refusal unwraps to
// auth.ErrInvalidToken (401) except a store failure (500).
func verifyToken(ctx context.Context, tokens store.TokenStore, cred string, now time.Time) (*auth.TokenInfo, error) {
	if !strings.HasPrefix(cred, server.TokenPrefix) {
		return nil, fmt.Errorf("%w: not a latch API token", auth.ErrInvalidToken)
	}
	tk, err := tokens.TokenByHash(ctx, server.HashToken(cred))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
	case err != nil:
		return nil, fmt.Errorf("gateway: read tokens: %w", err)
	case !tk.RevokedAt.IsZero():
		return nil, fmt.Errorf("%w: token %s was revoked", auth.ErrInvalidToken, tk.ID)
	case !tk.ExpiresAt.IsZero() && !now.Before(tk.ExpiresAt):
		return nil, fmt.Errorf("%w: token %s expired", auth.ErrInvalidToken, tk.ID)
	case tk.Kind != store.TokenAgent:
		return nil, fmt.Errorf("%w: token %s is an approver token: tool calls need an agent token", auth.ErrInvalidToken, tk.ID)
	}
	p := latch.Principal{Agent: tk.Agent, User: tk.User, Issuer: "latch-token:" + tk.ID}
	// UserID binds the MCP session to the token: the SDK refuses a request of the session
	// that presents another.
	return &auth.TokenInfo{UserID: tk.ID, Expiration: tk.ExpiresAt, Extra: map[string]any{principalKey: p}}, nil
}
