package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/latchkit/latch/internal/safetext"
)

// Event kinds of reminders and escalations (docs/approvals.md#reminders-and-escalation).
const (
	// EventApprovalReminded: a request waited unanswered for its action's remind_after, and
	// its approvers were reminded.
	EventApprovalReminded = "approval_reminded"
	// EventApprovalEscalated: a request waited unanswered for its action's escalate_after, and
	// was escalated to the roles and people its payload names.
	EventApprovalEscalated = "approval_escalated"
)

// NudgeKind is what a NudgeRequest records: a reminder or an escalation.
type NudgeKind string

// Nudge kinds.
const (
	NudgeRemind   NudgeKind = "remind"
	NudgeEscalate NudgeKind = "escalate"
)

// NudgeRequest asks a store to record that a pending approval request was reminded about, or
// escalated, by a sweeper: the event of Kind, at most once per request and kind, however many
// sweepers in however many processes ask at once.
type NudgeRequest struct {
	Now  time.Time
	ID   string // the approval request
	Kind NudgeKind
	// After is the action's remind_after or escalate_after: the nudge is due from the request's
	// creation plus After.
	After time.Duration
	// Sweeper names who records it (its event's "sweeper").
	Sweeper string
	// Required is how many grants the action's approvers require, for the progress the event
	// records ("1 of 2"); at least 1.
	Required int
	// Roles and People are who is reminded (the action's approver roles) or who the request is
	// escalated to (escalate_to), as the event records them.
	Roles, People []string
}

// Nudger is implemented by stores that record reminders and escalations; both built-in stores
// do. NudgeApproval is one transaction that reads the request and the nudges already recorded
// for it under a lock every other NudgeApproval of that request takes, and writes the event
// only when none of that kind is there: of any number of sweepers racing, exactly one records
// each nudge.
type Nudger interface {
	// NudgeApproval records the nudge and returns the request and the event written (with its
	// store id); ErrNothingToSweep, writing nothing, when the request is not pending, has
	// expired, is not due, or already has that nudge (or, for a reminder, its escalation).
	NudgeApproval(ctx context.Context, req *NudgeRequest) (*Approval, []Event, error)
}

// Check refuses a NudgeRequest that cannot be recorded.
func (r *NudgeRequest) Check() error {
	if r == nil {
		return fmt.Errorf("nudge approval: nil request")
	}
	if err := CheckText("approval id", r.ID); err != nil {
		return fmt.Errorf("nudge approval: %w", err)
	}
	if err := CheckText("sweeper", r.Sweeper); err != nil {
		return fmt.Errorf("nudge approval %s: %w", safetext.Quote(r.ID), err)
	}
	switch {
	case r.Kind != NudgeRemind && r.Kind != NudgeEscalate:
		return fmt.Errorf("nudge approval %s: kind %q (expected remind or escalate)", safetext.Quote(r.ID), r.Kind)
	case r.After <= 0:
		return fmt.Errorf("nudge approval %s: after %v (expected a positive duration)", safetext.Quote(r.ID), r.After)
	case r.Sweeper == "":
		return fmt.Errorf("nudge approval %s: no sweeper named", safetext.Quote(r.ID))
	}
	for _, s := range append(slices.Clone(r.Roles), r.People...) {
		if err := CheckText("name", s); err != nil {
			return fmt.Errorf("nudge approval %s: %w", safetext.Quote(r.ID), err)
		}
	}
	return nil
}

// NudgeEventKind is the event kind a nudge of kind k records.
func NudgeEventKind(k NudgeKind) string {
	if k == NudgeEscalate {
		return EventApprovalEscalated
	}
	return EventApprovalReminded
}

// PlanNudge decides a NudgeRequest from the request the backend read (nil when none) and the
// kinds of the nudge events already recorded for it, read under the same lock. A reminder is
// not recorded once the request is escalated: its moment has passed, and the escalation says
// more.
func PlanNudge(req *NudgeRequest, a *Approval, recorded []string) ([]Event, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	nothing := func(why string) error {
		return fmt.Errorf("nudge approval %s (%s): %s: %w", safetext.Quote(req.ID), req.Kind, why, ErrNothingToSweep)
	}
	kind := NudgeEventKind(req.Kind)
	due := time.Time{}
	if a != nil {
		due = a.CreatedAt.Add(req.After)
	}
	switch {
	case a == nil:
		return nil, nothing("no such request")
	case a.Status != Pending:
		return nil, nothing("the request is " + string(a.Status))
	case !req.Now.Before(a.ExpiresAt):
		return nil, nothing("the request has expired")
	case req.Now.Before(due):
		return nil, nothing("not due")
	case slices.Contains(recorded, kind):
		return nil, nothing("already recorded")
	case req.Kind == NudgeRemind && slices.Contains(recorded, EventApprovalEscalated):
		return nil, nothing("already escalated")
	}
	payload := map[string]any{"by": "sweeper", "sweeper": req.Sweeper, "after": req.After.String(),
		"due_at": due.UTC().Format(time.RFC3339Nano), "expires_at": a.ExpiresAt.UTC().Format(time.RFC3339Nano),
		"action": a.ActionName, "progress": Progress(a, req.Required)}
	if len(req.Roles) > 0 {
		payload["roles"] = anyList(req.Roles)
	}
	if len(req.People) > 0 {
		payload["people"] = anyList(req.People)
	}
	return []Event{NewEvent(kind, req.Now, "", "", a.ID, payload)}, nil
}

func anyList(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}
