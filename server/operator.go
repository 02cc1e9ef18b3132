package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/store"
)

// jstamp is a latch timestamp (RFC 3339, UTC, milliseconds, Z) for JSON: null for the zero time.
func jstamp(t time.Time) *string { return jsonview.Stamp(t) }

// jstr is a JSON string, null when empty.
func jstr(s string) *string { return jsonview.Str(s) }

// approvalJSON is an approval request as `latch approvals --json` prints it: one shape for the
// CLI, the API and the operator MCP server (package jsonview).
type approvalJSON = jsonview.Approval

// newApprovalJSON is a as the API shows it, with the display hints of the server's policy and
// the reminders recorded for it and what approvers changed of its arguments.
func (s *Server) newApprovalJSON(ctx context.Context, a *store.Approval) (approvalJSON, error) {
	return s.op.ApprovalDetail(ctx, a)
}

// filterProblem is the problem of a filter word outside its vocabulary (operator.FilterError),
// else of err.
func filterProblem(err error) *Problem {
	var fe *operator.FilterError
	if errors.As(err, &fe) {
		return badQuery(fe.Name, fe.Error())
	}
	return problemOf(err)
}

// listApprovals is GET /v1/approvals[?status=].
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	out, err := s.op.Approvals(r.Context(), r.URL.Query().Get("status"))
	if err != nil {
		writeProblem(w, filterProblem(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": out})
}

// getApproval is GET /v1/approvals/{id}: for approvers, and for the principal that asked.
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, c *caller) {
	a, err := s.g.Store().Approval(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, problem(http.StatusNotFound, "approval_not_found", "no approval request "+r.PathValue("id")))
		return
	case err != nil:
		writeProblem(w, problemOf(err))
		return
	case c.kind == store.TokenAgent && (a.Agent != c.principal.Agent || a.User != c.principal.User):
		// Another principal's request reads as absent: approval ids are bearer capabilities.
		writeProblem(w, problem(http.StatusNotFound, "approval_not_found", "no approval request "+r.PathValue("id")))
		return
	}
	out, err := s.newApprovalJSON(r.Context(), a)
	if err != nil {
		writeProblem(w, problemOf(err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// answerRequest is the (optional) body of POST /v1/approvals/{id}/approve and /deny: a note,
// the arguments an approver changes with a grant (docs/approvals.md#approve-with-edits) and,
// on a grant only, the terms of a standing approval it also grants.
type answerRequest struct {
	Note     string               `json:"note"`
	Set      json.RawMessage      `json:"set"`
	Standing *store.StandingTerms `json:"standing"`
}

// answer is POST /v1/approvals/{id}/approve and /deny, as the person the credential names: a
// verified answer (method token for an approver token, jwt for a person's JWT), counted under
// the action's approvers (docs/approvals.md).
func (s *Server) answer(grant bool) func(http.ResponseWriter, *http.Request, *caller) {
	return func(w http.ResponseWriter, r *http.Request, c *caller) {
		if p := c.approverOnly(); p != nil {
			writeProblem(w, p)
			return
		}
		var req answerRequest
		if p := decode(w, r, s.cfg.MaxBody, &req, true); p != nil {
			writeProblem(w, p)
			return
		}
		id := r.PathValue("id")
		if string(req.Set) == "null" {
			req.Set = nil
		}
		if req.Standing != nil && !grant {
			writeProblem(w, badBody("standing", "a deny grants no standing approval"))
			return
		}
		ar := &store.AnswerRequest{ID: id, Grant: grant, Approver: c.approver, Method: c.method, Verified: true,
			Note: req.Note, Set: req.Set, Standing: req.Standing}
		a, err := s.g.Answer(r.Context(), ar)
		var ae *store.AnswerError
		var se *store.StandingError
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeProblem(w, problem(http.StatusNotFound, "approval_not_found", "no approval request "+id))
		case errors.As(err, &se):
			p := problem(jsonview.StandingStatus(se.Reason), se.Reason, trimLatch(err))
			p.ApprovalID = id
			writeProblem(w, p)
		case errors.As(err, &ae):
			p := problem(jsonview.AnswerStatus(ae.Reason), ae.Reason, trimLatch(err))
			p.ApprovalID = id
			writeProblem(w, p)
		case err != nil:
			writeProblem(w, problemOf(err))
		default:
			out, err := s.newApprovalJSON(r.Context(), a)
			if err != nil {
				writeProblem(w, problemOf(err))
				return
			}
			if ar.Standing != nil && a.Status == store.Granted {
				w.Header().Set(StandingIDHeader, ar.StandingID)
			}
			writeJSON(w, http.StatusOK, out)
		}
	}
}

// listEffects is GET /v1/effects[?state=]: state a stored state, needs_person (what waits for a
// person: operator.NeedsPerson) or all.
func (s *Server) listEffects(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	q := r.URL.Query()
	limit, p := pageLimit(q)
	if p != nil {
		writeProblem(w, p)
		return
	}
	after := q.Get("after")
	if err := store.CheckText("after", after); err != nil {
		writeProblem(w, badQuery("after", "after must be an effect key: "+err.Error()))
		return
	}
	out, next, err := s.op.EffectPage(r.Context(), q.Get("state"), after, limit)
	if err != nil {
		writeProblem(w, filterProblem(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"effects": out, "next_after": next})
}

// pageLimit reads a list's limit (operator.PageSize).
func pageLimit(q url.Values) (int, *Problem) {
	v := q.Get("limit")
	n := 0
	if v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			return 0, badQuery("limit", "limit must be an integer")
		}
	}
	n, err := operator.PageSize(n, v != "")
	if err != nil {
		return 0, badQuery("limit", err.Error())
	}
	return n, nil
}

// getEffect is GET /v1/effects/{key}.
func (s *Server) getEffect(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	e, err := s.op.Effect(r.Context(), r.PathValue("key"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, problem(http.StatusNotFound, "effect_not_found", "no effect record "+r.PathValue("key")))
	case err != nil:
		writeProblem(w, problemOf(err))
	default:
		writeJSON(w, http.StatusOK, e)
	}
}

// resolve is POST /v1/effects/{key}/resolve: settle an effect that needs a person, as the
// person the credential names (recorded resolved_by "http:NAME"), with the body every surface
// takes (operator.Resolution: to, result, note). Who may resolve what is Guard.ResolveEffect's to
// decide, for every surface.
func (s *Server) resolve(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	var req operator.Resolution
	if p := decode(w, r, s.cfg.MaxBody, &req, false); p != nil {
		writeProblem(w, p)
		return
	}
	key := r.PathValue("key")
	e, err := s.op.Resolve(r.Context(), s.g, key, &req, "http:"+c.approver)
	var ie *operator.InputError
	var ref *operator.Refusal
	switch {
	case errors.As(err, &ie):
		p := problem(http.StatusBadRequest, ie.Reason, ie.Detail)
		p.Field, p.Pointer = ie.Field, ie.Pointer
		writeProblem(w, p)
	case errors.As(err, &ref):
		p := problem(resolveStatus(ref.Reason), ref.Reason, ref.Error())
		if ref.Reason == operator.ReasonEffectNotFound {
			p.Detail = "no effect record " + key
		}
		p.EffectKey = key
		writeProblem(w, p)
	case err != nil:
		writeProblem(w, problemOf(err))
	default:
		writeJSON(w, http.StatusOK, s.op.EffectView(e))
	}
}

// resolveStatus is the HTTP status of a refused resolution: 404 for no such effect, 409 for one
// that needs no person or whose holder cannot be read, 403 for a person who may not resolve it
// (self_resolution, approver_not_entitled).
func resolveStatus(reason string) int {
	switch reason {
	case operator.ReasonEffectNotFound:
		return http.StatusNotFound
	case operator.ReasonNotAmbiguous, store.ReasonHolderUnknown:
		return http.StatusConflict
	}
	return http.StatusForbidden
}

// listReceipts is GET /v1/receipts?after=SEQ&limit=N: receipts in seq order, each as
// `latch receipts --json` prints it (jsonview.Receipt); next_after pages on.
func (s *Server) listReceipts(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	q := r.URL.Query()
	after := int64(0)
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeProblem(w, badQuery("after", "after must be a receipt seq (a non-negative integer)"))
			return
		}
		after = n
	}
	limit, p := pageLimit(q)
	if p != nil {
		writeProblem(w, p)
		return
	}
	out, next, err := s.op.ReceiptPage(r.Context(), after, limit)
	if err != nil {
		writeProblem(w, problemOf(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"receipts": out, "next_after": next})
}

// verifyReceipts is GET /v1/receipts/verify: the chain checked against its head, the state
// against the chain, and with Config.CheckpointKey every signed checkpoint against the chain;
// each break named with its seq.
func (s *Server) verifyReceipts(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	// The head and the receipts are read in one snapshot, so writers cannot fake a break.
	rep, err := s.op.VerifyChain(r.Context(), nil)
	if err != nil {
		writeProblem(w, problemOf(err))
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// healthz is GET /healthz: the process is up.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is GET /readyz: the store answers (its chain head reads).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if _, err := s.g.Store().Head(r.Context()); err != nil {
		writeProblem(w, problem(http.StatusServiceUnavailable, "store_unavailable", "the store does not answer: "+trimLatch(err)))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func badQuery(param, detail string) *Problem {
	p := problem(http.StatusBadRequest, "invalid_query", detail)
	p.Field = param
	return p
}

func trimLatch(err error) string {
	s := err.Error()
	for len(s) > 7 && s[:7] == "latch: " {
		s = s[7:]
	}
	return s
}

// stats is GET /v1/stats[?since=DURATION]: receipts counted by action and result, as
// `latch stats --json` prints them.
func (s *Server) stats(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	var window time.Duration
	if v := r.URL.Query().Get("since"); v != "" {
		d, err := operator.ParseWindow(v)
		if err != nil {
			writeProblem(w, badQuery("since", err.Error()))
			return
		}
		window = d
	}
	out, err := s.op.Stats(r.Context(), window)
	if err != nil {
		writeProblem(w, problemOf(err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// coverage is GET /v1/coverage[?since=T]: for each action and rule of the server's policy, the
// recorded calls it decided, and what never fired, as `latch coverage --json` prints it.
func (s *Server) coverage(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	var from time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := operator.ParseSince(v, s.cfg.Now())
		if err != nil {
			writeProblem(w, badQuery("since", err.Error()))
			return
		}
		from = t
	}
	out, err := s.op.Coverage(r.Context(), from)
	if err != nil {
		writeProblem(w, problemOf(err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// listBudgets is GET /v1/budgets: every budget in force, with what it has consumed, what
// remains and each charge it holds, as `latch budgets --json` lists them (operator.Budgets).
// What remains is for operators: a refused caller is never told it.
func (s *Server) listBudgets(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	out, err := s.op.Budgets(r.Context())
	if err != nil {
		writeProblem(w, problemOf(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"budgets": out})
}
