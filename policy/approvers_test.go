package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const approversPolicy = `schema: latch.policy/v1
approvers:
  roles:
    payments-leads: [alice, bob]
    finance: [carol, Bob]
    ops:
actions:
  billing.refund:
    effect: "refund:{id}"
    decision: approve
    approvers:
      roles: [payments-leads, finance]
      required: 2
      verified: true
  billing.charge:
    effect: "charge:{id}"
    decision: approve
  ops.deploy:
    effect: "deploy:{id}"
    decision: approve
    approvers: { roles: [ops], required: 3 }
`

func TestParseApprovers(t *testing.T) {
	t.Parallel()
	pol, err := Parse("latch.yaml", []byte(approversPolicy))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := pol.RoleMembers("payments-leads"); !cmp.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("RoleMembers(payments-leads) = %q, want [alice bob]", got)
	}
	if got := pol.RoleMembers("ops"); got != nil {
		t.Errorf("RoleMembers(ops) = %q, want none (filled by accounts)", got)
	}
	r := pol.ApproversFor("billing.refund")
	want := ApproverRule{Roles: []string{"payments-leads", "finance"}, Required: 2, Verified: true}
	if diff := cmp.Diff(want, r, cmp.FilterPath(func(p cmp.Path) bool {
		switch p.Last().String() {
		case ".Pos", ".rolePos", ".requiredPos", ".remindPos", ".escalatePos", ".people":
			return true
		}
		return false
	}, cmp.Ignore())); diff != "" {
		t.Errorf("ApproversFor(billing.refund) (-want +got):\n%s", diff)
	}
	if got := pol.ApproversFor("billing.charge"); got.Required != 1 || got.Roles != nil || got.Verified {
		t.Errorf("ApproversFor(billing.charge) = %+v, want the default: anyone, 1, unverified", got)
	}
	if got := pol.ApproversFor("not.listed"); got.Required != 1 || got.Roles != nil {
		t.Errorf("ApproversFor(not.listed) = %+v, want the default", got)
	}

	// The section and the rules are part of the hash; a policy without them hashes as before.
	for _, change := range [][2]string{
		{"[alice, bob]", "[alice, dave]"},
		{"required: 2", "required: 1"},
		{"verified: true", "verified: false"},
		{"roles: [payments-leads, finance]", "roles: [payments-leads]"},
	} {
		other, err := Parse("latch.yaml", []byte(strings.Replace(approversPolicy, change[0], change[1], 1)))
		if err != nil {
			t.Fatalf("Parse with %q → %q: %v", change[0], change[1], err)
		}
		if other.Hash == pol.Hash {
			t.Errorf("changing %q to %q left the policy hash unchanged", change[0], change[1])
		}
	}
	bare, err := Parse("latch.yaml", []byte("schema: latch.policy/v1\nactions:\n  a.b: { decision: approve }\n"))
	if err != nil {
		t.Fatal(err)
	}
	n := Normalize(bare)
	if _, ok := n["approvers"]; ok {
		t.Error("Normalize of a policy without an approvers section has an approvers key")
	}
	if _, ok := n["actions"].(map[string]any)["a.b"].(map[string]any)["approvers"]; ok {
		t.Error("Normalize of an action without approvers has an approvers key")
	}
}

func TestEntitled(t *testing.T) {
	t.Parallel()
	pol, err := Parse("latch.yaml", []byte(approversPolicy))
	if err != nil {
		t.Fatal(err)
	}
	refund := pol.ApproversFor("billing.refund")
	deploy := pol.ApproversFor("ops.deploy")
	for _, tc := range []struct {
		rule  ApproverRule
		name  string
		extra []string
		want  Entitlement
	}{
		{refund, "alice", nil, Entitlement{Entitled: true, Role: "payments-leads"}},
		{refund, " ALICE ", nil, Entitlement{Entitled: true, Role: "payments-leads"}},
		{refund, "ａｌｉｃｅ", nil, Entitlement{Entitled: true, Role: "payments-leads"}},
		{refund, "carol", nil, Entitlement{Entitled: true, Role: "finance"}},
		{refund, "mallory", nil, Entitlement{Reason: ReasonNotEntitled}},
		{refund, "аlice", nil, Entitlement{Reason: ReasonNotEntitled}}, // Cyrillic а
		{refund, "", nil, Entitlement{Reason: ReasonNotEntitled}},
		{refund, "mallory", []string{"finance"}, Entitlement{Entitled: true, Role: "finance"}},
		{refund, "mallory", []string{"ops"}, Entitlement{Reason: ReasonNotEntitled}},       // a role the rule does not name
		{refund, "mallory", []string{"undefined"}, Entitlement{Reason: ReasonNotEntitled}}, // a role the policy does not define
		{deploy, "dave", []string{"ops"}, Entitlement{Entitled: true, Role: "ops"}},
		{deploy, "alice", nil, Entitlement{Reason: ReasonNotEntitled}},
		{pol.ApproversFor("billing.charge"), "anyone", nil, Entitlement{Entitled: true}},
	} {
		if got := pol.Entitled(tc.rule, tc.name, tc.extra); got != tc.want {
			t.Errorf("Entitled(%v, %q, %q) = %+v, want %+v", tc.rule.Roles, tc.name, tc.extra, got, tc.want)
		}
	}
}

func TestParseApproversRefused(t *testing.T) {
	t.Parallel()
	head := "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: [alice, bob]\n    empty: []\nactions:\n  a.b:\n    decision: approve\n"
	for _, tc := range []struct {
		name, src, want string
	}{
		{"unknown role", head + "    approvers: { roles: [leeds] }\n",
			`latch.yaml:9:26: unknown role "leeds" in approvers of action "a.b" (expected one of empty, leads)`},
		{"unknown role without a section", "schema: latch.policy/v1\nactions:\n  a.b:\n    decision: approve\n    approvers:\n      roles: [leads]\n",
			`latch.yaml:6:15: unknown role "leads" in approvers of action "a.b" (the policy has no approvers section defining roles)`},
		{"required above the members", head + "    approvers:\n      roles: [leads]\n      required: 3\n",
			`latch.yaml:11:17: approvers of action "a.b" require 3 distinct approvers but roles leads list 2`},
		{"required counts people once across roles",
			"schema: latch.policy/v1\napprovers:\n  roles:\n    a: [alice, bob]\n    b: [BOB, alice]\nactions:\n  x.y:\n    decision: approve\n    approvers: { roles: [a, b], required: 3 }\n",
			`latch.yaml:9:43: approvers of action "x.y" require 3 distinct approvers but roles a, b list 2`},
		{"required zero", head + "    approvers: { required: 0 }\n",
			`latch.yaml:9:28: required in approvers in action "a.b" is 0 (expected at least 1`},
		{"required not an integer", head + "    approvers: { required: two }\n",
			`latch.yaml:9:28: required in approvers in action "a.b" is string "two" (expected an integer)`},
		{"verified not a bool", head + "    approvers: { verified: yes }\n",
			`latch.yaml:9:28: verified in approvers in action "a.b" is string "yes" (expected true or false)`},
		{"unknown key in rule", head + "    approvers: { role: [leads] }\n",
			`latch.yaml:9:18: unknown key "role" in approvers in action "a.b" (expected one of roles, required, verified, remind_after, escalate_after, escalate_to, on_expiry, standing)`},
		{"empty roles", head + "    approvers: { roles: [] }\n",
			`latch.yaml:9:25: roles of approvers in action "a.b" is a list (expected a non-empty list`},
		{"role listed twice", head + "    approvers: { roles: [leads, leads] }\n",
			`latch.yaml:9:33: role "leads" is listed twice in approvers in action "a.b"`},
		{"the same person twice in a role", "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: [alice, ' Alice']\n",
			`latch.yaml:4:20: member "Alice" of role "leads" names the same person as "alice"`},
		{"a member with a control character", "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: [\"al\\u0007ice\"]\n",
			`latch.yaml:4:13: the value of approvers.roles.leads[0] holds the control character U+0007`},
		{"a member with an invisible character", "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: [\"al\\u200bice\"]\n",
			`latch.yaml:4:13: the value of approvers.roles.leads[0] holds the invisible format character U+200B`},
		{"an empty member", "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: ['  ']\n",
			`latch.yaml:4:13: member "  " of role "leads" is empty`},
		{"a member that is not a string", "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: [alice, 7]\n",
			`latch.yaml:4:20: member 1 of role "leads" is integer 7 (expected an approver name)`},
		{"a bad role name", "schema: latch.policy/v1\napprovers:\n  roles:\n    9leads: [alice]\n",
			`latch.yaml:4:5: bad role name "9leads"`},
		{"a role that is not a list", "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: alice\n",
			`latch.yaml:4:12: role "leads" is string "alice" (expected a list of approver names`},
		{"unknown key in section", "schema: latch.policy/v1\napprovers:\n  groups: {}\n",
			`latch.yaml:3:3: unknown key "groups" in approvers (expected one of roles, policy_change)`},
		{"policy_change names an unknown role", "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: [alice]\n  policy_change: {roles: [owners]}\n",
			`latch.yaml:5:27: unknown role "owners" in approvers of action "latch.policy.apply"`},
		{"policy_change requires more than its roles list", "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: [alice]\n  policy_change: {roles: [leads], required: 2}\n",
			`latch.yaml:5`},
		{"the reserved action declared", "schema: latch.policy/v1\nactions:\n  latch.policy.apply:\n    decision: allow\n",
			`latch.yaml:3:3: action name "latch.policy.apply" is reserved`},
		{"standing without max_for", head + "    approvers: { standing: { max_uses: 3 } }\n",
			`latch.yaml:9:18: standing in approvers in action "a.b" has no max_for`},
		{"standing without max_uses", head + "    approvers: { standing: { max_for: 1h } }\n",
			`latch.yaml:9:18: standing in approvers in action "a.b" has no max_uses`},
		{"standing max_uses zero", head + "    approvers: { standing: { max_uses: 0, max_for: 1h } }\n",
			`latch.yaml:9:40: max_uses of standing in approvers in action "a.b" is 0 (expected from 1 to 10000)`},
		{"standing max_for a bare number", head + "    approvers: { standing: { max_uses: 2, max_for: 60 } }\n",
			`latch.yaml:9:52: max_for of standing in approvers in action "a.b" is a bare number 60`},
		{"standing unknown key", head + "    approvers: { standing: { uses: 2 } }\n",
			`latch.yaml:9:30: unknown key "uses" in standing in approvers in action "a.b" (expected one of max_uses, max_for)`},
		{"section not a mapping", "schema: latch.policy/v1\napprovers: [alice]\n",
			`latch.yaml:2:12: approvers is a list (expected a mapping with roles)`},
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

func TestParseApproversAccepted(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		// A role filled by accounts only does not bound required when the file is read.
		"schema: latch.policy/v1\napprovers:\n  roles:\n    ops: []\nactions:\n  a.b:\n    decision: approve\n    approvers: { roles: [ops], required: 5 }\n",
		// required from anyone, without roles.
		"schema: latch.policy/v1\nactions:\n  a.b:\n    decision: approve\n    approvers: { required: 2, verified: true }\n",
		// the section may come after the actions that name its roles.
		"schema: latch.policy/v1\nactions:\n  a.b:\n    decision: approve\n    approvers: { roles: [leads], required: 2 }\napprovers:\n  roles:\n    leads: [alice, bob]\n",
	} {
		if _, err := Parse("latch.yaml", []byte(src)); err != nil {
			t.Errorf("Parse(%q): %v", src, err)
		}
	}
}

// TestParseStanding: a standing entry gives its bounds; an action without one allows no
// standing approvals (nil).
func TestParseStanding(t *testing.T) {
	t.Parallel()
	src := "schema: latch.policy/v1\nactions:\n  a.b:\n    decision: approve\n    approvers: { standing: { max_uses: 10, max_for: 2h } }\n  c.d:\n    decision: approve\n"
	pol, err := Parse("latch.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if st := pol.ApproversFor("a.b").Standing; st == nil || st.MaxUses != 10 || st.MaxFor != 2*time.Hour {
		t.Errorf("ApproversFor(a.b).Standing = %+v, want 10 uses for 2h", st)
	}
	if st := pol.ApproversFor("c.d").Standing; st != nil {
		t.Errorf("ApproversFor(c.d).Standing = %+v, want nil", st)
	}
}
