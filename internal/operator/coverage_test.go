package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// coveragePolicy has rules that fire, a rule that never does, a bare decision that decides, an
// action never called and an effect template that never produces a key.
const coveragePolicy = `schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{id}"
    rules:
      - when: { amount_lte: 1000 }
        decision: allow
      - when: { amount_lte: 50000 }
        decision: approve
      - when: { amount_gte: 1000000 }
        decision: deny
  email.send:
    effect: "email:{to}"
    decision: allow
  payout.send:
    effect: "payout:{id}"
    decision: allow
    budgets:
      - {metric: count, limit: 1, window: P1D, per: agent}
  repo.delete:
    decision: deny
  report.export:
    effect: "export:{name}"
    decision: allow
`

// coverageChain records a known chain on a fresh store of backend and returns its URL, the
// policy and the instant that splits the chain into an early and a late half.
func coverageChain(t *testing.T, backend string) (string, *policy.Policy, time.Time) {
	t.Helper()
	url := testdb.URL(t, backend, "operator_coverage")
	dir := t.TempDir()
	path := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(path, []byte(coveragePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: path, StoreURL: url, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot", User: "u1"})
	call := func(ctx context.Context, action string, args map[string]any) error {
		b, _ := json.Marshal(args)
		_, err := g.Execute(ctx, &latch.Call{Action: action, Arguments: b}, func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
		return err
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Early: two refunds rule[0] allows, one email.
	must(call(ctx, "refund.issue", map[string]any{"id": "o1", "amount": 500}))
	must(call(ctx, "refund.issue", map[string]any{"id": "o2", "amount": 700}))
	must(call(ctx, "email.send", map[string]any{"to": "a@example.com"}))
	split := now.Add(30 * time.Minute)
	now = now.Add(time.Hour)
	// Late: a refund rule[1] holds for approval and nobody answers (no receipt: its events
	// count); another granted and made again with its approval (counted once, by its receipt);
	// one no rule matches; a payout the budget refuses after its decision allowed it; an
	// unlisted action; an email still executing.
	var ar *latch.ApprovalRequiredError
	if err := call(ctx, "refund.issue", map[string]any{"id": "o3", "amount": 20000}); !errors.As(err, &ar) {
		t.Fatalf("refund o3 = %v, want approval required", err)
	}
	if err := call(ctx, "refund.issue", map[string]any{"id": "o4", "amount": 30000}); !errors.As(err, &ar) {
		t.Fatalf("refund o4 = %v, want approval required", err)
	}
	if _, err := g.Approve(t.Context(), ar.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	must(call(latch.WithApproval(ctx, ar.ApprovalID), "refund.issue", map[string]any{"id": "o4", "amount": 30000}))
	if err := call(ctx, "refund.issue", map[string]any{"id": "o5", "amount": 600000}); !errors.Is(err, latch.ErrDenied) {
		t.Fatalf("refund o5 = %v, want denied", err)
	}
	must(call(ctx, "payout.send", map[string]any{"id": "p1"}))
	if err := call(ctx, "payout.send", map[string]any{"id": "p2"}); err == nil {
		t.Fatal("payout p2 ran past its budget")
	}
	if err := call(ctx, "wire.transfer", map[string]any{"id": "w1"}); !errors.Is(err, latch.ErrDenied) {
		t.Fatalf("wire.transfer = %v, want denied", err)
	}
	// An email begun and not finished: no receipt yet, its events count.
	if _, err := g.Begin(ctx, &latch.Call{Action: "email.send", Arguments: json.RawMessage(`{"to":"b@example.com"}`)}); err != nil {
		t.Fatal(err)
	}
	// A call decided under another policy: not attributed to this one's rules.
	other := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(other, []byte(coveragePolicy+"  extra.action:\n    decision: allow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g2, err := latch.Open(t.Context(), &latch.Config{PolicyPath: other, StoreURL: url, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	b, _ := json.Marshal(map[string]any{"id": "o9", "amount": 1})
	if _, err := g2.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: b}, func(context.Context, json.RawMessage) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	return url, g.Policy(), split
}

// TestCoverage: on a known chain, Coverage counts each rule's calls — a request nobody answered
// from its events, a request made again with its approval once — and lists exactly the rules
// that never fired, the actions never called and the effect templates that never produced a key;
// calls under another policy are counted apart; --since keeps the later calls only. On SQLite and
// Postgres alike.
func TestCoverage(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			url, pol, split := coverageChain(t, backend)
			st, err := openStore(t, url)
			if err != nil {
				t.Fatal(err)
			}
			op, err := operator.New(&operator.Config{Store: st, Policy: pol, Now: func() time.Time { return split.Add(2 * time.Hour) }})
			if err != nil {
				t.Fatal(err)
			}
			got, err := op.Coverage(t.Context(), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			rule := func(action, r string, line int, d string, n int) jsonview.CoverageRule {
				return jsonview.CoverageRule{Action: action, Rule: r, Line: line, Decision: d, Calls: n}
			}
			if got.Calls != 10 || got.OtherPolicies != 1 {
				t.Errorf("calls = %d, other_policies = %d, want 10 and 1", got.Calls, got.OtherPolicies)
			}
			wantNever := []jsonview.CoverageRule{
				rule("refund.issue", "rule[2]", 10, "deny", 0),
				rule("repo.delete", "decision", 20, "deny", 0),
				rule("report.export", "decision", 22, "allow", 0),
			}
			if d := cmp.Diff(wantNever, got.NeverFired); d != "" {
				t.Errorf("never_fired (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]string{"repo.delete", "report.export"}, got.NeverCalled); d != "" {
				t.Errorf("never_called (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]string{"report.export"}, got.TemplatesWithoutKey); d != "" {
				t.Errorf("templates_without_key (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]jsonview.CoverageCount{{Name: "wire.transfer", Count: 1}}, got.Unlisted); d != "" {
				t.Errorf("unlisted (-want +got):\n%s", d)
			}
			byName := map[string]jsonview.CoverageAction{}
			for _, a := range got.Actions {
				byName[a.Action] = a
			}
			refund := byName["refund.issue"]
			wantRules := []jsonview.CoverageRule{
				rule("refund.issue", "rule[0]", 6, "allow", 2),
				rule("refund.issue", "rule[1]", 8, "approve", 2),
				rule("refund.issue", "rule[2]", 10, "deny", 0),
			}
			if d := cmp.Diff(wantRules, refund.Rules); d != "" {
				t.Errorf("refund.issue rules (-want +got):\n%s", d)
			}
			if refund.Calls != 5 || refund.NoMatchingRule != 1 || refund.EffectKeys != 5 || refund.Effect == nil || *refund.Effect != "refund:{id}" {
				t.Errorf("refund.issue = %+v, want 5 calls, 1 without a matching rule, 5 effect keys", refund)
			}
			if email := byName["email.send"]; email.Rules[0].Calls != 2 || email.EffectKeys != 2 {
				t.Errorf("email.send = %+v, want 2 calls its decision decided (one finished, one begun) with 2 effect keys", email)
			}
			payout := byName["payout.send"]
			if d := cmp.Diff([]jsonview.CoverageCount{{Name: "budget_exhausted", Count: 1}}, payout.OtherReasons); d != "" || payout.Rules[0].Calls != 1 {
				t.Errorf("payout.send = %+v, want one call its decision decided and one the budget refused (%s)", payout, d)
			}

			late, err := op.Coverage(t.Context(), split)
			if err != nil {
				t.Fatal(err)
			}
			if late.Calls != 7 || late.Since == nil {
				t.Errorf("since %v: calls = %d (since %v), want the 7 later calls", split, late.Calls, late.Since)
			}
			var lateNever []string
			for _, r := range late.NeverFired {
				lateNever = append(lateNever, r.Action+" "+r.Rule)
			}
			want := []string{"refund.issue rule[0]", "refund.issue rule[2]", "repo.delete decision", "report.export decision"}
			if d := cmp.Diff(want, lateNever); d != "" {
				t.Errorf("since %v: never_fired (-want +got):\n%s", split, d)
			}
		})
	}
}

// TestCoverageNeedsPolicy: coverage is of a policy; without one it says so.
func TestCoverageNeedsPolicy(t *testing.T) {
	t.Parallel()
	st, err := openStore(t, testdb.URL(t, "sqlite", "operator_coverage"))
	if err != nil {
		t.Fatal(err)
	}
	op, err := operator.New(&operator.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Coverage(t.Context(), time.Time{}); !errors.Is(err, operator.ErrNoPolicy) {
		t.Errorf("Coverage without a policy = %v, want ErrNoPolicy", err)
	}
}

// openStore opens url for the test's lifetime.
func openStore(t *testing.T, url string) (store.Store, error) {
	t.Helper()
	st, err := store.Open(t.Context(), url, nil)
	if err == nil {
		t.Cleanup(func() { st.Close() })
	}
	return st, err
}
