package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/latchkit/latch/canon"
	"golang.org/x/tools/txtar"
)

// FuzzParse asserts properties of Parse on arbitrary input: it never panics; every error is an
// *Error naming the file and a line; a policy parses to the same hash twice and again after a
// round trip through its normalized form; and every listed action evaluates to a valid
// decision and reason without arguments.
func FuzzParse(f *testing.F) {
	for _, file := range corpusFiles(f) {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			f.Fatal(err)
		}
		if src, ok := archiveFile(ar, "policy.yaml"); ok {
			f.Add(src)
		}
	}
	f.Add([]byte(hashBase))
	f.Add([]byte(""))
	f.Add([]byte("schema: latch.policy/v1\nactions:\n  a: &x {decision: allow}\n  b: *x\n"))
	f.Add([]byte("schema: latch.policy/v1\nactions:\n  a:\n    effect: \"k\\x7f\\u2028\\U0001F600{id}\"\n    rules:\n      - when: {\"s\\teq_eq\": \"\\0\", o_eq: {\"<<\": [null]}}\n        decision: approve\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error %T %v, want *Error", err, err)
			}
			if pe.File != "fuzz.yaml" || pe.Line < 1 || pe.Column < 0 || pe.Msg == "" {
				t.Fatalf("Parse error %#v, want File fuzz.yaml, Line >= 1 and a message", pe)
			}
			return
		}
		again, err := Parse("fuzz.yaml", data)
		if err != nil || again.Hash != p.Hash {
			t.Fatalf("second Parse = %v, %v; want hash %s", again, err, p.Hash)
		}
		if src, ok := normalizedYAML(t, p); ok {
			rt, err := Parse("roundtrip.yaml", src)
			if err != nil {
				t.Fatalf("Parse(normalized form %s) = %v", src, err)
			}
			if rt.Hash != p.Hash {
				t.Fatalf("normalized form %s hashes to %s, want %s", src, rt.Hash, p.Hash)
			}
		}
		for name, a := range p.Actions {
			ev := p.Evaluate(name, map[string]any{})
			if !ev.Decision.Valid() || !validReason(ev.Reason, len(a.Rules)) || len(ev.Trace) > len(a.Rules) {
				t.Fatalf("Evaluate(%q, {}) = %+v, want a valid decision and reason", name, ev)
			}
			// With no arguments, an action that requires any is denied missing_argument naming
			// its first requirement, and one that requires none never is.
			reqs := a.Requirements()
			switch {
			case len(reqs) > 0 && (ev.Decision != Deny || ev.Reason != ReasonMissingArgument || ev.Arguments.Argument != reqs[0].Argument):
				t.Fatalf("Evaluate(%q, {}) = %+v, want deny missing_argument %q", name, ev, reqs[0].Argument)
			case len(reqs) == 0 && ev.Reason == ReasonMissingArgument:
				t.Fatalf("Evaluate(%q, {}) = %+v with no requirements", name, ev)
			}
		}
		if ev := p.Evaluate("\x00not.listed", nil); ev.Decision != Deny || ev.Reason != ReasonUnknownAction {
			t.Fatalf("Evaluate(unlisted) = %+v, want deny unknown_action", ev)
		}
		for _, w := range p.Warnings() {
			if p.Actions[w.Action] == nil || w.Msg == "" {
				t.Fatalf("Warning %+v names no action", w)
			}
		}
	})
}

func validReason(r string, rules int) bool {
	switch r {
	case ReasonDecision, ReasonNoMatchingRule, ReasonMissingArgument, ReasonInvalidArguments:
		return true
	}
	s, ok := strings.CutPrefix(r, "rule[")
	if !ok || !strings.HasSuffix(s, "]") {
		return false
	}
	i, err := strconv.Atoi(strings.TrimSuffix(s, "]"))
	return err == nil && i >= 0 && i < rules && r == fmt.Sprintf("rule[%d]", i)
}

// normalizedYAML writes the policy's normalized form back as a policy document: canonical JSON
// (which is YAML) with the structural nulls left out and non-ASCII escaped so that the YAML
// reader cannot fold it. ok is false when a string is too long for a YAML flow key.
func normalizedYAML(t *testing.T, p *Policy) ([]byte, bool) {
	t.Helper()
	n := Normalize(p)
	dropNulls(n)
	for _, a := range n["actions"].(map[string]any) {
		a := a.(map[string]any)
		dropNulls(a)
		if rules, ok := a["rules"].([]any); ok {
			for _, r := range rules {
				dropNulls(r.(map[string]any))
			}
		}
	}
	if au, ok := n["authority"].(map[string]any); ok {
		envelopes, _ := au["break_glass"].([]any)
		for _, g := range append(au["grants"].([]any), envelopes...) {
			g := g.(map[string]any)
			dropNulls(g)
			dropNulls(g["subject"].(map[string]any))
		}
	}
	b, err := canon.Marshal(n)
	if err != nil {
		t.Fatalf("canon.Marshal(Normalize(p)) = %v", err)
	}
	var out strings.Builder
	run := 0
	for _, r := range string(b) {
		if r == '"' {
			run = 0
		} else if run++; run > 512 {
			return nil, false
		}
		switch {
		case r == 0x7f:
			out.WriteString(`\x7f`) // canonical JSON leaves DEL raw; a policy file may not
		case r < utf8.RuneSelf:
			out.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			fmt.Fprintf(&out, `\U%08x`, r)
		}
	}
	return []byte(out.String()), true
}

func dropNulls(m map[string]any) {
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
}
