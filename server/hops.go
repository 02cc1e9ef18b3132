package server

import (
	"errors"
	"net/http"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/policy"
)

// hopRequest is the body of POST /v1/hops.
type hopRequest struct {
	Parent string `json:"parent"`
	To     *struct {
		Agent string `json:"agent"`
		User  string `json:"user"`
	} `json:"to"`
	// Grant is the grant handed on, as YAML text; its subject may be left out.
	Grant string `json:"grant"`
}

// postHop is POST /v1/hops: the agent the credential names (the sender) hands part of a grant
// it holds to one receiving agent (Guard.Hop, docs/agents.md). Only an agent's credential
// creates one: a person's is refused 403 forbidden and writes nothing.
func (s *Server) postHop(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.agentOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	if s.g.Policy().Authority == nil {
		writeProblem(w, problem(http.StatusForbidden, authority.ReasonNoAuthority, "the policy has no authority section, so there is no grant to hand on"))
		return
	}
	var req hopRequest
	if p := decode(w, r, s.cfg.MaxBody, &req, false); p != nil {
		writeProblem(w, p)
		return
	}
	switch {
	case req.Parent == "":
		p := problem(http.StatusBadRequest, "missing_field", "parent: the grant or delegation id the hop is handed on from")
		p.Field = "parent"
		writeProblem(w, p)
		return
	case req.To == nil || req.To.Agent == "":
		p := problem(http.StatusBadRequest, "missing_field", "to.agent: the receiving agent")
		p.Field = "to"
		writeProblem(w, p)
		return
	case req.Grant == "":
		p := problem(http.StatusBadRequest, "missing_field", "grant: the grant handed on, as YAML text")
		p.Field = "grant"
		writeProblem(w, p)
		return
	}
	d, err := s.g.Hop(r.Context(), req.Parent, []byte(req.Grant), latch.Principal{Agent: req.To.Agent, User: req.To.User}, c.principal)
	if err != nil {
		writeProblem(w, hopProblem(err))
		return
	}
	v, _ := jsonview.NewDelegation(d, nil)
	writeJSON(w, http.StatusOK, v)
}

// hopProblem is the problem of a refused hop: 400 invalid_grant for a grant that does not parse
// or is malformed; 403 with the authority reason and dimension for a sender who does not hold
// the parent or a hop wider than it.
func hopProblem(err error) *Problem {
	var pe *policy.Error
	var ae *latch.AuthorityError
	switch {
	case errors.As(err, &pe):
		p := problem(http.StatusBadRequest, authority.ReasonInvalidGrant, pe.Error())
		p.Field = "grant"
		return p
	case errors.As(err, &ae) && ae.Reason == authority.ReasonInvalidGrant:
		p := problem(http.StatusBadRequest, ae.Reason, trimLatch(err))
		p.Dimension = ae.Dimension
		return p
	case errors.As(err, &ae):
		p := problem(http.StatusForbidden, ae.Reason, trimLatch(err))
		p.Dimension = ae.Dimension
		return p
	}
	return problemOf(err)
}

// getHop is GET /v1/hops/{id}: what ran under the hop (operator.Hop), the object `latch inspect
// --hop ID --json` prints, for a person's credential.
func (s *Server) getHop(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	t, err := s.op.Hop(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, operator.ErrNothingRecorded):
		writeProblem(w, problem(http.StatusNotFound, "not_found", "nothing recorded for hop "+r.PathValue("id")+": no delegation by that id, and no receipt names it"))
	case err != nil:
		writeProblem(w, problemOf(err))
	default:
		writeJSON(w, http.StatusOK, t)
	}
}
