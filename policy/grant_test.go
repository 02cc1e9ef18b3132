package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const grantDoc = `subject: {agent: "svc:finance:bot", user: alice}
actions: [billing.charge, "billing.refund*"]
resources: ["invoice:eu-*"]
constraints: {amount_lte: 10000, currency_in: [EUR]}
environments: [production]
expires_at: "2026-06-30T00:00:00+02:00"
delegable: true
tasks: ["ticket:INC-*", "river:job:**"]
`

// TestParseGrantMatchesPolicyGrant checks that a grant file reads exactly like the same grant
// in a policy's authority section (but for the id, which a delegation does not have).
func TestParseGrantMatchesPolicyGrant(t *testing.T) {
	t.Parallel()
	g, err := ParseGrant("grant.yaml", []byte(grantDoc))
	if err != nil {
		t.Fatalf("ParseGrant = %v", err)
	}
	indented := "    - id: g1\n" + strings.ReplaceAll(strings.TrimSuffix(grantDoc, "\n"), "\n", "\n      ")
	indented = strings.Replace(indented, "subject:", "      subject:", 1) + "\n"
	p, err := Parse("latch.yaml", []byte(header+"actions: {}\nauthority:\n  grants:\n"+indented))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	want := *p.Authority.Grants[0]
	want.ID = ""
	if diff := cmp.Diff(&want, g, cmpopts.IgnoreFields(Grant{}, "Pos"), cmpopts.IgnoreFields(Condition{}, "Pos")); diff != "" {
		t.Errorf("ParseGrant differs from the policy grant (-policy +file):\n%s", diff)
	}
	if g.Pos != (Position{Line: 1, Column: 1}) {
		t.Errorf("ParseGrant Pos = %+v, want 1:1", g.Pos)
	}
	if !g.ExpiresAt.Equal(want.ExpiresAt) || g.ExpiresAt.Format("2006-01-02T15:04:05Z07:00") != "2026-06-30T00:00:00+02:00" {
		t.Errorf("ParseGrant ExpiresAt = %v", g.ExpiresAt)
	}
}

func TestParseGrantRefusals(t *testing.T) {
	t.Parallel()
	const minimal = "subject: {agent: a}\nactions: [x]\n"
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string // a substring of Msg
	}{
		{"empty", "", 1, 1, "empty grant (expected a mapping with subject and actions)"},
		{"only a comment", "# nothing\n", 1, 1, "empty grant"},
		{"a list", "- subject: {agent: a}\n", 1, 1, "the grant is a list (expected a mapping with subject and actions)"},
		{"a second document", minimal + "---\n" + minimal, 3, 1, "a second YAML document (expected exactly one document in a grant file)"},
		{"yaml syntax", "subject: [\n", 1, 0, "invalid YAML"},
		{"an id", "id: g1\n" + minimal, 1, 1, "id in the grant (a delegation's id is assigned when it is created, dlg_…; leave id out)"},
		{"unknown key", minimal + "expires: x\n", 3, 1, `unknown key "expires" in the grant (expected one of subject, actions, resources, constraints, environments, expires_at, delegable, tasks)`},
		{"missing subject", "actions: [x]\n", 1, 1, "missing subject in the grant"},
		{"missing actions", "subject: {agent: a}\n", 1, 1, "missing actions in the grant"},
		{"empty subject", "subject: {}\nactions: [x]\n", 1, 10, "empty subject in the grant"},
		{"bad agent pattern", "subject: {agent: \"a::b\"}\nactions: [x]\n", 1, 18, `bad agent pattern "a::b" in the grant`},
		{"bad action pattern", "subject: {agent: a}\nactions: [\"x.**.y\"]\n", 2, 11, "** is allowed only as the last segment"},
		{"empty resources", minimal + "resources: []\n", 3, 12, "empty resources in the grant"},
		{"reserved constraint", minimal + "constraints: {user_eq: bob}\n", 3, 15, `tests reserved subject "user" in the grant`},
		{"float operand", minimal + "constraints: {amount_lte: 1.5}\n", 3, 27, "float 1.5"},
		{"bad expires_at", minimal + "expires_at: 2026-06-30\n", 3, 13, `bad expires_at "2026-06-30" in the grant`},
		{"delegable without expiry", minimal + "delegable: true\n", 3, 12, "delegable grant has no expires_at (a grant that can be delegated must expire)"},
		{"duplicate key", minimal + "actions: [y]\n", 3, 1, `duplicate key "actions"`},
		{"anchor", "subject: &s {agent: a}\nactions: [x]\n", 1, 10, "anchor &s"},
		{"control character", "subject: {agent: \"a\x01\"}\nactions: [x]\n", 1, 20, "control character U+0001"},
		{"empty tasks", minimal + "tasks: []\n", 3, 8, "empty tasks in the grant"},
		{"tasks not a list", minimal + "tasks: \"ticket:1\"\n", 3, 8, `tasks in the grant is string "ticket:1" (expected a list)`},
		{"bad task pattern", minimal + "tasks: [\"ticket:*x\"]\n", 3, 9, `bad entry "ticket:*x" in tasks in the grant: segment "*x": * is allowed only once, at the end of a segment`},
		{"task deep wildcard first", minimal + "tasks: [\"**\"]\n", 3, 9, "** needs at least one literal segment before it"},
		{"task empty segment", minimal + "tasks: [\"ticket::1\"]\n", 3, 9, "empty segment 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := ParseGrant("grant.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("ParseGrant(%q) = %+v, want an error", tt.src, g)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("ParseGrant(%q) = %v (%T), want an *Error", tt.src, err, err)
			}
			if pe.File != "grant.yaml" || pe.Line != tt.line || pe.Column != tt.col || !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("ParseGrant(%q) = %s:%d:%d: %s; want grant.yaml:%d:%d: …%s…", tt.src, pe.File, pe.Line, pe.Column, pe.Msg, tt.line, tt.col, tt.msg)
			}
		})
	}
}

func TestParseGrantDefaultFileName(t *testing.T) {
	t.Parallel()
	_, err := ParseGrant("", nil)
	var pe *Error
	if !errors.As(err, &pe) || pe.File != "grant" {
		t.Errorf("ParseGrant(\"\", nil) = %v, want an *Error in file \"grant\"", err)
	}
}
