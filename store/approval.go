package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch/receipt"
)

// ApprovalRequest asks a store to put one call before a human: a pending approval request bound
// to the call's action hash (docs/guarantees.md#approvals).
type ApprovalRequest struct {
	Now time.Time
	// Approval is the new request: pending, under a fresh id.
	Approval *Approval
	// Events are the call's own events (action_proposed, policy_evaluated…), written with the
	// request or with the probe's refusal. The store adds approval_requested.
	Events []Event
	// Probe, when it names an effect key, is the reservation the request is for, with no
	// approval. It is decided by Reserve's rules in the same transaction, and it never reserves:
	// when Reserve would refuse it, the refusal is written exactly as Reserve writes it (its
	// blocked receipt; a lapsed lease made ambiguous) and no request is stored, so nobody is
	// asked to approve a call that cannot run or already ran. When Reserve would reserve, nothing
	// of the probe is written. Its Events are ignored (Events are the call's).
	Probe *ReserveRequest
}

// ApprovalResult is what CreateApproval did: it stored a request, handed back a pending one
// (Reused), or the probe was refused (Refused).
type ApprovalResult struct {
	// Approval is the request as stored, or the pending request for the same action that was
	// handed back instead; nil when the probe was refused.
	Approval *Approval
	// Reused is set when Approval is an earlier pending request for the same action hash and
	// principal: asking again does not pile up requests.
	Reused bool
	// Granted is set when Approval is the last answered request for the same action hash and
	// principal, granted, unspent and unexpired, bound to the same state of the target: the
	// grant landed after the caller looked for one. Nothing is written; the call presents it.
	Granted bool
	// Refused is the probe's refusal, as Reserve would have returned it, its receipt written.
	Refused *ReserveResult
	Events  []Event // the events written, with their store-assigned ids (for sinks)
}

// ApprovalPlan is everything one CreateApproval writes.
type ApprovalPlan struct {
	Result  ApprovalResult
	Effect  *EffectWrite // a lapsed lease the probe met, written ambiguous
	Insert  *Approval    // the request to insert; nil when reused or refused
	Events  []Event
	Receipt *receipt.Receipt // the probe's blocked receipt; nil when none
}

// ApprovalHistory is what a backend reads, under its write lock, about the requests of one
// action hash (ApprovalRequest.Approval.ActionHash): the requests still pending (any order),
// and the most recently created request that was answered (granted, denied or consumed; nil
// when none was).
type ApprovalHistory struct {
	Pending  []*Approval
	Answered *Approval
}

// PlanApproval decides an approval request from the rows the backend read under its write lock:
// the effect record under the probe's key (nil when none, or no probe), the amounts the
// probe's budget charges hold (held, as PlanReserve takes it) and the history of the request's
// action hash (docs/guarantees.md#approvals):
//
//   - a probe Reserve would refuse is written as Reserve writes it, and nothing is asked: a
//     budget already exhausted too (budget_exhausted), with nothing charged;
//   - the last answered request for the same action hash and principal, when it is granted,
//     unspent, unexpired and bound to the same state of the target, is handed back (Granted),
//     and nothing is written: a grant that landed while the call was being decided is used,
//     not answered with a new request nobody needs;
//   - a request still pending (and not yet expired) for the same action hash and principal is
//     handed back, with its id and expiry, instead of a new one (approval_reused);
//   - else the new request is stored (approval_requested); when the last answer to the same
//     action was a denial, it records that request and who denied it.
func PlanApproval(req *ApprovalRequest, eff *Effect, h ApprovalHistory, held []int64) *ApprovalPlan {
	p := &ApprovalPlan{}
	if req.Probe != nil && req.Probe.EffectKey != "" {
		probe := *req.Probe
		probe.ApprovalID = ""
		probe.Events = req.Events
		if rp := PlanReserve(&probe, eff, nil, held); rp.Result.Refusal != nil {
			p.Effect, p.Events, p.Receipt = rp.Effect, rp.Events, rp.Receipt
			p.Result.Refused = &rp.Result
			return p
		}
	}
	if d := h.Answered; d != nil && d.Status == Granted && sameAsker(d, req) &&
		d.PreconditionHash == req.Approval.PreconditionHash && d.PreconditionAt.IsZero() == req.Approval.PreconditionAt.IsZero() {
		p.Result.Approval, p.Result.Granted = d, true
		return p
	}
	actionID, key := "", ""
	if req.Probe != nil {
		actionID, key = req.Probe.ActionID, req.Probe.EffectKey
	}
	kind := EventApprovalRequested
	var a *Approval
	for _, pa := range h.Pending {
		if reusable(pa, req) && (a == nil || pa.CreatedAt.After(a.CreatedAt)) {
			a = pa
		}
	}
	payload := map[string]any{}
	if a != nil {
		kind = EventApprovalReused
		p.Result.Reused = true
	} else {
		next := *req.Approval
		next.Status = Pending
		if d := h.Answered; d != nil && d.Status == Denied {
			next.PreviousDenied, next.PreviousDeniedBy = d.ID, d.Approver
			payload["previous_denied"], payload["previous_denied_by"] = d.ID, d.Approver
		}
		a = &next
		p.Insert = a
	}
	p.Result.Approval = a
	p.Events = make([]Event, 0, len(req.Events)+1)
	for _, e := range req.Events {
		e.ApprovalID = a.ID
		p.Events = append(p.Events, e)
	}
	payload["action_hash"] = a.ActionHash
	payload["expires_at"] = a.ExpiresAt.UTC().Format(time.RFC3339Nano)
	if !a.PreconditionAt.IsZero() {
		// The fingerprint of the target's state the request is bound to, never the state.
		h := a.PreconditionHash
		if h == "" {
			h = "none"
		}
		payload["precondition"], payload["precondition_at"] = h, a.PreconditionAt.UTC().Format(time.RFC3339Nano)
	}
	p.Events = append(p.Events, NewEvent(kind, req.Now, actionID, key, a.ID, payload))
	return p
}

// reusable reports whether the pending request pa may be handed to req instead of a new one:
// the same action hash and principal, and not expired at req.Now.
func reusable(pa *Approval, req *ApprovalRequest) bool {
	return pa.Status == Pending && sameAsker(pa, req)
}

// sameAsker reports whether a is bound to the action hash and principal req asks about, and not
// expired at req.Now.
func sameAsker(a *Approval, req *ApprovalRequest) bool {
	n := req.Approval
	return a.ActionHash == n.ActionHash && a.Agent == n.Agent && a.User == n.User && req.Now.Before(a.ExpiresAt)
}

// Check refuses an approval request whose ids or names cannot be kept (ErrInvalidInput).
func (r *ApprovalRequest) Check() error {
	switch {
	case r == nil || r.Approval == nil || r.Approval.ID == "":
		return errors.New("no approval request, or one without an id")
	case r.Approval.Status != "" && r.Approval.Status != Pending:
		return fmt.Errorf("approval %s: status is %s, a new request is pending", r.Approval.ID, r.Approval.Status)
	case r.Probe != nil && r.Probe.ApprovalID != "":
		return fmt.Errorf("approval %s: the probe presents approval %s; it is the reservation without one", r.Approval.ID, r.Probe.ApprovalID)
	}
	if err := CheckNewApproval(r.Approval, r.Events); err != nil {
		return err
	}
	return r.Probe.Check()
}
