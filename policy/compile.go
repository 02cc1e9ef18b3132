package policy

// compiledAction is what Evaluate needs of an action with rules, prepared once at parse time so
// that evaluation does no work that does not depend on the call: operand renderings, type
// sets, membership sets, reason strings.
type compiledAction struct {
	action *Action
	rules  []compiledRule
	nconds int // total conditions, so one allocation holds every result
	schema argSchema
}

type compiledRule struct {
	conds  []precond
	reason string // "rule[i]"
}

func compileAction(a *Action) *compiledAction {
	ca := &compiledAction{action: a, rules: make([]compiledRule, len(a.Rules)), schema: compileSchema(a)}
	for i := range a.Rules {
		r := &a.Rules[i]
		cr := compiledRule{reason: RuleReason(i), conds: make([]precond, len(r.When))}
		for j := range r.When {
			cr.conds[j] = compileCondition(&r.When[j])
		}
		ca.nconds += len(r.When)
		ca.rules[i] = cr
	}
	return ca
}

// fits reports whether ca still describes a (a policy is read-only after Parse, but a caller
// that edits one anyway gets a correct, slower evaluation rather than a stale one).
func (ca *compiledAction) fits(a *Action) bool {
	if ca.action != a || len(ca.rules) != len(a.Rules) || len(ca.schema.order) != len(a.Arguments) || ca.schema.closed != a.RefuseAdditional {
		return false
	}
	for i := range a.Rules {
		if len(ca.rules[i].conds) != len(a.Rules[i].When) {
			return false
		}
	}
	return true
}
