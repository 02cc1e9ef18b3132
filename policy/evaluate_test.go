package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEvaluateNilAndHandBuilt(t *testing.T) {
	t.Parallel()
	var nilPolicy *Policy
	if ev := nilPolicy.Evaluate("a", nil); ev.Decision != Deny || ev.Reason != ReasonUnknownAction {
		t.Errorf("(*Policy)(nil).Evaluate = %+v, want deny unknown_action", ev)
	}
	// A policy built in Go rather than parsed evaluates the same way (without the parse-time
	// preparation), and anything that is not a decision counts as deny.
	when, err := ParseCondition("n_gt", int64(1))
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{Actions: map[string]*Action{
		"a":     {Name: "a", Rules: []Rule{{When: Conditions{when}, Decision: Approve}, {Decision: "bogus"}}},
		"b":     {Name: "b", Decision: ""},
		"c":     {Name: "c", Decision: Allow},
		"empty": {Name: "empty"},
	}}
	tests := []struct {
		action string
		args   map[string]any
		want   Evaluation
	}{
		{"a", map[string]any{"n": int64(2)}, Evaluation{Decision: Approve, Reason: "rule[0]", Trace: []RuleTrace{{0, true, []CondResult{{"n_gt", true, "2 > 1"}}}}}},
		{"a", map[string]any{"n": "2"}, Evaluation{Decision: Deny, Reason: "rule[1]", Trace: []RuleTrace{{0, false, []CondResult{{"n_gt", false, `argument "n" is a string, want an integer`}}}, {1, true, nil}}}},
		// A named argument is required: its absence denies before any rule.
		{"a", nil, Evaluation{Decision: Deny, Reason: "missing_argument", Arguments: ArgumentCheck{
			Reason: "missing_argument", Argument: "n", Pointer: "/n",
			Msg: `argument "n" is required by rule 0 (n_gt) of action "a" and the call does not pass it`}}},
		{"b", nil, Evaluation{Decision: Deny, Reason: "decision"}},
		{"c", nil, Evaluation{Decision: Allow, Reason: "decision"}},
		{"empty", nil, Evaluation{Decision: Deny, Reason: "decision"}},
		{"zzz", nil, Evaluation{Decision: Deny, Reason: "unknown_action"}},
	}
	for _, tt := range tests {
		if got := p.Evaluate(tt.action, tt.args); !cmp.Equal(got, tt.want) {
			t.Errorf("Evaluate(%q, %v) = %+v, want %+v", tt.action, tt.args, got, tt.want)
		}
	}
}

func TestEvaluateParsedMatchesHandBuilt(t *testing.T) {
	t.Parallel()
	parsed := mustParse(t, hashBase)
	hand := &Policy{Actions: parsed.Actions} // same actions, no parse-time preparation
	for _, args := range []map[string]any{
		{"amount": int64(10)},
		{"amount": int64(-10), "currency": "USD", "meta": map[string]any{"tier": "gold"}},
		{"amount": "10", "currency": int64(1), "meta": []any{}},
		nil,
	} {
		got, want := parsed.Evaluate("billing.charge", args), hand.Evaluate("billing.charge", args)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Evaluate(%v) parsed vs hand-built (-hand +parsed):\n%s", args, diff)
		}
	}
}

func TestEvaluateConcurrent(t *testing.T) {
	t.Parallel()
	p := mustParse(t, hashBase)
	done := make(chan Evaluation)
	for i := range 8 {
		go func() {
			var ev Evaluation
			for j := range 200 {
				ev = p.Evaluate("billing.charge", map[string]any{"invoice_id": "inv_1", "amount": int64(i*1000 + j), "currency": "EUR", "meta": map[string]any{"tier": "gold"}})
			}
			done <- ev
		}()
	}
	for range 8 {
		if ev := <-done; ev.Decision != Allow {
			t.Errorf("Evaluate = %+v, want allow", ev)
		}
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `schema: latch.policy/v1
actions:
  has.effect:
    effect: "k:{id}"
    decision: allow
  read.only:
    decision: allow
  denied:
    decision: deny
  rules.deny:
    rules:
      - when: {n_eq: 1}
        decision: deny
      - decision: deny
  rules.mixed:
    rules:
      - when: {n_eq: 1}
        decision: approve
      - when: {n_eq: 2}
        decision: allow
      - decision: deny
  approve.only:
    decision: approve
`)
	want := []Warning{
		{Code: WarnNoEffect, Action: "read.only", Pos: Position{6, 3}, Msg: `action "read.only" has no effect template but may decide allow: without an effect key nothing stops it running twice`},
		{Code: WarnNeverAllowed, Action: "rules.deny", Pos: Position{10, 3}, Msg: `action "rules.deny" can never be allowed or approved: no reachable rule that can match decides allow or approve (write decision: deny if that is the intent)`},
		{Code: WarnNoArguments, Action: "rules.deny", Pos: Position{10, 3}, Msg: `action "rules.deny" tests "n" in its conditions but has no arguments: section; a misspelt name is then caught only when a call arrives (denied missing_argument) — declare the arguments so that loading refuses it`},
		{Code: WarnNoArguments, Action: "rules.mixed", Pos: Position{15, 3}, Msg: `action "rules.mixed" tests "n" in its conditions but has no arguments: section; a misspelt name is then caught only when a call arrives (denied missing_argument) — declare the arguments so that loading refuses it`},
		{Code: WarnNoEffect, Action: "rules.mixed", Pos: Position{15, 3}, Msg: `action "rules.mixed" has no effect template but may decide allow or approve: without an effect key nothing stops it running twice`},
		{Code: WarnNoEffect, Action: "approve.only", Pos: Position{22, 3}, Msg: `action "approve.only" has no effect template but may decide approve: without an effect key nothing stops it running twice`},
	}
	if diff := cmp.Diff(want, p.Warnings()); diff != "" {
		t.Errorf("Warnings mismatch (-want +got):\n%s", diff)
	}
	var nilPolicy *Policy
	if w := nilPolicy.Warnings(); w != nil {
		t.Errorf("(*Policy)(nil).Warnings() = %v, want nil", w)
	}
}
