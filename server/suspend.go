package server

import (
	"encoding/json"
	"net/http"

	"github.com/latchkit/latch"
)

// suspendRequest is the body of POST /v1/actions/{id}/suspend.
type suspendRequest struct {
	// Request is what the executor asks for (any JSON, at most 64 KiB): it is kept with the
	// suspension and handed back on resume.
	Request json.RawMessage `json:"request"`
}

// suspensionJSON answers a suspension: the token is told here and never again.
type suspensionJSON struct {
	ActionID       string          `json:"action_id"`
	EffectKey      string          `json:"effect_key"`
	Attempt        int             `json:"attempt"`
	Round          int             `json:"round"`
	Token          string          `json:"token"`
	Request        json.RawMessage `json:"request"`
	LeaseExpiresAt *string         `json:"lease_expires_at"`
}

// resumeRequest is the body of POST /v1/actions/{id}/resume.
type resumeRequest struct {
	Token     string                     `json:"token"`
	Arguments json.RawMessage            `json:"arguments"`
	Input     map[string]json.RawMessage `json:"input"`
}

// resumptionJSON answers a resume.
type resumptionJSON struct {
	ActionID       string          `json:"action_id"`
	Round          int             `json:"round"`
	Request        json.RawMessage `json:"request"`
	LeaseExpiresAt *string         `json:"lease_expires_at"`
}

// postSuspend is POST /v1/actions/{id}/suspend: the executor of a begun action suspends it,
// waiting for input from outside; the effect stays executing under its lease.
func (s *Server) postSuspend(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.agentOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	s.limited(w, r, c, func() {
		var req suspendRequest
		if p := decode(w, r, s.cfg.MaxBody, &req, true); p != nil {
			writeProblem(w, p)
			return
		}
		id := r.PathValue("id")
		sp, err := s.g.SuspendBegun(latch.WithPrincipal(r.Context(), c.principal), id, req.Request)
		if err != nil {
			writeProblem(w, problemOf(err))
			return
		}
		writeJSON(w, http.StatusOK, &suspensionJSON{ActionID: sp.ActionID, EffectKey: sp.EffectKey, Attempt: sp.Attempt,
			Round: sp.Round, Token: sp.Token, Request: sp.Request, LeaseExpiresAt: jstamp(sp.LeaseExpiresAt)})
	})
}

// postResume is POST /v1/actions/{id}/resume: the suspension is spent, once, by its exact
// token, from the action's principal, with its arguments canonically the same, under a live
// lease; the executor then carries on and reports the outcome.
func (s *Server) postResume(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.agentOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	s.limited(w, r, c, func() {
		var req resumeRequest
		if p := decode(w, r, s.cfg.MaxBody, &req, false); p != nil {
			writeProblem(w, p)
			return
		}
		switch {
		case req.Token == "":
			writeProblem(w, missing("token"))
			return
		case len(req.Arguments) == 0 || string(req.Arguments) == "null":
			writeProblem(w, missing("arguments"))
			return
		}
		id := r.PathValue("id")
		res, err := s.g.ResumeBegun(latch.WithPrincipal(r.Context(), c.principal), &latch.ResumeRequest{ActionID: id,
			Token: req.Token, Arguments: req.Arguments, Input: req.Input})
		if err != nil {
			writeProblem(w, problemOf(err))
			return
		}
		writeJSON(w, http.StatusOK, &resumptionJSON{ActionID: res.ActionID, Round: res.Round, Request: res.Request,
			LeaseExpiresAt: jstamp(res.LeaseExpiresAt)})
	})
}
