package server

import (
	"context"
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
	// check, when not nil, is the API token taken from the server's memory of tokens it
	// verified: the request's writes confirm it in their transactions, and its answer is held
	// until one did or the store was read (confirmWriter).
	check *store.TokenCheck
}

// authenticateAs reads the bearer credential of r. Each way it can be wrong is its own problem,
// and none of them writes anything. deferred takes an API token verified before from memory,
// with the check the request's writes confirm (auth.Authenticator.AuthenticateDeferred).
func (s *Server) authenticateAs(r *http.Request, deferred bool) (*caller, *Problem) {
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
	var c *auth.Caller
	var check *store.TokenCheck
	var err error
	if deferred {
		c, check, err = s.auth.AuthenticateDeferred(r.Context(), cred)
	} else {
		c, err = s.auth.Authenticate(r.Context(), cred)
	}
	if err != nil {
		return nil, authProblem(err)
	}
	return &caller{kind: c.Kind, principal: c.Principal, approver: c.Approver, method: c.Method, cred: cred, expiresAt: c.ExpiresAt, check: check}, nil
}

// authProblem is the answer to a refused credential.
func authProblem(err error) *Problem {
	var ae *auth.AuthError
	if !errors.As(err, &ae) {
		ae = &auth.AuthError{Status: http.StatusServiceUnavailable, Reason: "store_unavailable", Detail: err.Error()}
	}
	return problem(ae.Status, ae.Reason, ae.Detail)
}

// withCheck returns ctx carrying the caller's token check, if any: the request's writes confirm
// its token in their own transactions.
func (c *caller) withCheck(ctx context.Context) context.Context {
	if c.check == nil {
		return ctx
	}
	return store.WithTokenCheck(ctx, c.check)
}

// confirmWriter holds the answer of a request whose API token was taken from memory
// (caller.check) until the token is confirmed: by a write of the request, inside its
// transaction, or else by reading the store when the answer begins. A token revoked meanwhile
// — by any process sharing the store — gets the 401 that authenticate gives, instead of the
// answer; its writes were refused in their transactions and wrote nothing.
type confirmWriter struct {
	http.ResponseWriter
	s       *Server
	r       *http.Request
	c       *caller
	decided bool
	refused bool
}

// stillHolds reports whether c's credential may be answered for: a token taken from memory
// only once a write of the request confirmed it in its transaction, or the store says it still
// holds; any other credential was checked when the request was authenticated.
func (s *Server) stillHolds(ctx context.Context, c *caller) error {
	if c.check == nil || c.check.Confirmed() {
		return nil
	}
	_, err := s.auth.Recheck(ctx, c.cred)
	return err
}

// confirm decides, once, whether the answer may be written.
func (w *confirmWriter) confirm() {
	if w.decided {
		return
	}
	w.decided = true
	if err := w.s.stillHolds(w.r.Context(), w.c); err != nil {
		w.refused = true
		h := w.ResponseWriter.Header()
		conn := h["Connection"] // how the connection ends is not the answer's to drop
		clear(h)
		if conn != nil {
			h["Connection"] = conn
		}
		writeProblem(w.ResponseWriter, authProblem(err))
	}
}

func (w *confirmWriter) WriteHeader(status int) {
	if w.confirm(); !w.refused {
		w.ResponseWriter.WriteHeader(status)
	}
}

func (w *confirmWriter) Write(b []byte) (int, error) {
	if w.confirm(); w.refused {
		return len(b), nil // the refusal is the answer
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap is for http.ResponseController.
func (w *confirmWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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
