package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const envelopePolicy = header + `actions: {}
approvers:
  roles:
    oncall: [carol]
authority:
  grants:
    - id: reader
      subject: {agent: reporter}
      actions: [reports.read]
  break_glass:
    - id: incident
      subject: {agent: "ops-*", user: "team:*"}
      actions: ["payments.*"]
      resources: ["order:*"]
      constraints: {amount_lte: 1000}
      environments: [production]
      max_ttl: 4h
      openers: [oncall]
`

func TestParseEnvelope(t *testing.T) {
	t.Parallel()
	p, err := Parse("latch.yaml", []byte(envelopePolicy))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	env := p.Authority.Envelope("incident")
	if env == nil {
		t.Fatal("Envelope(incident) = nil")
	}
	if env.MaxTTL != 4*time.Hour || !cmp.Equal(env.Openers, []string{"oncall"}) || env.Delegable || !env.ExpiresAt.IsZero() {
		t.Errorf("envelope = max_ttl %v, openers %v, delegable %v, expires %v", env.MaxTTL, env.Openers, env.Delegable, env.ExpiresAt)
	}
	if p.Authority.Envelope("reader") != nil {
		t.Error("Envelope(reader) names a policy grant")
	}
	// Doc is the same grant, read by the grant parser: what an opening starts from.
	g, err := ParseGrant("doc", env.Doc)
	if err != nil {
		t.Fatalf("ParseGrant(Doc) = %v\n%s", err, env.Doc)
	}
	want := env.Grant
	want.ID = ""
	if diff := cmp.Diff(&want, g, cmpopts.IgnoreFields(Grant{}, "Pos"), cmpopts.IgnoreFields(Condition{}, "Pos")); diff != "" {
		t.Errorf("ParseGrant(Doc) differs from the envelope (-envelope +doc):\n%s", diff)
	}
	for _, k := range []string{"max_ttl", "openers", "id:"} {
		if strings.Contains(string(env.Doc), k) {
			t.Errorf("Doc holds %q:\n%s", k, env.Doc)
		}
	}
	// Envelopes are not grants: the grants are as listed.
	if len(p.Authority.Grants) != 1 || p.Authority.Grants[0].ID != "reader" {
		t.Errorf("grants = %v, want only reader", p.Authority.Grants)
	}
}

func TestParseEnvelopeRefusals(t *testing.T) {
	t.Parallel()
	const base = header + "actions: {}\napprovers:\n  roles:\n    oncall: [carol]\nauthority:\n  grants:\n    - id: reader\n      subject: {agent: r}\n      actions: [a.b]\n  break_glass:\n"
	const shape = "      subject: {agent: ops-bot}\n      actions: [a.b]\n"
	tests := []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"not a list", "    x: 1\n", 12, 5, "break_glass is a mapping (expected a list of envelopes)"},
		{"not a mapping", "    - 7\n", 12, 7, "break-glass envelope 0 is integer 7"},
		{"no id", "    - max_ttl: 1h\n" + shape, 12, 7, "missing id in break-glass envelope 0"},
		{"bad id", "    - id: \"-x\"\n      max_ttl: 1h\n" + shape, 12, 11, `bad envelope id "-x"`},
		{"duplicate id", "    - id: e\n      max_ttl: 1h\n" + shape + "    - id: e\n      max_ttl: 1h\n" + shape, 16, 11, `duplicate break-glass envelope id "e" (first at line 12, column 11)`},
		{"id of a grant", "    - id: reader\n      max_ttl: 1h\n" + shape, 12, 11, `break-glass envelope id "reader" is also the id of the grant at line 8`},
		{"no max_ttl", "    - id: e\n" + shape, 12, 7, `missing max_ttl in break-glass envelope "e"`},
		{"zero max_ttl", "    - id: e\n      max_ttl: 0s\n" + shape, 13, 16, `max_ttl in break-glass envelope "e" is "0s" (expected a positive duration)`},
		{"negative max_ttl", "    - id: e\n      max_ttl: -1h\n" + shape, 13, 16, "expected a positive duration"},
		{"bare number max_ttl", "    - id: e\n      max_ttl: 60\n" + shape, 13, 16, "is a bare number 60"},
		{"max_ttl too long", "    - id: e\n      max_ttl: 25h\n" + shape, 13, 16, "(expected from 1s to 1 day (24h))"},
		{"expires_at", "    - id: e\n      max_ttl: 1h\n      expires_at: \"2030-01-01T00:00:00Z\"\n" + shape, 14, 7, `expires_at in break-glass envelope "e" (an envelope does not expire`},
		{"delegable", "    - id: e\n      max_ttl: 1h\n      delegable: false\n" + shape, 14, 7, `delegable in break-glass envelope "e" (a break-glass grant is never delegable`},
		{"unknown key", "    - id: e\n      max_ttl: 1h\n      maxttl: 1h\n" + shape, 14, 7, `unknown key "maxttl" in break-glass envelope "e" (expected one of id, subject, actions, resources, constraints, environments`},
		{"unknown opener role", "    - id: e\n      max_ttl: 1h\n      openers: [oncall, sre]\n" + shape, 14, 25, `unknown role "sre" in openers of break-glass envelope "e" (expected one of oncall)`},
		{"empty openers", "    - id: e\n      max_ttl: 1h\n      openers: []\n" + shape, 14, 16, "empty openers"},
		{"no subject", "    - id: e\n      max_ttl: 1h\n      actions: [a.b]\n", 12, 7, `missing subject in break-glass envelope "e"`},
		{"bad action pattern", "    - id: e\n      max_ttl: 1h\n      subject: {agent: x}\n      actions: [\"a.**.b\"]\n", 15, 17, `bad entry "a.**.b" in actions in break-glass envelope "e"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("latch.yaml", []byte(base+tt.src))
			pe := asPolicyError(t, err)
			if pe.Line != tt.line || pe.Column != tt.col || !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("Parse = %v (line %d, column %d), want %d:%d %q", err, pe.Line, pe.Column, tt.line, tt.col, tt.msg)
			}
		})
	}
}

// TestEnvelopeHash: the policy hash covers every field of an envelope, and a policy without
// envelopes hashes as it did before they existed.
func TestEnvelopeHash(t *testing.T) {
	t.Parallel()
	hash := func(src string) string {
		t.Helper()
		p, err := Parse("latch.yaml", []byte(src))
		if err != nil {
			t.Fatalf("Parse = %v", err)
		}
		return p.Hash
	}
	base := hash(envelopePolicy)
	for _, change := range [][2]string{
		{"max_ttl: 4h", "max_ttl: 3h"},
		{"      openers: [oncall]\n", ""},
		{"amount_lte: 1000", "amount_lte: 999"},
		{`agent: "ops-*"`, `agent: "ops-bot"`},
		{"      environments: [production]\n", ""},
		{`resources: ["order:*"]`, `resources: ["order:1"]`},
		{`actions: ["payments.*"]`, `actions: ["payments.refund"]`},
		{"id: incident", "id: incident2"},
	} {
		src := strings.Replace(envelopePolicy, change[0], change[1], 1)
		if src == envelopePolicy {
			t.Fatalf("change %q does not apply", change[0])
		}
		if hash(src) == base {
			t.Errorf("changing %q to %q leaves the policy hash unchanged", change[0], change[1])
		}
	}
	without := strings.SplitN(envelopePolicy, "  break_glass:\n", 2)[0]
	if hash(without) != hash(without+"  break_glass: []\n") {
		t.Error("an empty break_glass list changes the policy hash")
	}
	if _, ok := Normalize(mustParse(t, without))["authority"].(map[string]any)["break_glass"]; ok {
		t.Error("a policy without envelopes has break_glass in its normalized form")
	}
}

// asPolicyError returns err as an *Error, failing the test when it is not one.
func asPolicyError(t *testing.T, err error) *Error {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("Parse = %v (%T), want an *Error", err, err)
	}
	return pe
}

func TestBreakGlassGrant(t *testing.T) {
	t.Parallel()
	p := mustParse(t, envelopePolicy)
	env := p.Authority.Envelope("incident")
	at := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)
	doc, g, err := BreakGlassGrant("", env.Doc, Subject{Agent: "ops-bot", User: "team:a"}, at)
	if err != nil {
		t.Fatalf("BreakGlassGrant = %v", err)
	}
	again, err := ParseGrant("doc", doc)
	if err != nil {
		t.Fatalf("ParseGrant(stored doc) = %v\n%s", err, doc)
	}
	want := env.Grant
	want.ID, want.Subject, want.ExpiresAt = "", Subject{Agent: "ops-bot", User: "team:a"}, at
	for _, got := range []*Grant{g, again} {
		if diff := cmp.Diff(&want, got, cmpopts.IgnoreFields(Grant{}, "Pos"), cmpopts.IgnoreFields(Condition{}, "Pos")); diff != "" {
			t.Errorf("opened grant differs from the envelope with a subject and an expiry (-want +got):\n%s", diff)
		}
	}
	// Without a subject, the document's own is kept.
	if _, g, err := BreakGlassGrant("", env.Doc, Subject{}, at); err != nil || g.Subject != env.Subject {
		t.Errorf("BreakGlassGrant without a subject = %+v, %v; want the envelope's subject", g, err)
	}
	for _, tt := range []struct{ doc, msg string }{
		{"subject: {agent: a}\nactions: [x]\nexpires_at: \"2030-01-01T00:00:00Z\"\n", "grant:3:1: expires_at in the grant"},
		{"subject: {agent: a}\nactions: [x]\nttl: 1h\n", `grant:3:1: unknown key "ttl"`},
		{"subject: {agent: a}\n", "grant:1:1: missing actions"},
	} {
		if _, _, err := BreakGlassGrant("", []byte(tt.doc), Subject{}, at); err == nil || !strings.HasPrefix(err.Error(), tt.msg) {
			t.Errorf("BreakGlassGrant(%q) = %v, want %q", tt.doc, err, tt.msg)
		}
	}
	if _, _, err := BreakGlassGrant("", env.Doc, Subject{Agent: "a?b"}, at); err == nil {
		t.Error("BreakGlassGrant with a subject no pattern allows = nil error")
	}
}
