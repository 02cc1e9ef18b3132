package server

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/store"
)

// caller is an authenticated request's credential.
type caller struct {
	kind      string // store.TokenAgent or store.TokenApprover
	principal latch.Principal
	approver  string
	method    string // how the approver was authenticated: store.MethodToken, MethodJWT…
	// What a long-lived request (the event stream) checks again: the bearer credential, or
	// (console) that the request's session still holds; and when the credential expires.
	cred      string
	console   bool
	expiresAt time.Time
}

// authenticate reads the bearer credential of r. Each way it can be wrong is its own problem,
// and none of them writes anything.
func (s *Server) authenticate(r *http.Request) (*caller, *Problem) {
	h := r.Header.Get("Authorization")
	if h == "" && r.Method == http.MethodGet && r.URL.Path == "/v1/events" && s.con != nil {
		// The console's pages follow the event stream with the browser's session cookie:
		// EventSource cannot send a bearer token. Only this read-only route takes it.
		if name, ok := s.con.Approver(r); ok {
			return &caller{kind: store.TokenApprover, approver: name, console: true}, nil
		}
	}
	if h == "" {
		return nil, problem(http.StatusUnauthorized, "unauthenticated", "no credential: send Authorization: Bearer TOKEN")
	}
	scheme, cred, ok := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	if !ok || !strings.EqualFold(scheme, "Bearer") || cred == "" {
		return nil, problem(http.StatusUnauthorized, "unauthenticated", "the Authorization header must be Bearer TOKEN")
	}
	c, err := s.auth.Authenticate(r.Context(), cred)
	if err != nil {
		var ae *auth.AuthError
		if !errors.As(err, &ae) {
			ae = &auth.AuthError{Status: http.StatusServiceUnavailable, Reason: "store_unavailable", Detail: err.Error()}
		}
		return nil, problem(ae.Status, ae.Reason, ae.Detail)
	}
	return &caller{kind: c.Kind, principal: c.Principal, approver: c.Approver, method: c.Method, cred: cred, expiresAt: c.ExpiresAt}, nil
}

// agentOnly refuses a person's credential where a principal proposes.
func (c *caller) agentOnly() *Problem {
	if c.kind != store.TokenAgent {
		return problem(http.StatusForbidden, "forbidden", "a person's credential (an approver token or a person's JWT) cannot propose actions or report outcomes: use an agent's")
	}
	return nil
}

// approverOnly refuses an agent's credential where a person answers or resolves: only a
// person's credential passes (an approver token, a person's JWT, a console session).
func (c *caller) approverOnly() *Problem {
	if c.kind != store.TokenApprover {
		return problem(http.StatusForbidden, "forbidden", "this route needs a person's credential: an approver token (latch token create --approver NAME) or a JWT carrying the approver mark this server was given; an agent's credential cannot")
	}
	return nil
}
