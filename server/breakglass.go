package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// breakGlassRequest is the body of POST /v1/break-glass.
type breakGlassRequest struct {
	Envelope string `json:"envelope"`
	Reason   string `json:"reason"`
	// TTLSeconds is how long the grant lasts; 0 or absent is the envelope's max_ttl.
	TTLSeconds int64 `json:"ttl_seconds"`
	// For replaces the subject of the envelope (or of Grant): whom the grant is for.
	For *struct {
		Agent string `json:"agent"`
		User  string `json:"user"`
	} `json:"for"`
	// Grant, optional, is a narrower grant to open, as YAML text.
	Grant string `json:"grant"`
}

// breakGlass is POST /v1/break-glass: the person the credential names opens a break-glass
// grant (Guard.BreakGlass, docs/authority.md#break-glass). Only a person's credential opens one:
// an agent's token or JWT is refused 403 forbidden and writes nothing.
func (s *Server) breakGlass(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	if s.g.Policy().Authority == nil {
		writeProblem(w, problem(http.StatusNotFound, "envelope_not_found", "the policy has no authority section, so no break-glass envelope"))
		return
	}
	var req breakGlassRequest
	if p := decode(w, r, s.cfg.MaxBody, &req, false); p != nil {
		writeProblem(w, p)
		return
	}
	if req.TTLSeconds < 0 || req.TTLSeconds > int64(policy.MaxBreakGlassTTL/time.Second) {
		p := problem(http.StatusBadRequest, "invalid_field", "ttl_seconds: want 0 (the envelope's max_ttl) or a positive number of seconds, at most the envelope's max_ttl")
		p.Field = "ttl_seconds"
		writeProblem(w, p)
		return
	}
	br := &latch.BreakGlassRequest{Envelope: req.Envelope, Grant: []byte(req.Grant), Reason: req.Reason,
		TTL: time.Duration(req.TTLSeconds) * time.Second, By: store.Approver{Name: c.approver, Method: c.method, Verified: true}}
	if req.For != nil {
		br.For = latch.Principal{Agent: req.For.Agent, User: req.For.User}
	}
	d, err := s.g.BreakGlass(r.Context(), br)
	if err != nil {
		writeProblem(w, breakGlassProblem(req.Envelope, err))
		return
	}
	v, _ := jsonview.NewDelegation(d, nil)
	writeJSON(w, http.StatusOK, v)
}

// breakGlassProblem is the problem of a refused opening: 404 envelope_not_found for an envelope
// the policy does not have; 400 invalid_grant for a grant that does not parse or a missing
// reason or TTL; 403 with the authority reason and dimension for a person who may not open it
// or a grant wider or longer than the envelope allows.
func breakGlassProblem(envelope string, err error) *Problem {
	var pe *policy.Error
	var ae *latch.AuthorityError
	switch {
	case errors.As(err, &pe):
		p := problem(http.StatusBadRequest, authority.ReasonInvalidGrant, pe.Error())
		p.Field = "grant"
		return p
	case errors.As(err, &ae) && ae.Reason == authority.ReasonNoAuthority && ae.Dimension == authority.DimParent:
		return problem(http.StatusNotFound, "envelope_not_found", "no break-glass envelope "+safetext.Quote(envelope)+" in the policy")
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
