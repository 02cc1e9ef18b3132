package gateway

import (
	"context"
	"errors"
	"fmt"
	latchauth "github.com/latchkit/latch/auth"
	"net/http"

	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler serves the gateway over streamable HTTP. Every request must carry a credential that
// a authenticates as an agent: an agent API token of `latch serve` (Authorization: Bearer
// latch_…), unrevoked and unexpired, or — when a.Identity is set — a credential it verifies,
// such as a JWT. The session's principal is the credential's. A request without one, or with an
// approver token, is refused 401 before it reaches MCP, and a session is bound to the
// credential it started with.
func (g *Gateway) Handler(a *latchauth.Authenticator) http.Handler {
	srv := g.Server()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	verify := func(ctx context.Context, cred string, r *http.Request) (*auth.TokenInfo, error) {
		ti, err := verifyAgent(ctx, a, cred)
		if err != nil {
			return nil, err
		}
		// The token info is made anew for each request and reaches the tool handler with the
		// call this request carries: through it the handler learns when the agent goes away.
		ti.Extra[requestKey] = r.Context()
		return ti, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}

// verifyAgent returns the session's token info for an agent credential; every refusal unwraps
// to auth.ErrInvalidToken (401) except a store failure (500).
func verifyAgent(ctx context.Context, a *latchauth.Authenticator, cred string) (*auth.TokenInfo, error) {
	c, err := a.Authenticate(ctx, cred)
	if err != nil {
		var ae *latchauth.AuthError
		if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			return nil, fmt.Errorf("%w: %s (%s)", auth.ErrInvalidToken, ae.Detail, ae.Reason)
		}
		return nil, fmt.Errorf("gateway: authenticate: %w", err)
	}
	if c.Kind != store.TokenAgent {
		return nil, fmt.Errorf("%w: token %s is an approver token: tool calls need an agent's credential", auth.ErrInvalidToken, c.TokenID)
	}
	return &auth.TokenInfo{UserID: sessionUser(c), Expiration: c.ExpiresAt, Extra: map[string]any{principalKey: c.Principal}}, nil
}

// sessionUser names the credential an MCP session is bound to: the SDK refuses a request of
// the session that presents another.
func sessionUser(c *latchauth.Caller) string {
	if c.TokenID != "" {
		return c.TokenID
	}
	p := c.Principal
	return fmt.Sprintf("%q %q %q", p.Issuer, p.Agent, p.User)
}
