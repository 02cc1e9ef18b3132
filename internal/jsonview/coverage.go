package jsonview

// Coverage is how much of a policy the recorded calls exercised (operator.Coverage): for each
// action and each of its rules, how many calls it decided, and what was never exercised.
//
// Only the calls decided under this policy (its hash) are attributed: a rule index means
// nothing under another policy, so those calls are counted in other_policies and nowhere else.
type Coverage struct {
	PolicyHash    string  `json:"policy_hash"`
	PolicyVersion *string `json:"policy_version"`
	// Since is where the window starts (null: every recorded call); Until is when it was read.
	Since *string `json:"since"`
	Until *string `json:"until"`
	// Calls counts the calls decided under this policy in the window, listed actions or not.
	Calls int `json:"calls"`
	// OtherPolicies counts the calls in the window decided under another policy.
	OtherPolicies int `json:"other_policies"`
	// Actions is every action the policy lists, by name.
	Actions []CoverageAction `json:"actions"`
	// NeverFired lists each rule (or bare decision) that decided no call, in action then rule
	// order.
	NeverFired []CoverageRule `json:"never_fired"`
	// NeverCalled lists the actions no call named.
	NeverCalled []string `json:"never_called"`
	// TemplatesWithoutKey lists the actions with an effect template that produced no effect
	// key for any call.
	TemplatesWithoutKey []string `json:"templates_without_key"`
	// Unlisted counts the calls to actions the policy does not list (decided unknown_action),
	// by action name.
	Unlisted []CoverageCount `json:"unlisted"`
}

// CoverageAction is one action of the policy and the calls that named it.
type CoverageAction struct {
	Action string `json:"action"`
	// Calls counts every call that named the action, whatever decided it.
	Calls int `json:"calls"`
	// Rules are the action's rules in order, or its bare decision as one entry.
	Rules []CoverageRule `json:"rules"`
	// NoMatchingRule counts the calls no rule matched (denied no_matching_rule).
	NoMatchingRule int `json:"no_matching_rule"`
	// OtherReasons counts the calls decided by something other than a rule, by reason: their
	// arguments (missing_argument, invalid_arguments), or a refusal after the policy's decision
	// (authority, budget, scope, precondition) that the record names instead of the rule.
	OtherReasons []CoverageCount `json:"other_reasons"`
	// Effect is the action's effect key template; null when it has none.
	Effect *string `json:"effect"`
	// EffectKeys counts the calls that recorded an effect key.
	EffectKeys int `json:"effect_keys"`
}

// CoverageRule is one rule of an action, or its bare decision (rule "decision"), and how many
// calls it decided.
type CoverageRule struct {
	Action   string `json:"action"`
	Rule     string `json:"rule"` // the reason it records: rule[i], or decision
	Line     int    `json:"line"` // in the policy file; 0 when unknown
	Decision string `json:"decision"`
	Calls    int    `json:"calls"`
}

// CoverageCount is a count by name (a reason, an action).
type CoverageCount struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}
