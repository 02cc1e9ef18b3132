package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// jstamp is a latch timestamp (RFC 3339, UTC, milliseconds, Z) for JSON: null for the zero time.
func jstamp(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(receipt.TimeFormat)
	return &s
}

// jstr is a JSON string, null when empty.
func jstr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// approvalJSON is an approval request as `latch approvals --json` prints it.
type approvalJSON struct {
	ApprovalID string          `json:"approval_id"`
	Status     string          `json:"status"`
	Action     string          `json:"action"`
	ActionHash string          `json:"action_hash"`
	Arguments  json.RawMessage `json:"arguments"`
	Principal  principalJSON   `json:"principal"`
	Resource   *string         `json:"resource"`
	CreatedAt  *string         `json:"created_at"`
	ExpiresAt  *string         `json:"expires_at"`
	Approver   *string         `json:"approver"`
	// PreviousDenied is the request for the same action denied before this one was asked,
	// and PreviousDeniedBy who denied it (null when it was not asked again after a denial).
	PreviousDenied   *string `json:"previous_denied"`
	PreviousDeniedBy *string `json:"previous_denied_by"`
	// Display reads the arguments the policy gives display hints for as a person should read
	// them (a label, money in major units); presentation only, never part of the hash.
	Display []displayJSON `json:"display,omitempty"`
	// Answers are the answers given so far, oldest first; Required is how many distinct
	// grants the request needs and Grants how many it has (docs/approvals.md).
	Answers  []answerJSON `json:"answers"`
	Required int          `json:"required"`
	Grants   int          `json:"grants"`
}

// answerJSON is one person's answer to an approval request.
type answerJSON struct {
	Approver   string  `json:"approver"`
	Method     string  `json:"method"` // cli, token, jwt, session or proxy
	Verified   bool    `json:"verified"`
	Grant      bool    `json:"grant"`
	Note       *string `json:"note"`
	AnsweredAt *string `json:"answered_at"`
}

// displayJSON is one argument read through the policy's display hints.
type displayJSON struct {
	Name  string  `json:"name"`
	Label *string `json:"label"`
	Raw   string  `json:"raw"`   // the value as canonical JSON, exactly as hashed
	Human *string `json:"human"` // "€2,500.00 (250000 minor units)", null when no hint reads it
}

// newApprovalJSON is a as the API shows it, with the display hints of the server's policy.
func (s *Server) newApprovalJSON(a *store.Approval) approvalJSON {
	aj := approvalOf(a)
	rule := s.g.Policy().ApproversFor(a.ActionName)
	aj.Required = max(a.Required, rule.Required)
	aj.Grants = store.Grants(a.Answers, rule.Verified)
	aj.Answers = make([]answerJSON, len(a.Answers))
	for i, x := range a.Answers {
		aj.Answers[i] = answerJSON{Approver: x.Name, Method: x.Method, Verified: x.Verified, Grant: x.Grant,
			Note: jstr(x.Note), AnsweredAt: jstamp(x.At)}
	}
	if v, err := canon.Parse(aj.Arguments); err == nil {
		if args, ok := v.(map[string]any); ok {
			for _, av := range s.g.Policy().View(aj.Action, args) {
				if av.Label != "" || av.Human != "" {
					aj.Display = append(aj.Display, displayJSON{Name: av.Name, Label: jstr(av.Label), Raw: av.Raw, Human: jstr(av.Human)})
				}
			}
		}
	}
	return aj
}

// approvalOf is a as the API shows it, before the policy's reading of its arguments.
func approvalOf(a *store.Approval) approvalJSON {
	var d struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Resource  *string         `json:"resource"`
		Principal principalJSON   `json:"principal"`
	}
	if len(a.Action) == 0 || json.Unmarshal(a.Action, &d) != nil {
		d.Name, d.Principal = a.ActionName, principalJSON{Agent: jstr(a.Agent), User: jstr(a.User)}
	}
	if len(d.Arguments) == 0 {
		d.Arguments = json.RawMessage("null")
	}
	if d.Name == "" {
		d.Name = a.ActionName
	}
	return approvalJSON{
		ApprovalID: a.ID, Status: string(a.Status), Action: d.Name, ActionHash: a.ActionHash,
		Arguments: d.Arguments, Principal: d.Principal, Resource: d.Resource,
		CreatedAt: jstamp(a.CreatedAt), ExpiresAt: jstamp(a.ExpiresAt), Approver: jstr(a.Approver),
		PreviousDenied: jstr(a.PreviousDenied), PreviousDeniedBy: jstr(a.PreviousDeniedBy),
	}
}

// effectJSON is an effect record as `latch effects --json` prints it.
type effectJSON struct {
	EffectKey      string          `json:"effect_key"`
	State          string          `json:"state"`
	Attempt        int             `json:"attempt"`
	Action         string          `json:"action"`
	ActionID       string          `json:"action_id"`
	ActionHash     string          `json:"action_hash"`
	LeaseExpiresAt *string         `json:"lease_expires_at"`
	LeaseExpired   bool            `json:"lease_expired"` // executing, and the lease has passed
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *string         `json:"error"`
	Conflict       *string         `json:"conflict"`
	ResolvedBy     *string         `json:"resolved_by"`
	Note           *string         `json:"note"`
	CreatedAt      *string         `json:"created_at"`
	UpdatedAt      *string         `json:"updated_at"`
}

func (s *Server) newEffectJSON(e *store.Effect) effectJSON {
	return effectJSON{
		EffectKey: e.Key, State: string(e.State), Attempt: e.Attempt, Action: e.Action,
		ActionID: e.ActionID, ActionHash: e.ActionHash, LeaseExpiresAt: jstamp(e.LeaseExpiresAt),
		LeaseExpired: e.State == store.Executing && !e.LeaseExpiresAt.IsZero() && !s.cfg.Now().Before(e.LeaseExpiresAt),
		Result:       e.Result, Error: jstr(e.Error), Conflict: jstr(e.Conflict), ResolvedBy: jstr(e.ResolvedBy), Note: jstr(e.Note),
		CreatedAt: jstamp(e.CreatedAt), UpdatedAt: jstamp(e.UpdatedAt),
	}
}

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
	case c.kind == store.TokenAgent && !c.verified && (a.Agent != c.principal.Agent || a.User != c.principal.User):
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

// answer is POST /v1/approvals/{id}/approve and /deny, as the approver the credential names: a
// verified answer (method token for an approver token, jwt for a JWT the identity provider
// verified, as the person its agent claim names), counted under the action's approvers
// (docs/approvals.md).
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
			status := http.StatusConflict
			switch ae.Reason {
			case store.ReasonSelfApproval, store.ReasonNotEntitled, store.ReasonNotVerified:
				status = http.StatusForbidden
			case "invalid_note", "invalid_approver":
				status = http.StatusBadRequest
			}
			p := problem(status, ae.Reason, trimLatch(err))
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

// resolve is POST /v1/effects/{key}/resolve: settle an ambiguous effect, as the approver the
// token names (recorded resolved_by "http:NAME").
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
		_, canonical, err := canon.ParseCanonical(req.Result)
		if err != nil {
			p := problem(http.StatusBadRequest, "invalid_field", "result: "+trimLatch(err))
			p.Field = "result"
			writeProblem(w, p)
			return
		}
		result = canonical
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
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, problem(http.StatusNotFound, "effect_not_found", "no effect record "+key))
	case errors.Is(err, store.ErrNotAmbiguous):
		p := problem(http.StatusConflict, "not_ambiguous", trimLatch(err))
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
	if n, ok := strings.CutSuffix(v, "d"); ok {
		if days, err := strconv.Atoi(n); err == nil && days > 0 && days <= 36500 {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("since %q: want a positive duration such as 90m, 24h or 7d", v)
}
