package store

import (
	"time"
)

// ExpiryApprover is the approver a request denied at its expiry is recorded as
// (docs/approvals.md#reminders-and-escalation): no person answered it, the action's
// approvers.on_expiry did. NormalizeApprover refuses the name to people, so it cannot be
// spelled by an answer.
const ExpiryApprover = "latch:expiry"

// EventApprovalDeniedAtExpiry is the event of a pending request written denied because it
// expired unanswered under an action whose approvers.on_expiry is deny. Its payload holds
// "reason": "expired", "status" (pending), "on_expiry": "deny", "action", "expires_at",
// "grants" (how many grants it had) and "by": who found it expired (sweeper, answer, reservation).
const EventApprovalDeniedAtExpiry = "approval_denied_at_expiry"

// Who found a request expired, as the payload of its event names it.
const (
	ExpiredBySweeper     = "sweeper"
	ExpiredByAnswer      = "answer"
	ExpiredByReservation = "reservation"
)

// DeniedAtExpiry reports whether a was written denied by its expiry rather than by a person.
func (a *Approval) DeniedAtExpiry() bool {
	return a != nil && a.Status == Denied && a.Approver == ExpiryApprover
}

// PlanExpiry is the one rule every path that finds request a expired at now writes it by:
// the sweeper (PlanExpire), a late answer (PlanAnswer) and a reservation presenting it
// (PlanReserve). A pending request whose action denies at expiry (deny) is written denied, by
// ExpiryApprover, at now, with an EventApprovalDeniedAtExpiry; anything else — a pending
// request of an action that keeps the default, or a granted request nobody spent — is written
// expired with an EventApprovalInvalidated, as before on_expiry existed. A granted request
// is never written denied: a person granted it. by is who found it (ExpiredBySweeper, …).
func PlanExpiry(a *Approval, now time.Time, deny bool, by string) (*ApprovalWrite, Event) {
	next := *a
	if deny && a.Status == Pending {
		next.Status, next.Approver, next.AnsweredAt, next.Note = Denied, ExpiryApprover, now, ""
		payload := map[string]any{"reason": "expired", "status": string(a.Status), "on_expiry": "deny",
			"action": a.ActionName, "expires_at": a.ExpiresAt.UTC().Format(time.RFC3339Nano), "by": by}
		payload["grants"] = int64(Grants(a.Answers, false))
		return &ApprovalWrite{PrevStatus: a.Status, Next: next}, NewEvent(EventApprovalDeniedAtExpiry, now, "", "", a.ID, payload)
	}
	next.Status = Expired
	payload := map[string]any{"reason": "expired", "status": string(a.Status)}
	if by == ExpiredBySweeper {
		payload["by"] = by
	}
	return &ApprovalWrite{PrevStatus: a.Status, Next: next}, NewEvent(EventApprovalInvalidated, now, "", "", a.ID, payload)
}
