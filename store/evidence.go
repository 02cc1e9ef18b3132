package store

import (
	"encoding/json"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
)

// Every state change is chained (docs/guarantees.md#record-kinds): the transaction that changes
// an effect, an approval or a delegation appends a record saying what it left, so that the
// tables can be checked against the chain (CheckState). A call's receipt carries the effect its
// outcome left and the approval it spent; the builders below make the records of the changes no
// call makes. Each is appended in the transaction of the change, by every backend.

// ResultHash is the hash a record keeps of an effect's stored result: canon.Sum of its bytes as
// stored, "" when there is none.
func ResultHash(result json.RawMessage) string {
	if len(result) == 0 {
		return ""
	}
	return canon.Sum(result)
}

// EffectStateOf is e as a chained record asserts it.
func EffectStateOf(e *Effect) *receipt.EffectState {
	return &receipt.EffectState{State: string(e.State), Attempt: e.Attempt, Holder: e.ActionID,
		ResultHash: ResultHash(e.Result), Conflict: e.Conflict != "", ResolvedBy: safetext.Valid(e.ResolvedBy)}
}

// ApprovalStateOf is a as a chained record asserts it.
func ApprovalStateOf(a *Approval) *receipt.ApprovalState {
	return &receipt.ApprovalState{Status: string(a.Status), Approver: safetext.Valid(a.Approver)}
}

// DelegationStateOf is d as a chained record asserts it.
func DelegationStateOf(d *Delegation) *receipt.DelegationState {
	return &receipt.DelegationState{ID: d.ID, Parent: d.Parent, GrantHash: canon.Sum(d.Grant), CreatedBy: d.CreatedBy,
		RevokedBy: d.RevokedBy}
}

func changeRecord(kind, result string, now time.Time) *receipt.Receipt {
	return &receipt.Receipt{ReceiptID: receipt.NewID(), Kind: kind, Result: result, FinishedAt: now}
}

// LeaseLapsedRecord is the record of an executing effect written ambiguous because its lease
// lapsed, when no call's receipt carries it.
func LeaseLapsedRecord(next *Effect, now time.Time) *receipt.Receipt {
	rc := changeRecord(receipt.KindLeaseLapsed, string(next.State), now)
	rc.Action, rc.EffectKey, rc.Attempt, rc.Error = next.Action, next.Key, next.Attempt, next.Error
	rc.Effect = EffectStateOf(next)
	return rc
}

// ResolutionRecord is the record of a resolution (PlanResolve's write w): who resolved the
// effect, to what, with which note and result, and whether a reconcile hook did.
func ResolutionRecord(req *ResolveRequest, w *EffectWrite) *receipt.Receipt {
	n := &w.Next
	rc := changeRecord(receipt.KindResolution, string(n.State), req.Now)
	rc.Action, rc.EffectKey, rc.Attempt = n.Action, n.Key, n.Attempt
	rc.By, rc.Note = safetext.Valid(n.ResolvedBy), n.Note
	if w.Prev != nil && w.Prev.Conflict != "" {
		rc.Error = safetext.Valid("resolved again after an outcome conflict: " + w.Prev.Conflict)
	}
	rc.Effect = EffectStateOf(n)
	return rc
}

// AnswerRecord is the record of an approval answer (PlanAnswer's write w): granted or denied,
// by whom, with the note; or, for a request answered after it expired, written expired.
func AnswerRecord(req *AnswerRequest, w *ApprovalWrite) *receipt.Receipt {
	n := &w.Next
	kind := receipt.KindApprovalAnswer
	atExpiry := n.Status == Expired || n.DeniedAtExpiry()
	if atExpiry {
		kind = receipt.KindApprovalExpired
	}
	rc := changeRecord(kind, string(n.Status), req.Now)
	rc.Action, rc.ApprovalID = safetext.Valid(n.ActionName), n.ID
	if !atExpiry {
		rc.Approver, rc.Note = safetext.Valid(n.Approver), n.Note
	}
	rc.Approval = ApprovalStateOf(n)
	return rc
}

// DelegationRecord is the record of a delegation created.
func DelegationRecord(d *Delegation) *receipt.Receipt {
	rc := changeRecord(receipt.KindDelegation, receipt.Delegated, d.CreatedAt)
	rc.By = safetext.Valid(d.CreatedBy)
	rc.Note = safetext.Valid(d.Reason) // a break-glass grant's reason; "" writes none
	rc.Delegation = DelegationStateOf(d)
	return rc
}

// RevocationRecord is the record of a delegation revoked (d as revoked).
func RevocationRecord(d *Delegation, now time.Time) *receipt.Receipt {
	rc := changeRecord(receipt.KindRevocation, receipt.Revoked, now)
	rc.By = safetext.Valid(d.RevokedBy)
	rc.Delegation = DelegationStateOf(d)
	return rc
}

// ExpiryRecord is the record of an approval request written expired — or denied, when its
// action's approvers.on_expiry is deny — because its expiry passed (a sweeper's write; an
// answer that finds it expired is AnswerRecord's). Its result is the status written.
func ExpiryRecord(next *Approval, now time.Time) *receipt.Receipt {
	rc := changeRecord(receipt.KindApprovalExpired, string(next.Status), now)
	rc.Action, rc.ApprovalID = safetext.Valid(next.ActionName), next.ID
	rc.Approval = ApprovalStateOf(next)
	return rc
}
