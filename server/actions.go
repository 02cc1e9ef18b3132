package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// actionRequest is the body of POST /v1/actions.
type actionRequest struct {
	Action      string          `json:"action"`
	Arguments   json.RawMessage `json:"arguments"`
	Resource    string          `json:"resource"`
	ApprovalID  string          `json:"approval_id"`
	WaitSeconds int             `json:"wait_seconds"`
	Task        string          `json:"task"` // the call's task (latch.Options.Task); "" for none
	Hop         string          `json:"hop"`  // the hop the call acts under (latch.Options.Hop); "" for none
}

// actionJSON is a begun action: the answer of POST /v1/actions and GET /v1/actions/{id}.
type actionJSON struct {
	Status           string             `json:"status"` // reserved, allowed or recorded
	ActionID         string             `json:"action_id"`
	Action           string             `json:"action"`
	ActionHash       string             `json:"action_hash"`
	Arguments        json.RawMessage    `json:"arguments"`
	Resource         *string            `json:"resource"`
	Principal        principalJSON      `json:"principal"`
	EffectKey        *string            `json:"effect_key"`
	Attempt          *int               `json:"attempt"`
	IdempotencyToken *string            `json:"idempotency_token"`
	EffectToken      *string            `json:"effect_token"`
	LeaseExpiresAt   *string            `json:"lease_expires_at"`
	ApprovalID       *string            `json:"approval_id"`
	Decision         string             `json:"decision"`
	Reason           string             `json:"reason"`
	WouldHave        *receipt.WouldHave `json:"would_have,omitempty"`
	Receipt          json.RawMessage    `json:"receipt,omitempty"` // once recorded
	ReceiptHash      string             `json:"receipt_hash,omitempty"`
}

type principalJSON = jsonview.Principal

func newActionJSON(p *latch.Pending) *actionJSON {
	a := &actionJSON{
		Status: "allowed", ActionID: p.ActionID, Action: p.Action, ActionHash: p.ActionHash, Arguments: p.Arguments,
		Resource: jstr(p.Resource), Principal: principalJSON{Agent: jstr(p.Principal.Agent), User: jstr(p.Principal.User)},
		ApprovalID: jstr(p.ApprovalID), Decision: string(p.Decision), Reason: p.Reason, WouldHave: p.WouldHave,
	}
	if p.EffectKey != "" {
		a.Status = "reserved"
		a.EffectKey, a.Attempt, a.IdempotencyToken = jstr(p.EffectKey), &p.Attempt, jstr(p.IdempotencyToken)
		a.EffectToken = jstr(p.EffectToken)
		a.LeaseExpiresAt = jstamp(p.LeaseExpiresAt)
	}
	return a
}

// approvalRequired is the 202 answer: a human must answer first.
type approvalRequired struct {
	Status     string        `json:"status"` // approval_required
	ApprovalID string        `json:"approval_id"`
	ActionHash string        `json:"action_hash"`
	EffectKey  *string       `json:"effect_key"` // null for an unkeyed action
	ExpiresAt  *string       `json:"expires_at"`
	Approval   *approvalJSON `json:"approval"` // what the human sees
}

// IdempotencyKeyHeader is the header of POST /v1/actions carrying the caller's request key
// (latch.WithRequestKey): the same key on a retried begin hands back the same reservation.
const IdempotencyKeyHeader = "Idempotency-Key"

// postAction is POST /v1/actions: normalize, decide, approve, reserve.
func (s *Server) postAction(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.agentOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	s.limited(w, r, c, func() { s.begin(w, r, c) })
}

// begin answers POST /v1/actions once its body is counted in flight.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, c *caller) {
	key, kp := idempotencyKey(r)
	if kp != nil {
		writeProblem(w, kp)
		return
	}
	var req actionRequest
	if p := decode(w, r, s.cfg.MaxBody, &req, false); p != nil {
		writeProblem(w, p)
		return
	}
	_, status, answer := s.beginCall(r, c, &req, key)
	writeAnswer(w, status, answer)
}

// writeAnswer writes answer with status: a problem as a problem document, anything else as JSON.
func writeAnswer(w http.ResponseWriter, status int, answer any) {
	if p, ok := answer.(*Problem); ok {
		writeProblem(w, p)
		return
	}
	writeJSON(w, status, answer)
}

// beginCall begins the call req asks for, under the request key key ("" for none), as
// POST /v1/actions does, and returns the pending call when it was begun (reserved, or allowed
// without an effect key), with the status and the answer to give: the begun action, the
// approval required (202), or the problem refusing it.
func (s *Server) beginCall(r *http.Request, c *caller, req *actionRequest, key string) (*latch.Pending, int, any) {
	switch {
	case req.Action == "":
		p := missing("action")
		return nil, p.Status, p
	case req.WaitSeconds < 0 || req.WaitSeconds > int(s.cfg.MaxWait/time.Second): // compared in seconds: a large count overflows a Duration
		p := problem(http.StatusBadRequest, "invalid_field", fmt.Sprintf("wait_seconds must be 0 to %d", int(s.cfg.MaxWait/time.Second)))
		p.Field = "wait_seconds"
		return nil, p.Status, p
	}
	ctx := latch.WithPrincipal(c.withCheck(r.Context()), c.principal)
	if key != "" {
		ctx = latch.WithRequestKey(ctx, key)
	}
	call := &latch.Call{Action: req.Action, Arguments: req.Arguments, Resource: req.Resource}
	if req.Task != "" || req.Hop != "" {
		call.Options = &latch.Options{Task: req.Task, Hop: req.Hop}
	}
	if req.ApprovalID != "" {
		ctx = latch.WithApproval(ctx, req.ApprovalID)
	}
	p, err := s.g.Begin(ctx, call)
	var ar *latch.ApprovalRequiredError
	if errors.As(err, &ar) && req.WaitSeconds > 0 {
		p, err = s.wait(ctx, call, ar, time.Duration(req.WaitSeconds)*time.Second)
	}
	switch {
	case errors.As(err, &ar):
		out := &approvalRequired{Status: "approval_required", ApprovalID: ar.ApprovalID, ActionHash: ar.ActionHash, EffectKey: jstr(ar.EffectKey), ExpiresAt: jstamp(ar.ExpiresAt)}
		if a, err := s.g.Store().Approval(r.Context(), ar.ApprovalID); err == nil {
			if aj, err := s.newApprovalJSON(r.Context(), a); err == nil {
				out.Approval = &aj
			}
		}
		return nil, http.StatusAccepted, out
	case err != nil:
		pr := beginProblem(err)
		return nil, pr.Status, pr
	}
	return p, http.StatusOK, newActionJSON(p)
}

// idempotencyKey reads the Idempotency-Key header: "" when absent, or the problem naming what
// is wrong with it.
func idempotencyKey(r *http.Request) (string, *Problem) {
	vs := r.Header.Values(IdempotencyKeyHeader)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		p := problem(http.StatusBadRequest, "invalid_idempotency_key", "the request has more than one Idempotency-Key header")
		p.Field = IdempotencyKeyHeader
		return "", p
	}
	if err := store.CheckRequestKey(vs[0]); err != nil {
		p := problem(http.StatusBadRequest, "invalid_idempotency_key", "Idempotency-Key: "+err.Error())
		p.Field = IdempotencyKeyHeader
		return "", p
	}
	return vs[0], nil
}

// beginProblem is problemOf for a begin, whose request key may name another request: that
// refusal (kind request_key_mismatch) also names the header at fault, and a task no call may
// carry names the field task.
func beginProblem(err error) *Problem {
	p := problemOf(err)
	var ie *store.InputError
	switch {
	case p.Kind == string(latch.KindRequestKey):
		p.Field = IdempotencyKeyHeader
	case errors.As(err, &ie) && ie.Field == "task":
		p.Field = "task"
	}
	return p
}

// wait waits up to d for a human to answer the approval request ar, then begins the call again
// presenting it: a grant is spent by that reservation, and a denial or an expiry is refused by
// it, with its receipt, exactly as a caller presenting the approval later would be. If nobody
// answers in time the request stands and the caller gets it back.
func (s *Server) wait(ctx context.Context, call *latch.Call, ar *latch.ApprovalRequiredError, d time.Duration) (*latch.Pending, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	delay := 50 * time.Millisecond
	for {
		a, err := s.g.Store().Approval(ctx, ar.ApprovalID)
		if err != nil {
			return nil, fmt.Errorf("wait for approval %s: %w", ar.ApprovalID, err)
		}
		if a.Status != store.Pending {
			return s.g.Begin(latch.WithApproval(ctx, ar.ApprovalID), call)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ar
		case <-deadline.C:
			t.Stop()
			return nil, ar
		case <-t.C:
		}
		delay = min(delay*2, time.Second)
	}
}

// outcomeRequest is the body of POST /v1/actions/{id}/outcome.
type outcomeRequest struct {
	Outcome string          `json:"outcome"`
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
}

// recorded is the answer of POST /v1/actions/{id}/outcome.
type recorded struct {
	Status      string          `json:"status"` // recorded
	ActionID    string          `json:"action_id"`
	Result      string          `json:"result"` // the receipt's: committed, failed, ambiguous, observed
	Error       *string         `json:"error"`
	Receipt     json.RawMessage `json:"receipt"`
	ReceiptHash string          `json:"receipt_hash"`
}

var outcomes = map[string]latch.Outcome{
	"committed": latch.OutcomeCommitted, "not_executed": latch.OutcomeNotExecuted, "unknown": latch.OutcomeUnknown,
}

// postOutcome is POST /v1/actions/{id}/outcome: record what the executor says happened.
func (s *Server) postOutcome(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.agentOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	s.limited(w, r, c, func() { s.outcome(w, r, c) })
}

// outcome answers POST /v1/actions/{id}/outcome once its body is counted in flight.
func (s *Server) outcome(w http.ResponseWriter, r *http.Request, c *caller) {
	var req outcomeRequest
	if p := decode(w, r, s.cfg.MaxBody, &req, false); p != nil {
		writeProblem(w, p)
		return
	}
	rec, p := s.record(r.Context(), c, r.PathValue("id"), &req)
	if p != nil {
		writeProblem(w, p)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// record checks the outcome req and records it for the action id begun by c's principal, as
// POST /v1/actions/{id}/outcome does: the answer, or the problem refusing it (a malformed
// outcome, another principal's action, one recorded already), when nothing was recorded.
func (s *Server) record(ctx context.Context, c *caller, id string, req *outcomeRequest) (*recorded, *Problem) {
	o, ok := outcomes[req.Outcome]
	switch {
	case req.Outcome == "":
		return nil, missing("outcome")
	case !ok:
		p := problem(http.StatusBadRequest, "invalid_field", fmt.Sprintf("outcome %q is not one of committed, not_executed, unknown", req.Outcome))
		p.Field = "outcome"
		return nil, p
	case len(req.Result) > 0 && o != latch.OutcomeCommitted && string(req.Result) != "null":
		p := problem(http.StatusBadRequest, "invalid_field", "a result is stored only with the outcome committed")
		p.Field = "result"
		return nil, p
	}
	// The result is stored and handed to later duplicates: it is held to what a resolution's is.
	result, p := checkResult(req.Result)
	if p != nil {
		return nil, p
	}
	rc, err := s.g.Finish(latch.WithPrincipal(c.withCheck(ctx), c.principal), id, o, result, req.Error)
	if rc == nil {
		return nil, problemOf(err)
	}
	return &recorded{Status: "recorded", ActionID: id, Result: rc.Result, Error: jstr(rc.Error), Receipt: rc.Doc, ReceiptHash: rc.Hash}, nil
}

// maxLeaseSeconds is the longest extension: policy.MaxLease.
const maxLeaseSeconds = int(policy.MaxLease / time.Second)

// leaseRequest is the body of POST /v1/actions/{id}/lease.
type leaseRequest struct {
	Seconds int `json:"seconds"`
}

// postLease is POST /v1/actions/{id}/lease: extend the live lease of the holder.
func (s *Server) postLease(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.agentOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	var req leaseRequest
	if p := decode(w, r, s.cfg.MaxBody, &req, false); p != nil {
		writeProblem(w, p)
		return
	}
	if req.Seconds <= 0 || req.Seconds > maxLeaseSeconds {
		p := problem(http.StatusBadRequest, "invalid_field", fmt.Sprintf("seconds must be from 1 to %d (the longest lease, %d days): extend again as the work goes on", maxLeaseSeconds, maxLeaseSeconds/86400))
		p.Field = "seconds"
		writeProblem(w, p)
		return
	}
	id := r.PathValue("id")
	until, err := s.g.Extend(latch.WithPrincipal(r.Context(), c.principal), id, time.Duration(req.Seconds)*time.Second)
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		p := problem(http.StatusConflict, "lease_lost", "the lease is no longer held: it lapsed, or the outcome was recorded")
		p.ActionID = id
		writeProblem(w, p)
	case err != nil:
		writeProblem(w, problemOf(err))
	default:
		writeJSON(w, http.StatusOK, map[string]any{"action_id": id, "lease_expires_at": jstamp(until)})
	}
}

// getAction is GET /v1/actions/{id}: a begun action as it now stands, with its receipt once
// its outcome is recorded.
func (s *Server) getAction(w http.ResponseWriter, r *http.Request, c *caller) {
	if p := c.agentOnly(); p != nil {
		writeProblem(w, p)
		return
	}
	id := r.PathValue("id")
	p, err := s.g.Pending(latch.WithPrincipal(r.Context(), c.principal), id)
	if err != nil {
		writeProblem(w, problemOf(err))
		return
	}
	out := newActionJSON(p)
	for rc, err := range s.g.Store().Receipts(r.Context(), store.ReceiptFilter{ActionID: id}) {
		if err != nil {
			writeProblem(w, problemOf(err))
			return
		}
		out.Status, out.Receipt, out.ReceiptHash = "recorded", rc.Doc, rc.Hash
		out.LeaseExpiresAt = nil
	}
	writeJSON(w, http.StatusOK, out)
}
