package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// jstamp is a latch timestamp (RFC 3339, UTC, milliseconds, Z) for JSON: null for the zero time.
func jstamp(t time.Time) *string { return jsonview.Stamp(t) }

// jstr is a JSON string, null when empty.
func jstr(s string) *string { return jsonview.Str(s) }

// approvalJSON is an approval request as `latch approvals --json` prints it: one shape for the
// CLI and the API (package jsonview).
type approvalJSON = jsonview.Approval

// effectJSON is an effect record as `latch effects --json` prints it.
type effectJSON = jsonview.Effect

// newApprovalJSON is a as the API shows it, with the display hints of the server's policy.
func (s *Server) newApprovalJSON(a *store.Approval) approvalJSON {
	return jsonview.NewApproval(a, s.g.Policy())
}

func (s *Server) newEffectJSON(e *store.Effect) effectJSON { return jsonview.NewEffect(e, s.cfg.Now()) }

var approvalStatuses = map[string]bool{"": true, "pending": true, "granted": true, "denied": true, "expired": true, "consumed": true}

// listApprovals is GET /v1/approvals[?status=].
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	status := r.URL.Query().Get("status")
	if !approvalStatuses[status] {
		writeProblem(w, badQuery("status", fmt.Sprintf("status %q is not one of pending, granted, denied, expired, consumed", status)))
		return
	}
	list, err := s.g.Store().Approvals(r.Context(), store.ApprovalFilter{Status: store.ApprovalStatus(status)})
	if err != nil {
		writeProblem(w, problemOf(err))
		return
	}
	out := make([]approvalJSON, len(list))
	for i, a := range list {
		out[i] = s.newApprovalJSON(a)
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
	writeJSON(w, http.StatusOK, s.newApprovalJSON(a))
}

// answerRequest is the (optional) body of POST /v1/approvals/{id}/approve and /deny.
type answerRequest struct {
	Note string `json:"note"`
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
		a, err := s.g.Answer(r.Context(), &store.AnswerRequest{ID: id, Grant: grant, Approver: c.approver,
			Method: c.method, Verified: true, Note: req.Note})
		var ae *store.AnswerError
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeProblem(w, problem(http.StatusNotFound, "approval_not_found", "no approval request "+id))
		case errors.As(err, &ae):
			p := problem(jsonview.AnswerStatus(ae.Reason), ae.Reason, trimLatch(err))
			p.ApprovalID = id
			writeProblem(w, p)
		case err != nil:
			writeProblem(w, problemOf(err))
		default:
			writeJSON(w, http.StatusOK, s.newApprovalJSON(a))
		}
	}
}

var effectStates = map[string]bool{"": true, "executing": true, "committed": true, "failed": true, "ambiguous": true}

// listEffects is GET /v1/effects[?state=].
func (s *Server) listEffects(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	state := r.URL.Query().Get("state")
	if !effectStates[state] {
		writeProblem(w, badQuery("state", fmt.Sprintf("state %q is not one of executing, committed, failed, ambiguous", state)))
		return
	}
	list, err := s.g.Store().Effects(r.Context(), store.EffectFilter{State: store.State(state)})
	if err != nil {
		writeProblem(w, problemOf(err))
		return
	}
	out := make([]effectJSON, len(list))
	for i, e := range list {
		out[i] = s.newEffectJSON(e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"effects": out})
}

// getEffect is GET /v1/effects/{key}.
func (s *Server) getEffect(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	e, err := s.g.Store().Effect(r.Context(), r.PathValue("key"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, problem(http.StatusNotFound, "effect_not_found", "no effect record "+r.PathValue("key")))
	case err != nil:
		writeProblem(w, problemOf(err))
	default:
		writeJSON(w, http.StatusOK, s.newEffectJSON(e))
	}
}

// resolveRequest is the body of POST /v1/effects/{key}/resolve.
type resolveRequest struct {
	To     string          `json:"to"`
	Result json.RawMessage `json:"result"` // with committed: handed to later duplicates
	Note   string          `json:"note"`   // why, kept on the record and in its event
}

// resolve is POST /v1/effects/{key}/resolve: settle an ambiguous effect, as the person the
// credential names (recorded resolved_by "http:NAME"). Who may resolve what is
// Guard.ResolveEffect's to decide, for every surface.
func (s *Server) resolve(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	var req resolveRequest
	if p := decode(w, r, s.cfg.MaxBody, &req, false); p != nil {
		writeProblem(w, p)
		return
	}
	if req.To != string(store.Committed) && req.To != string(store.Failed) {
		if req.To == "" {
			writeProblem(w, missing("to"))
			return
		}
		p := problem(http.StatusBadRequest, "invalid_field", fmt.Sprintf("to %q is not committed or failed", req.To))
		p.Field = "to"
		writeProblem(w, p)
		return
	}
	var result json.RawMessage
	if len(req.Result) > 0 && string(req.Result) != "null" {
		if req.To != string(store.Committed) {
			p := problem(http.StatusBadRequest, "invalid_field", "a result goes with to committed: a failed effect has no result")
			p.Field = "result"
			writeProblem(w, p)
			return
		}
		var p *Problem
		if result, p = checkResult(req.Result); p != nil {
			writeProblem(w, p)
			return
		}
	}
	if err := store.CheckNote(req.Note); err != nil {
		p := problem(http.StatusBadRequest, "invalid_field", err.Error())
		p.Field = "note"
		writeProblem(w, p)
		return
	}
	key := r.PathValue("key")
	e, err := s.g.ResolveEffect(r.Context(), &store.ResolveRequest{Key: key, To: store.State(req.To), By: "http:" + c.approver,
		Result: result, Note: req.Note})
	var re *store.ResolveError
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, problem(http.StatusNotFound, "effect_not_found", "no effect record "+key))
	case errors.Is(err, store.ErrNotAmbiguous):
		p := problem(http.StatusConflict, "not_ambiguous", trimLatch(err))
		p.EffectKey = key
		writeProblem(w, p)
	case errors.As(err, &re):
		status := http.StatusForbidden // self_resolution, approver_not_entitled: this person may not
		if re.Reason == store.ReasonHolderUnknown {
			status = http.StatusConflict
		}
		p := problem(status, re.Reason, trimLatch(err))
		p.EffectKey = key
		writeProblem(w, p)
	case err != nil:
		writeProblem(w, problemOf(err))
	default:
		writeJSON(w, http.StatusOK, s.newEffectJSON(e))
	}
}

// listReceipts is GET /v1/receipts?after=SEQ&limit=N: receipts in seq order, as stored, each
// with its hash; next_after pages on.
func (s *Server) listReceipts(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	q := r.URL.Query()
	after, limit := int64(0), 100
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeProblem(w, badQuery("after", "after must be a receipt seq (a non-negative integer)"))
			return
		}
		after = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeProblem(w, badQuery("limit", "limit must be 1 to 1000"))
			return
		}
		limit = n
	}
	type line struct {
		Seq     int64           `json:"seq"`
		Hash    string          `json:"hash"`
		Receipt json.RawMessage `json:"receipt"`
	}
	out := []line{}
	next := after
	for rc, err := range s.g.Store().Receipts(r.Context(), store.ReceiptFilter{AfterSeq: after}) {
		if err != nil {
			writeProblem(w, problemOf(err))
			return
		}
		doc := json.RawMessage(rc.Doc)
		if !json.Valid(doc) {
			doc, _ = json.Marshal(map[string]string{"unreadable": "the stored document is not JSON"})
		}
		out = append(out, line{Seq: rc.Seq, Hash: rc.Hash, Receipt: doc})
		next = rc.Seq
		if len(out) == limit {
			break
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"receipts": out, "next_after": next})
}

// verifyReceipts is GET /v1/receipts/verify: the chain checked against its head, each break
// named with its seq.
func (s *Server) verifyReceipts(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.approverOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	// The head and the receipts are read in one snapshot, so writers cannot fake a break.
	rep, err := store.VerifyChain(r.Context(), s.g.Store())
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
	now := s.cfg.Now()
	var from time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		d, err := parseWindow(v)
		if err != nil {
			writeProblem(w, badQuery("since", err.Error()))
			return
		}
		from = now.Add(-d)
	}
	tally, err := receipt.Tally(s.g.Store().Receipts(r.Context(), store.ReceiptFilter{Since: from}))
	if err != nil {
		writeProblem(w, problemOf(err))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Since *string `json:"since"`
		Until *string `json:"until"`
		receipt.Stats
	}{jstamp(from), jstamp(now), tally})
}

// parseWindow reads a window: a Go duration (90m, 36h) or a number of days (7d).
func parseWindow(v string) (time.Duration, error) {
	if d, ok := policy.ParseDays(v); ok && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("since %q: want a positive duration such as 90m, 24h or 7d", v)
}
