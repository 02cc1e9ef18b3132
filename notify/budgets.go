package notify

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
)

// BudgetLevel is how much of one budget is consumed now: Budget is the id its charges name (a
// grant's or delegation's id, or "action:NAME:PER:WHO" for an action's budget kept for one
// principal), Kind grant, delegation or action, Consumed of Limit within the rolling Window
// (ISO 8601, as the policy writes it), Ratio consumed / limit.
type BudgetLevel struct {
	Budget, Kind, Metric string
	Consumed, Limit      int64
	Window               string
	Ratio                float64
}

// Budgets alerts (KindBudgetThreshold) on each budget of levels whose Ratio has reached
// Config.BudgetShare since the notifier last saw it below — or that is there when first seen:
// once per crossing. A budget that falls below the share (its charges left the window, or were
// released) and reaches it again is a new crossing and a new alert. A budget absent from levels
// is forgotten. latch serve calls it every --budget-refresh with every budget in force; it never
// blocks. With no BudgetShare it does nothing.
func (n *Notifier) Budgets(levels []BudgetLevel) {
	share := n.cfg.BudgetShare
	if share <= 0 {
		return
	}
	now := n.cfg.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	seen := make(map[[2]string]bool, len(levels))
	for _, l := range levels {
		k := [2]string{l.Budget, l.Metric}
		seen[k] = true
		above := l.Ratio >= share
		if above && !n.above[k] {
			n.crossings++
			n.queue(budgetAlert(l, share, strconv.FormatInt(now.UnixMilli(), 10)+"."+strconv.FormatInt(n.crossings, 10), now.UTC().Format(receipt.TimeFormat)))
		}
		n.above[k] = above
	}
	for k := range n.above {
		if !seen[k] {
			delete(n.above, k)
		}
	}
}

// budgetAlert is the alert of l's crossing share, seen at at; seen is its part of the delivery id.
func budgetAlert(l BudgetLevel, share float64, seen, at string) *Alert {
	payload, _ := json.Marshal(map[string]any{"budget": l.Budget, "kind": l.Kind, "metric": l.Metric, "consumed": l.Consumed,
		"limit": l.Limit, "window": l.Window, "ratio": l.Ratio, "share": share}) // strings and numbers always encode
	a := &Alert{Alert: KindBudgetThreshold, At: at, Payload: payload,
		delivery: "budget:" + l.Budget + ":" + l.Metric + ":" + seen}
	// The budget id of an action's budget names the principal it is kept for, which a caller's
	// credential chose; every value is marked, as in the other alerts.
	a.render = func(q func(string) string) string {
		return fmt.Sprintf("Budget %s (%s %s) is %s consumed: %d of %d within %s; see latch budgets",
			q(l.Budget), q(l.Kind), q(l.Metric), strconv.FormatFloat(100*l.Ratio, 'f', 0, 64)+"%", l.Consumed, l.Limit, q(l.Window))
	}
	a.Text = a.render(safetext.Quote)
	return a
}
