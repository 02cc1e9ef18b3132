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

// ApprovalResult is what CreateApproval did: it stored a request (Approval) or the probe was
// refused (Refused).
type ApprovalResult struct {
	Approval *Approval // the request as stored; nil when the probe was refused
	// Refused is the probe's refusal, as Reserve would have returned it, its receipt written.
	Refused *ReserveResult
	Events  []Event // the events written, with their store-assigned ids (for sinks)
}

// ApprovalPlan is everything one CreateApproval writes.
type ApprovalPlan struct {
	Result  ApprovalResult
	Effect  *EffectWrite // a lapsed lease the probe met, written ambiguous
	Insert  *Approval    // the request to insert; nil when the probe was refused
	Events  []Event
	Receipt *receipt.Receipt // the probe's blocked receipt; nil when none
}

// PlanApproval decides an approval request from the rows the backend read under its write lock:
// the effect record under the probe's key (nil when none, or no probe).
func PlanApproval(req *ApprovalRequest, eff *Effect) *ApprovalPlan {
	p := &ApprovalPlan{}
	if req.Probe != nil && req.Probe.EffectKey != "" {
		probe := *req.Probe
		probe.ApprovalID = ""
		probe.Events = req.Events
		if rp := PlanReserve(&probe, eff, nil); rp.Result.Refusal != nil {
			p.Effect, p.Events, p.Receipt = rp.Effect, rp.Events, rp.Receipt
			p.Result.Refused = &rp.Result
			return p
		}
	}
	a := *req.Approval
	a.Status = Pending
	p.Insert = &a
	p.Result.Approval = &a
	p.Events = make([]Event, 0, len(req.Events)+1)
	for _, e := range req.Events {
		e.ApprovalID = a.ID
		p.Events = append(p.Events, e)
	}
	actionID, key := "", ""
	if req.Probe != nil {
		actionID, key = req.Probe.ActionID, req.Probe.EffectKey
	}
	p.Events = append(p.Events, NewEvent(EventApprovalRequested, req.Now, actionID, key, a.ID,
		map[string]any{"action_hash": a.ActionHash, "expires_at": a.ExpiresAt.UTC().Format(time.RFC3339Nano)}))
	return p
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
