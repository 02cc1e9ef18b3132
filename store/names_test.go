package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// TestPlanAnswerNames: an approver name is trimmed and NFKC-normalized, stored that way, and
// compared with the requester's agent and user after case folding; names that could hide what
// they are (control, format and bidi characters, invalid UTF-8) are refused.
func TestPlanAnswerNames(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	a := &store.Approval{ID: "apr_1", Status: store.Pending, Agent: "carol", User: "Dave", ExpiresAt: now.Add(time.Hour)}
	for _, c := range []struct {
		approver string
		reason   string // "" when granted
		stored   string
	}{
		{approver: "alice", stored: "alice"},
		{approver: "  Alice\t", stored: "Alice"},
		{approver: "ａｌｉｃｅ", stored: "alice"}, // fullwidth: NFKC
		{approver: "Carol", reason: "self_approval"},
		{approver: "carol ", reason: "self_approval"},
		{approver: "CAROL", reason: "self_approval"},
		{approver: "ｃａｒｏｌ", reason: "self_approval"},
		{approver: "ca rol", reason: "self_approval"},
		{approver: "dave", reason: "self_approval"},
		{approver: "DAVE", reason: "self_approval"},
		{approver: "ca\u200brol", reason: "invalid_approver"}, // zero-width space
		{approver: "\u202ealice", reason: "invalid_approver"}, // right-to-left override
		{approver: "al\u2066ice", reason: "invalid_approver"}, // bidi isolate
		{approver: "\ufeffalice", reason: "invalid_approver"}, // byte-order mark
		{approver: "al\xffice", reason: "invalid_approver"},   // invalid UTF-8
		{approver: "alice\nmallory", reason: "invalid_approver"},
		{approver: "alice\u2028mallory", reason: "invalid_approver"},
		{approver: "   ", reason: "invalid_approver"},
	} {
		w, evs, err := store.PlanAnswer(&store.AnswerRequest{Now: now, ID: a.ID, Grant: true, Approver: c.approver}, a)
		var ae *store.AnswerError
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("PlanAnswer(%q) = %v, want granted", c.approver, err)
		case c.reason == "" && (w == nil || w.Next.Approver != c.stored):
			t.Errorf("PlanAnswer(%q) stored approver %+v, want %q", c.approver, w, c.stored)
		case c.reason == "" && (len(evs) != 1 || string(evs[0].Payload) != `{"approver":"`+c.stored+`"}`):
			t.Errorf("PlanAnswer(%q) events %+v, want one naming %q", c.approver, evs, c.stored)
		case c.reason != "" && (!errors.As(err, &ae) || ae.Reason != c.reason || w != nil):
			t.Errorf("PlanAnswer(%q) = %v, %v; want refused %s with nothing written", c.approver, w, err, c.reason)
		}
	}
}

// TestSameNameRequesterSide: the requester's own names are folded too, so an agent registered
// with odd spelling cannot approve under its plain one.
func TestSameNameRequesterSide(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"carol", "Carol", true},
		{"car\u200bol", "carol", true},
		{"Straße", "STRASSE", true},
		{"ǅ", "dž", true},
		{"carol", "carl", false},
		{"", "", false},
	} {
		if got := store.SameName(c.a, c.b); got != c.same {
			t.Errorf("SameName(%q, %q) = %t, want %t", c.a, c.b, got, c.same)
		}
	}
}

func TestPlanResolveNormalizesResolver(t *testing.T) {
	t.Parallel()
	eff := &store.Effect{Key: "k", State: store.Ambiguous, Attempt: 1}
	w, _, err := store.PlanResolve(&store.ResolveRequest{Key: "k", To: store.Failed, By: " cli:alice "}, eff)
	if err != nil || w.Next.ResolvedBy != "cli:alice" {
		t.Errorf("PlanResolve(by %q) = %+v, %v; want resolved_by cli:alice", " cli:alice ", w, err)
	}
	for _, by := range []string{"cli:al\u202eice", "cli:al\xffice"} {
		if _, _, err := store.PlanResolve(&store.ResolveRequest{Key: "k", To: store.Failed, By: by}, eff); err == nil {
			t.Errorf("PlanResolve(by %q) accepted", by)
		}
	}
}
