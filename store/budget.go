package store

import (
	"context"
	"time"
)

// Charge is one budget charge a reservation makes (docs/budgets.md): Amount of Metric against
// the budget named Budget, whose Limit holds over a rolling Window. The store checks it inside
// the reservation's own transaction — the unreleased charges of (Budget, Metric) consumed within
// (Now − Window, Now], plus Amount, may not exceed Limit — and writes it in that transaction, so
// no check-then-act window exists across processes or hosts.
//
// A charge is held while its effect is executing, committed or ambiguous, and released (a
// compare-and-set on its release time, never a decrement) exactly when its effect becomes
// failed: the executor's NotExecuted, a resolution to failed, a reconcile hook's not_executed.
// A renewal of a failed effect charges again under its new attempt.
type Charge struct {
	// Budget is the budget's id, the same for every charge against it: a grant's id (a policy
	// grant, a delegation's dlg_ id) for a grant's budget; for an action's own budget,
	// ActionBudget(action, per, who).
	Budget string
	Metric string // "count", or the name of the integer argument summed
	Amount int64  // ≥ 0
	Limit  int64  // ≥ 0
	Window time.Duration
}

// ActionBudget is the budget id of an action's own budget kept per principal: per is "agent",
// "user" or "principal", who the agent, the user, or "agent/user".
func ActionBudget(action, per, who string) string {
	return "action:" + action + ":" + per + ":" + who
}

// ChargeRecord is one row of the budget ledger.
type ChargeRecord struct {
	Budget     string
	Metric     string
	Amount     int64
	Limit      int64
	Window     time.Duration
	EffectKey  string
	Attempt    int
	ActionID   string
	ConsumedAt time.Time
	ReleasedAt time.Time // zero while the charge is held
}

// ChargeFilter selects ledger rows: those of Budget (every budget when ""), Metric (every metric
// when ""), consumed at or after Since (all when zero).
type ChargeFilter struct {
	Budget string
	Metric string
	Since  time.Time
	Limit  int // 0 = no limit
}

// BudgetStore is implemented by backends that keep a budget ledger. A guard whose policy declares
// a budget needs it: without it, every budgeted call is refused.
type BudgetStore interface {
	// Charges returns ledger rows, oldest first.
	Charges(ctx context.Context, f ChargeFilter) ([]*ChargeRecord, error)
}
