package server

import (
	"errors"
	"net/http"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/store"
)

// StandingIDHeader names, on the answer of a grant that created a standing approval, the id of
// that standing approval (docs/approvals.md#standing-approvals). The answer's body is the
// request, as for every grant.
const StandingIDHeader = "Latch-Standing-Id"

// listStanding is GET /v1/standing[?state=]: the standing approvals, newest first, with the
// same shape as latch approvals --standing --json.
func (s *Server) listStanding(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	out, err := s.op.Standings(r.Context(), r.URL.Query().Get("state"))
	if err != nil {
		writeProblem(w, filterProblem(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"standing": out})
}

// getStanding is GET /v1/standing/{id}: for approvers, and for the principal it admits.
func (s *Server) getStanding(w http.ResponseWriter, r *http.Request, c *caller) {
	id := r.PathValue("id")
	notFound := problem(http.StatusNotFound, "standing_not_found", "no standing approval "+id)
	ss, ok := s.g.Store().(store.StandingStore)
	if !ok {
		writeProblem(w, notFound)
		return
	}
	st, err := ss.Standing(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, notFound)
		return
	case err != nil:
		writeProblem(w, problemOf(err))
		return
	case c.kind == store.TokenAgent && (st.Agent != c.principal.Agent || st.User != c.principal.User):
		// Another principal's standing approval reads as absent: its id is a bearer capability.
		writeProblem(w, notFound)
		return
	}
	writeJSON(w, http.StatusOK, s.op.StandingView(st))
}

// revokeStandingRequest is the (optional) body of POST /v1/standing/{id}/revoke.
type revokeStandingRequest struct {
	Note string `json:"note"`
}

// revokeStanding is POST /v1/standing/{id}/revoke, as the person the credential names; who may
// revoke is Guard.RevokeStanding's to decide.
func (s *Server) revokeStanding(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	var req revokeStandingRequest
	if p := decode(w, r, s.cfg.MaxBody, &req, true); p != nil {
		writeProblem(w, p)
		return
	}
	id := r.PathValue("id")
	st, err := s.g.RevokeStanding(r.Context(), &store.RevokeStandingRequest{ID: id, By: c.approver, Note: req.Note})
	var se *store.StandingError
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, problem(http.StatusNotFound, "standing_not_found", "no standing approval "+id))
	case errors.As(err, &se):
		writeProblem(w, problem(jsonview.StandingStatus(se.Reason), se.Reason, trimLatch(err)))
	case err != nil:
		writeProblem(w, problemOf(err))
	default:
		writeJSON(w, http.StatusOK, s.op.StandingView(st))
	}
}

// badBody is the problem of a member of the body that cannot apply.
func badBody(field, detail string) *Problem {
	p := problem(http.StatusBadRequest, "invalid_field", "field "+field+": "+detail)
	p.Field = field
	return p
}
