package operator

import (
	"strings"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// ReadReminders says in words, for the CLI and the console alike, when a request is reminded
// about and escalated and whether that was sent: one line each, "" for a step the policy does
// not set. Names are returned as they are: the caller marks them for its medium.
func ReadReminders(r *jsonview.Reminders) (remind, escalate string) {
	if r == nil {
		return "", ""
	}
	if r.RemindAt != nil {
		remind = "due " + *r.RemindAt
		if r.RemindedAt != nil {
			remind += ", sent " + *r.RemindedAt
		} else {
			remind += ", not sent"
		}
	}
	if r.EscalateAt != nil && r.EscalateTo != nil {
		escalate = "to " + EscalationTargets(r.EscalateTo) + " at " + *r.EscalateAt + " (they may answer from then on)"
		if r.EscalatedAt != nil {
			escalate += ", sent " + *r.EscalatedAt
		} else {
			escalate += ", not sent"
		}
	}
	return remind, escalate
}

// EscalationTargets lists an escalation's roles ("role heads") and people.
func EscalationTargets(t *jsonview.EscalateTo) string {
	var out []string
	for _, r := range t.Roles {
		out = append(out, "role "+r)
	}
	out = append(out, t.People...)
	return strings.Join(out, ", ")
}

// ReadExpiry says in words, for the CLI and the console alike, what a's expiry does when its
// action's approvers.on_expiry is deny (onExpiry, jsonview.OnExpiryOf): for a pending request
// that it will be written denied, for one that was that nobody answered it in time. It is ""
// when the expiry writes the request expired, as by default, and for a request answered.
func ReadExpiry(a *store.Approval, onExpiry string) string {
	switch {
	case a.DeniedAtExpiry():
		return "denied at its expiry " + *jsonview.Stamp(a.ExpiresAt) + ": nobody answered it in time (on_expiry: deny)"
	case onExpiry == policy.OnExpiryDeny && a.Status == store.Pending:
		return "denied if still unanswered at " + *jsonview.Stamp(a.ExpiresAt) + " (on_expiry: deny)"
	}
	return ""
}
