package policy

import (
	"strings"
	"testing"
	"time"
)

const escalationHead = "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: [alice, bob]\n    heads: [dana]\nactions:\n  a.b:\n    decision: approve\n"

func TestParseEscalation(t *testing.T) {
	t.Parallel()
	src := escalationHead + "    approval_ttl: 2h\n    approvers:\n      roles: [leads]\n      remind_after: 15m\n      escalate_after: 1h\n      escalate_to: {roles: [heads], people: [Erin]}\n"
	pol, err := Parse("latch.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	r := pol.ApproversFor("a.b")
	if r.RemindAfter != 15*time.Minute || r.EscalateAfter != time.Hour || r.EscalateTo == nil ||
		strings.Join(r.EscalateTo.Roles, ",") != "heads" || strings.Join(r.EscalateTo.People, ",") != "Erin" {
		t.Fatalf("ApproversFor(a.b) = %+v (escalate_to %+v), want remind 15m, escalate 1h to heads and Erin", r, r.EscalateTo)
	}

	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		at   time.Duration
		want bool
	}{
		{"alice", 0, true}, // a member of the rule's own role, always
		{"dana", 59 * time.Minute, false},
		{"erin", 59 * time.Minute, false},
		{"dana", time.Hour, true}, // a member of the role escalated to, from escalate_after on
		{"ERIN", time.Hour, true}, // a person escalated to, compared as names are
		{"mallory", 2 * time.Hour, false},
	} {
		rule := r.RuleAt(created, created.Add(tc.at))
		if got := pol.Entitled(rule, tc.name, nil).Entitled; got != tc.want {
			t.Errorf("Entitled(%s) at +%v = %v, want %v", tc.name, tc.at, got, tc.want)
		}
	}
	esc := r.EscalatedRule()
	if esc.Required != r.Required || esc.Verified != r.Verified {
		t.Errorf("EscalatedRule changed required/verified: %+v", esc)
	}
	if len(r.Roles) != 1 {
		t.Errorf("EscalatedRule changed the rule it was called on: roles %v", r.Roles)
	}

	// The keys are part of the hash; without them the rule hashes as before.
	plain, err := Parse("latch.yaml", []byte(escalationHead+"    approval_ttl: 2h\n    approvers:\n      roles: [leads]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Hash == pol.Hash {
		t.Errorf("a rule with reminders hashes as one without: %s", plain.Hash)
	}
}

// TestParseEscalationRefused: a bad duration or an impossible order names the file, line and
// column of the value at fault.
func TestParseEscalationRefused(t *testing.T) {
	t.Parallel()
	rule := func(ttl, body string) string {
		s := escalationHead
		if ttl != "" {
			s += "    approval_ttl: " + ttl + "\n"
		}
		return s + "    approvers:\n      roles: [leads]\n" + body
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"remind after escalate", rule("2h", "      remind_after: 1h\n      escalate_after: 30m\n      escalate_to: {roles: [heads]}\n"),
			`latch.yaml:12:21: remind_after 1h0m0s is not shorter than escalate_after 30m0s in approvers of action "a.b"`},
		{"remind equal to escalate", rule("2h", "      remind_after: 1h\n      escalate_after: 1h\n      escalate_to: {people: [erin]}\n"),
			`latch.yaml:12:21: remind_after 1h0m0s is not shorter than escalate_after 1h0m0s`},
		{"escalate at expiry", rule("1h", "      escalate_after: 1h\n      escalate_to: {roles: [heads]}\n"),
			`latch.yaml:12:23: escalate_after 1h0m0s is not shorter than approval_ttl 1h0m0s of action "a.b"`},
		{"remind past expiry", rule("10m", "      remind_after: 15m\n"),
			`latch.yaml:12:21: remind_after 15m0s is not shorter than approval_ttl 10m0s of action "a.b"`},
		{"no approval_ttl", rule("", "      remind_after: 15m\n"),
			`latch.yaml:11:21: remind_after in approvers of action "a.b" needs the action's approval_ttl`},
		{"bare number", rule("2h", "      remind_after: 15\n"),
			`latch.yaml:12:21: remind_after in approvers in action "a.b" is a bare number 15`},
		{"not a duration", rule("2h", "      remind_after: soon\n"),
			`latch.yaml:12:21: bad duration "soon" for remind_after in approvers in action "a.b"`},
		{"escalate_after without escalate_to", rule("2h", "      escalate_after: 1h\n"),
			`latch.yaml:10:5: approvers in action "a.b" has escalate_after but no escalate_to`},
		{"escalate_to without escalate_after", rule("2h", "      escalate_to: {roles: [heads]}\n"),
			`latch.yaml:10:5: approvers in action "a.b" has escalate_to but no escalate_after`},
		{"escalate_to an unknown role", rule("2h", "      escalate_after: 1h\n      escalate_to: {roles: [bosses]}\n"),
			`latch.yaml:13:29: unknown role "bosses" in escalate_to of action "a.b" (expected one of heads, leads)`},
		{"escalate_to nobody", rule("2h", "      escalate_after: 1h\n      escalate_to: {}\n"),
			`latch.yaml:13:7: escalate_to in approvers in action "a.b" names nobody`},
		{"escalate_to the same person twice", rule("2h", "      escalate_after: 1h\n      escalate_to: {people: [erin, ' Erin']}\n"),
			`latch.yaml:13:36: person "Erin" in escalate_to in approvers in action "a.b" names the same person as "erin"`},
		{"unknown key in escalate_to", rule("2h", "      escalate_after: 1h\n      escalate_to: {groups: [x]}\n"),
			`latch.yaml:13:21: unknown key "groups" in escalate_to in approvers in action "a.b" (expected one of roles, people)`},
		{"in policy_change", "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: [alice]\n  policy_change: {roles: [leads], remind_after: 1h}\n",
			`latch.yaml:5:35: remind_after is not available in approvers.policy_change`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("latch.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse(%q) = nil error, want %q", tc.src, tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Parse error = %q, want prefix %q", err, tc.want)
			}
		})
	}
}
