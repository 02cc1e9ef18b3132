package policy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch/policy"
)

const scopesBase = "schema: latch.policy/v1\nactions:\n  t.op: { decision: allow }\n"

// TestScopesParse: the static map, the URL with its default and explicit timeout, and the
// action patterns are read as written; a policy without the section has nil Scopes.
func TestScopesParse(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse("p.yaml", []byte(scopesBase))
	if err != nil {
		t.Fatal(err)
	}
	if p.Scopes != nil {
		t.Errorf("Scopes without the section = %+v, want nil", p.Scopes)
	}

	p, err = policy.Parse("p.yaml", []byte(scopesBase+`scopes:
  actions: ["crm.**", "billing.refund"]
  static:
    support-bot: ["customer:EU-*", "ticket:**"]
    support-bot/alice: ["customer:EU-42"]
    idle-bot: []
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &policy.Scopes{
		Static: map[string][]string{
			"support-bot":       {"customer:EU-*", "ticket:**"},
			"support-bot/alice": {"customer:EU-42"},
			"idle-bot":          {},
		},
		Actions: []string{"crm.**", "billing.refund"},
		Pos:     policy.Position{Line: 4, Column: 1},
	}
	if diff := cmp.Diff(want, p.Scopes); diff != "" {
		t.Errorf("Scopes (-want +got):\n%s", diff)
	}

	p, err = policy.Parse("p.yaml", []byte(scopesBase+"scopes:\n  url: https://scopes.internal/v1/scope\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Scopes; s.URL != "https://scopes.internal/v1/scope" || s.Timeout != policy.DefaultScopeTimeout || s.Static != nil || s.Actions != nil {
		t.Errorf("Scopes with url = %+v, want the url and the default timeout", s)
	}
	for _, u := range []string{"http://127.0.0.1:9000/scope", "http://localhost:9000/scope", "http://[::1]/scope", "https://10.0.0.1/s?x=1"} {
		p, err := policy.Parse("p.yaml", []byte(scopesBase+"scopes:\n  url: \""+u+"\"\n  timeout: 500ms\n"))
		if err != nil {
			t.Errorf("Parse(url %s) = %v", u, err)
			continue
		}
		if p.Scopes.URL != u || p.Scopes.Timeout != 500*time.Millisecond {
			t.Errorf("Parse(url %s) = %+v", u, p.Scopes)
		}
	}
}

// TestScopesFor: the entry "agent/user" wins for that user; "agent" serves its other users and
// calls without a user; a principal with no entry has none (an empty scope).
func TestScopesFor(t *testing.T) {
	t.Parallel()
	s := &policy.Scopes{Static: map[string][]string{"bot": {"a:1"}, "bot/alice": {"a:2"}, "solo/bob": {"a:3"}}}
	for _, tc := range []struct {
		agent, user string
		want        []string
		found       bool
	}{
		{"bot", "", []string{"a:1"}, true},
		{"bot", "carol", []string{"a:1"}, true},
		{"bot", "alice", []string{"a:2"}, true},
		{"solo", "bob", []string{"a:3"}, true},
		{"solo", "", nil, false},
		{"solo", "carol", nil, false},
		{"other", "", nil, false},
	} {
		got, found := s.ScopeFor(tc.agent, tc.user)
		if !slices.Equal(got, tc.want) || found != tc.found {
			t.Errorf("ScopeFor(%q, %q) = %q, %v; want %q, %v", tc.agent, tc.user, got, found, tc.want, tc.found)
		}
	}
}

// TestScopesRefusals: each mistake is a load error naming the file, the line and what is wrong.
func TestScopesRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, section string
		line          int
		msg           string
	}{
		{"both", "scopes:\n  static: {bot: []}\n  url: https://s.example/x\n", 6, "both static and url"},
		{"neither", "scopes:\n  actions: [t.op]\n", 4, "neither static nor url"},
		{"not a mapping", "scopes: [a]\n", 4, "scopes is a list"},
		{"unknown key", "scopes:\n  static: {}\n  ttl: 2s\n", 6, `unknown key "ttl" in scopes`},
		{"timeout with static", "scopes:\n  static: {bot: []}\n  timeout: 2s\n", 6, "scopes.timeout without url"},
		{"bad pattern", "scopes:\n  static:\n    bot: [\"a:**:b\"]\n", 6, `bad resource pattern "a:**:b" in scopes.static."bot"`},
		{"empty pattern", "scopes:\n  static:\n    bot: [\"\"]\n", 6, `bad resource pattern "" in scopes.static."bot": empty pattern`},
		{"not a list", "scopes:\n  static:\n    bot: \"a:1\"\n", 6, `scopes.static."bot" is string "a:1"`},
		{"null list", "scopes:\n  static:\n    bot:\n", 6, `scopes.static."bot" is null`},
		{"number pattern", "scopes:\n  static:\n    bot: [7]\n", 6, "entry of scopes.static"},
		{"bad principal", "scopes:\n  static:\n    \"bot/\": []\n", 6, `bad principal "bot/"`},
		{"empty agent", "scopes:\n  static:\n    \"/alice\": []\n", 6, `bad principal "/alice"`},
		{"http off loopback", "scopes:\n  url: http://scopes.internal/x\n", 5, "not loopback"},
		{"ftp", "scopes:\n  url: ftp://scopes.internal/x\n", 5, `scheme "ftp"`},
		{"relative", "scopes:\n  url: /scope\n", 5, "bad scopes.url"},
		{"credentials", "scopes:\n  url: https://u:p@scopes.internal/x\n", 5, "holds credentials"},
		{"timeout too long", "scopes:\n  url: https://s.example/x\n  timeout: 31s\n", 6, "expected from 100ms to 30s"},
		{"timeout too short", "scopes:\n  url: https://s.example/x\n  timeout: 10ms\n", 6, "expected from 100ms to 30s"},
		{"bare timeout", "scopes:\n  url: https://s.example/x\n  timeout: 2\n", 6, "bare number"},
		{"bad action pattern", "scopes:\n  static: {}\n  actions: [\"crm..x\"]\n", 6, "bad entry"},
		{"empty actions", "scopes:\n  static: {}\n  actions: []\n", 6, "empty scopes.actions"},
	} {
		_, err := policy.Parse("p.yaml", []byte(scopesBase+tc.section))
		var pe *policy.Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: Parse = %v, want a *policy.Error", tc.name, err)
			continue
		}
		if pe.File != "p.yaml" || pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) {
			t.Errorf("%s: Parse = %v (line %d), want line %d and %q", tc.name, err, pe.Line, tc.line, tc.msg)
		}
	}
}

// TestScopesHash: the section is part of the policy hash, and each of its parts counts; a
// policy without it hashes as it did before the section existed.
func TestScopesHash(t *testing.T) {
	t.Parallel()
	hash := func(section string) string {
		t.Helper()
		p, err := policy.Parse("p.yaml", []byte(scopesBase+section))
		if err != nil {
			t.Fatalf("Parse(%q): %v", section, err)
		}
		return p.Hash
	}
	seen := map[string]string{}
	for _, section := range []string{
		"",
		"scopes:\n  static: {}\n",
		"scopes:\n  static: {bot: []}\n",
		"scopes:\n  static: {bot: [\"a:1\"]}\n",
		"scopes:\n  static: {bot: [\"a:2\"]}\n",
		"scopes:\n  static: {bot/alice: [\"a:1\"]}\n",
		"scopes:\n  static: {bot: [\"a:1\"]}\n  actions: [t.op]\n",
		"scopes:\n  url: https://s.example/x\n",
		"scopes:\n  url: https://s.example/y\n",
		"scopes:\n  url: https://s.example/x\n  timeout: 3s\n",
	} {
		h := hash(section)
		if other, dup := seen[h]; dup {
			t.Errorf("%q hashes like %q", section, other)
		}
		seen[h] = section
	}
	if hash("scopes:\n  url: https://s.example/x\n") != hash("scopes:\n  url: https://s.example/x\n  timeout: 2s\n") {
		t.Error("the default timeout written out changes the hash")
	}
}
