package metrics_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/latchkit/latch/metrics"
	"github.com/latchkit/latch/policy"
)

// TestBudgetGaugeBounded: the budget gauge has one series per budget the policy names — an
// action's budget kept for ten thousand principals is one series at their highest ratio, an
// action the policy does not list is (unlisted) — and at most MaxLabelValues delegations of
// their own, the most consumed; a budget no longer given has no series at the next scrape.
func TestBudgetGaugeBounded(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(&metrics.Config{Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	levels := []metrics.BudgetLevel{{Kind: "grant", Budget: "ops-billing", Metric: "amount", Ratio: 0.25}}
	for i := range 10000 {
		levels = append(levels, metrics.BudgetLevel{Kind: "action", Budget: "billing.charge", Metric: "count", Ratio: float64(i%9000) / 10000})
		levels = append(levels, metrics.BudgetLevel{Kind: "action", Budget: fmt.Sprintf("made.up.%d", i), Metric: "count", Ratio: 0.5})
	}
	for i := range metrics.MaxLabelValues + 50 {
		levels = append(levels, metrics.BudgetLevel{Kind: "delegation", Budget: fmt.Sprintf("dlg_%04d", i), Metric: "count", Ratio: float64(i) / 1000})
	}
	m.SetBudgets(levels)
	if n := series(t, m)["latch_budget_consumption_ratio"]; n != 3+metrics.MaxLabelValues+1 {
		t.Errorf("latch_budget_consumption_ratio has %d series, want %d (a grant, an action, (unlisted), %d delegations and (other))", n, 3+metrics.MaxLabelValues+1, metrics.MaxLabelValues)
	}
	body := scrape(t, m)
	for _, want := range []string{
		`latch_budget_consumption_ratio{budget="ops-billing",kind="grant",metric="amount"} 0.25`,
		`latch_budget_consumption_ratio{budget="billing.charge",kind="action",metric="count"} 0.8999`,
		`latch_budget_consumption_ratio{budget="(unlisted)",kind="action",metric="count"} 0.5`,
		fmt.Sprintf(`latch_budget_consumption_ratio{budget="dlg_%04d",kind="delegation",metric="count"} %g`, metrics.MaxLabelValues+49, float64(metrics.MaxLabelValues+49)/1000),
		// The least consumed fall into (other), at their highest ratio: dlg_0049.
		`latch_budget_consumption_ratio{budget="(other)",kind="delegation",metric="count"} 0.049`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `budget="dlg_0000"`) {
		t.Errorf("/metrics keeps a series for the least consumed delegation, past MaxLabelValues")
	}
	m.SetBudgets([]metrics.BudgetLevel{{Kind: "grant", Budget: "ops-billing", Metric: "amount", Ratio: 1}})
	if body := scrape(t, m); strings.Contains(body, "billing.charge") || !strings.Contains(body, `budget="ops-billing",kind="grant",metric="amount"} 1`) {
		t.Errorf("after SetBudgets of one grant, /metrics has:\n%s", grep(body, "latch_budget"))
	}
}

func scrape(t *testing.T, m *metrics.Sink) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return string(b)
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
