package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseISODuration(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"P1D", day},
		{"PT24H", day},
		{"P30D", 30 * day},
		{"PT15M", 15 * time.Minute},
		{"PT1S", time.Second},
		{"P1DT12H", 36 * time.Hour},
		{"P2W", 14 * day},
		{"P1W2D", 9 * day},
		{"PT1H30M15S", time.Hour + 30*time.Minute + 15*time.Second},
		{"PT0S", 0},
		{"P36500D", MaxBudgetWindow},
	} {
		got, err := ParseISODuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseISODuration(%q) = %v, %v, want %v", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "starts with P"},
		{"1D", "starts with P"},
		{"24h", "starts with P"},
		{"P", "no amount"},
		{"PT", "no hours, minutes or seconds after T"},
		{"P1M", "years and months"},
		{"P1Y", "years and months"},
		{"PT1.5H", "fractions"},
		{"PT1,5H", "fractions"},
		{"P1H", "needs a T"},
		{"PD", "expected a number"},
		{"P1", "has no unit"},
		{"P1D1W", "not expected here"},
		{"PT1M1H", "not expected here"},
		{"P1DT", "no hours, minutes or seconds after T"},
		{"P870000D", "longer than"},
		{"P9999999999W", "longer than"},
		{"P1DT1HT1M", "a second T"},
		{"P-1D", "expected a number"},
		{"P36501D", "longer than 36500 days"},
		{"P99999999999999999999D", "longer than 36500 days"},
		{"P36500DT1S", "longer than 36500 days"},
		{"p1d", "starts with P"},
	} {
		if _, err := ParseISODuration(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseISODuration(%q) error = %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
}

func TestFormatISODuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{24 * time.Hour, "P1D"},
		{time.Hour, "PT1H"},
		{30 * 24 * time.Hour, "P30D"},
		{36 * time.Hour, "P1DT12H"},
		{90 * time.Second, "PT1M30S"},
		{15 * time.Minute, "PT15M"},
		{time.Second, "PT1S"},
		{1500 * time.Millisecond, "PT1.5S"},
		{0, "PT0S"},
	} {
		if got := FormatISODuration(tc.in); got != tc.want {
			t.Errorf("FormatISODuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzISODuration: whatever ParseISODuration reads, FormatISODuration writes a form it reads
// back to the same duration, and formatting is idempotent.
func FuzzISODuration(f *testing.F) {
	for _, s := range []string{"P1D", "PT24H", "P2W", "P1DT1H1M1S", "PT90M", "P36500D"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseISODuration(s)
		if err != nil {
			return
		}
		out := FormatISODuration(d)
		back, err := ParseISODuration(out)
		if d > 0 && (err != nil || back != d) {
			t.Fatalf("ParseISODuration(%q) = %v; formatted %q reads back as %v, %v", s, d, out, back, err)
		}
		if d > 0 && FormatISODuration(back) != out {
			t.Fatalf("FormatISODuration is not idempotent on %q", out)
		}
	})
}

const budgetPolicy = header + `actions:
  billing.refund:
    effect: "refund:{invoice_id}"
    decision: allow
    budgets:
      - {metric: amount, limit: 50000, window: P1D, per: agent}
authority:
  grants:
    - id: support
      subject: {agent: support-bot}
      actions: [billing.*]
      budgets:
        - {metric: count, limit: 20, window: PT24H}
`

func TestParseBudgets(t *testing.T) {
	t.Parallel()
	p := mustParse(t, budgetPolicy)
	ignorePos := cmpopts.IgnoreFields(Budget{}, "Pos")
	want := []Budget{{Metric: "amount", Limit: 50000, Window: 24 * time.Hour, Per: BudgetPerAgent}}
	if diff := cmp.Diff(want, p.Actions["billing.refund"].Budgets, ignorePos); diff != "" {
		t.Errorf("action budgets (-want +got):\n%s", diff)
	}
	want = []Budget{{Metric: BudgetCount, Limit: 20, Window: 24 * time.Hour}}
	if diff := cmp.Diff(want, p.Authority.Grants[0].Budgets, ignorePos); diff != "" {
		t.Errorf("grant budgets (-want +got):\n%s", diff)
	}
	if pos := p.Authority.Grants[0].Budgets[0].Pos; pos.Line != 14 {
		t.Errorf("grant budget position = %+v, want line 14", pos)
	}

	// A delegation's grant file reads budgets as a policy grant does.
	g, err := ParseGrant("grant.yaml", []byte("subject: {agent: a}\nactions: [x]\nbudgets:\n  - {metric: count, limit: 5, window: PT1H}\n"))
	if err != nil {
		t.Fatalf("ParseGrant = %v", err)
	}
	if diff := cmp.Diff([]Budget{{Metric: BudgetCount, Limit: 5, Window: time.Hour}}, g.Budgets, ignorePos); diff != "" {
		t.Errorf("grant file budgets (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ doc, want string }{
		{"subject: {agent: a}\nactions: [x]\nbudgets:\n  - {metric: count, limit: 5.5, window: PT1H}\n", "grant.yaml:4:28: budgets[0].limit is float 5.5"},
		{"subject: {agent: a}\nactions: [x]\nbudgets:\n  - {metric: count, limit: 5, window: PT1H, per: agent}\n", "grant.yaml:4:45: per in budget 0 in the grant"},
		{"subject: {agent: a}\nactions: [x]\nbudgets: []\n", "grant.yaml:3:10: empty budgets in the grant"},
		{"subject: {agent: a}\nactions: [x]\nbudgets:\n  - {metric: a.b, limit: 5, window: PT1H}\n", "bad metric \"a.b\""},
	} {
		if _, err := ParseGrant("grant.yaml", []byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseGrant(%q) = %v, want an error containing %q", tc.doc, err, tc.want)
		}
	}
}

// TestHashCoversBudgets: a budget is part of what was reviewed, so changing any of its fields
// changes the policy hash; the same window written two ways does not; a policy without budgets
// hashes as it did before budgets existed.
func TestHashCoversBudgets(t *testing.T) {
	t.Parallel()
	base := mustParse(t, budgetPolicy).Hash
	for _, tc := range []struct{ old, new string }{
		{"limit: 50000", "limit: 50001"},
		{"window: P1D, per: agent", "window: P2D, per: agent"},
		{"per: agent", "per: user"},
		{"metric: amount", "metric: count"},
		{"limit: 20", "limit: 21"},
		{"window: PT24H", "window: PT23H"},
		{"metric: count, limit: 20", "metric: n, limit: 20"},
	} {
		if !strings.Contains(budgetPolicy, tc.old) {
			t.Fatalf("%q is not in the policy", tc.old)
		}
		if h := mustParse(t, strings.Replace(budgetPolicy, tc.old, tc.new, 1)).Hash; h == base {
			t.Errorf("changing %q to %q left the hash %s", tc.old, tc.new, h)
		}
	}
	if h := mustParse(t, strings.Replace(budgetPolicy, "window: PT24H", "window: P1D", 1)).Hash; h != base {
		t.Errorf("PT24H and P1D hash differently: %s, %s", base, h)
	}
	without := strings.Replace(strings.Replace(budgetPolicy,
		"    budgets:\n      - {metric: amount, limit: 50000, window: P1D, per: agent}\n", "", 1),
		"      budgets:\n        - {metric: count, limit: 20, window: PT24H}\n", "", 1)
	n := Normalize(mustParse(t, without))
	if _, ok := n["actions"].(map[string]any)["billing.refund"].(map[string]any)["budgets"]; ok {
		t.Error("an action without budgets has a budgets member in the hashed document")
	}
	if _, ok := n["authority"].(map[string]any)["grants"].([]any)[0].(map[string]any)["budgets"]; ok {
		t.Error("a grant without budgets has a budgets member in the hashed document")
	}
}

func TestCheckBudget(t *testing.T) {
	t.Parallel()
	ok := Budget{Metric: BudgetCount, Limit: 0, Window: time.Hour}
	if err := CheckBudget(ok, false); err != nil {
		t.Errorf("CheckBudget(%+v, grant) = %v", ok, err)
	}
	act := ok
	act.Per = BudgetPerPrincipal
	if err := CheckBudget(act, true); err != nil {
		t.Errorf("CheckBudget(%+v, action) = %v", act, err)
	}
	for _, tc := range []struct {
		b         Budget
		forAction bool
		want      string
	}{
		{Budget{Limit: 1, Window: time.Hour}, false, "no metric"},
		{Budget{Metric: "a/b", Limit: 1, Window: time.Hour}, false, "looks like a path"},
		{Budget{Metric: "n", Limit: -1, Window: time.Hour}, false, "negative"},
		{Budget{Metric: "n", Limit: 1}, false, "window PT0S"},
		{Budget{Metric: "n", Limit: 1, Window: time.Millisecond}, false, "window PT0.001S"},
		{Budget{Metric: "n", Limit: 1, Window: MaxBudgetWindow + time.Second}, false, "outside"},
		{Budget{Metric: "n", Limit: 1, Window: time.Hour, Per: "agent"}, false, "per \"agent\" on a grant's budget"},
		{Budget{Metric: "n", Limit: 1, Window: time.Hour}, true, "per \"\""},
		{Budget{Metric: "n", Limit: 1, Window: time.Hour, Per: "team"}, true, "per \"team\""},
	} {
		if err := CheckBudget(tc.b, tc.forAction); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckBudget(%+v, %v) = %v, want an error containing %q", tc.b, tc.forAction, err, tc.want)
		}
	}
}
