package policy

import "time"

// Budget is one entry of a grant's or an action's `budgets:` list (docs/budgets.md): at most
// Limit of Metric within any rolling Window.
type Budget struct {
	// Metric is BudgetCount (one per call) or the name of an integer argument, whose values
	// are summed.
	Metric string
	Limit  int64         // ≥ 0
	Window time.Duration // > 0
	// Per is set on an action's own budget and says whose calls share it: BudgetPerAgent,
	// BudgetPerUser or BudgetPerPrincipal. It is "" on a grant's budget, which the grant's
	// holders share.
	Per string
	Pos Position // of the budget's mapping
}

// Metric and per values of a Budget.
const (
	BudgetCount        = "count"
	BudgetPerAgent     = "agent"
	BudgetPerUser      = "user"
	BudgetPerPrincipal = "principal"
)

// Envelope is one entry of authority.break_glass (docs/authority.md): the widest grant a
// break-glass opening may create, and for how long at most. An envelope decides no call on its
// own; `latch break-glass` opens a recorded, expiring, revocable delegation inside it.
type Envelope struct {
	Grant  // the envelope's shape; Delegable and ExpiresAt are never set
	MaxTTL time.Duration
}

// Scopes is the policy's `scopes:` section (docs/scopes.md): where the resources each
// principal is assigned come from, when no scope provider is given in code.
type Scopes struct {
	// Static maps a principal ("agent" or "agent/user") to its resource patterns.
	Static map[string][]string
	// URL, when set, is asked for a principal's scope on each call.
	URL     string
	Timeout time.Duration // with URL: how long a call waits for the answer (default DefaultScopeTimeout)
	// Actions are the action-name patterns the section applies to; nil means every action.
	Actions []string
	Pos     Position // of the scopes key
}
