package metrics

import (
	"cmp"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// BudgetLevel is how much of one budget is consumed, for the gauge
// latch_budget_consumption_ratio: Kind is "grant", "delegation" or "action", Budget the grant's
// or delegation's id or the action's name (never the principal an action's budget is kept for),
// Metric the budget's metric and Ratio consumed / limit (1 for a limit of 0).
type BudgetLevel struct {
	Kind, Budget, Metric string
	Ratio                float64
}

// budgetGauge is the gauge of budget consumption: the levels SetBudgets last gave, emitted at
// scrape as they are.
type budgetGauge struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	last []BudgetLevel
}

func newBudgetGauge() *budgetGauge {
	return &budgetGauge{desc: prometheus.NewDesc("latch_budget_consumption_ratio",
		"How much of each budget in force is consumed in its rolling window (consumed / limit), by kind (grant, delegation, action), budget (the grant's or delegation's id, or the action's name: the highest ratio over the principals an action's budget is kept for) and metric.",
		[]string{"kind", "budget", "metric"}, nil)}
}

func (b *budgetGauge) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

func (b *budgetGauge) Collect(ch chan<- prometheus.Metric) {
	b.mu.Lock()
	last := b.last
	b.mu.Unlock()
	for _, l := range last {
		ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, l.Ratio, l.Kind, l.Budget, l.Metric)
	}
}

// SetBudgets replaces the series of latch_budget_consumption_ratio with levels (latch serve
// reads them from the store every --budget-refresh; a program reads them as it likes). A budget
// no longer given has no series from the next scrape on.
//
// Its labels are bounded as every label of the sink is. Levels with the same kind, budget and
// metric are one series, at their highest ratio: an action's budget is kept per principal, and
// the series is the action's, not each principal's. An action name the sink's policy does not
// list is LabelUnlisted; a metric is "count" or an argument's name, which the policy lists too.
// A policy grant's id and an action's name are as many as the policy says; delegations are as many as are live, so at most MaxLabelValues of them are series of
// their own — those most consumed — and the rest one series whose budget is LabelOther, at the
// highest ratio among them. A kind other than grant, delegation or action is dropped.
func (s *Sink) SetBudgets(levels []BudgetLevel) {
	type key struct{ kind, budget, metric string }
	agg := map[key]float64{}
	var dels []BudgetLevel
	for _, l := range levels {
		switch l.Kind {
		case "grant":
		case "action":
			l.Budget = s.action(l.Budget)
		case "delegation":
			dels = append(dels, l)
			continue
		default:
			continue
		}
		k := key{l.Kind, l.Budget, s.bounded("metric", l.Metric, l.Metric != "" && utf8.ValidString(l.Metric))}
		if r, ok := agg[k]; !ok || l.Ratio > r {
			agg[k] = l.Ratio
		}
	}
	// The delegations most consumed keep series of their own.
	slices.SortStableFunc(dels, func(x, y BudgetLevel) int { return cmp.Compare(y.Ratio, x.Ratio) })
	own := map[string]bool{}
	for _, l := range dels {
		if !own[l.Budget] && len(own) < MaxLabelValues {
			own[l.Budget] = true
		}
		if !own[l.Budget] {
			l.Budget = LabelOther
		}
		k := key{l.Kind, l.Budget, s.bounded("metric", l.Metric, l.Metric != "" && utf8.ValidString(l.Metric))}
		if r, ok := agg[k]; !ok || l.Ratio > r {
			agg[k] = l.Ratio
		}
	}
	out := make([]BudgetLevel, 0, len(agg))
	for k, r := range agg {
		out = append(out, BudgetLevel{Kind: k.kind, Budget: k.budget, Metric: k.metric, Ratio: r})
	}
	slices.SortFunc(out, func(x, y BudgetLevel) int {
		return cmp.Or(cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Budget, y.Budget), cmp.Compare(x.Metric, y.Metric))
	})
	s.budgets.mu.Lock()
	s.budgets.last = out
	s.budgets.mu.Unlock()
}
