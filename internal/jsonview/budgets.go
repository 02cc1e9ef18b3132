package jsonview

// What a budget belongs to (Budget.Kind).
const (
	BudgetOfGrant      = "grant"      // a policy grant's budget, shared by its holders and everything delegated beneath it
	BudgetOfDelegation = "delegation" // a delegation's budget
	BudgetOfEnvelope   = "envelope"   // a break-glass envelope's budget, shared by every grant opened in it
	BudgetOfAction     = "action"     // an action's own budget, kept per principal
)

// Budget is one budget in force and how much of it is consumed: the charges held within its
// rolling window, up to the moment it was read. Budget is the id every charge against it names
// (the grant's or delegation's id; for an action's own budget "action:NAME:PER:WHO"); Kind says
// what it belongs to — the grant or delegation Grant, or Action's budget for the principal Who
// (Per: agent, user or principal). Remaining is Limit − Consumed, never below 0; Ratio is
// Consumed / Limit (1 for a limit of 0, which admits nothing). Held lists every charge that
// counts, oldest first, and why it is still held.
//
// An operator sees what remains; a refused caller is never told (that would be an oracle).
type Budget struct {
	Budget        string  `json:"budget"`
	Kind          string  `json:"kind"`
	Grant         *string `json:"grant"`
	Action        *string `json:"action"`
	Per           *string `json:"per"`
	Who           *string `json:"who"`
	Metric        string  `json:"metric"`
	Limit         int64   `json:"limit"`
	Window        string  `json:"window"` // ISO 8601, as a policy writes it: PT24H, P30D
	WindowSeconds int64   `json:"window_seconds"`
	Consumed      int64   `json:"consumed"`
	Remaining     int64   `json:"remaining"`
	Ratio         float64 `json:"ratio"`
	Held          []Held  `json:"held"`
}

// Held is one charge a budget holds: Amount charged when EffectKey's attempt Attempt (action
// ActionID) was reserved at ConsumedAt. State is the effect's state now (executing, committed,
// ambiguous; null when its record is gone). NeedsPerson says the charge stays held until a
// person resolves the effect (it is ambiguous, or its lease lapsed with no outcome): a charge is
// released only when its effect becomes failed. Why says so in words.
type Held struct {
	EffectKey   string  `json:"effect_key"`
	Attempt     int     `json:"attempt"`
	ActionID    *string `json:"action_id"`
	Amount      int64   `json:"amount"`
	ConsumedAt  *string `json:"consumed_at"`
	State       *string `json:"state"`
	NeedsPerson bool    `json:"needs_person"`
	Why         string  `json:"why"`
}

// GrantInspection is what `latch inspect --grant` shows of one grant: a policy grant (Kind
// grant) or a delegation (Kind delegation, beneath Parent); whether it can decide a call now
// (Live, and when not, NotLive: the refusal's reason word and why); and its budgets with what
// each has consumed and holds. Budgets is empty for a grant that declares none.
type GrantInspection struct {
	GrantID   string    `json:"grant_id"`
	Kind      string    `json:"kind"`
	Parent    *string   `json:"parent"`
	Subject   Principal `json:"subject"`
	Actions   []string  `json:"actions"`
	ExpiresAt *string   `json:"expires_at"`
	Live      bool      `json:"live"`
	NotLive   *string   `json:"not_live"`
	Budgets   []Budget  `json:"budgets"`
}
