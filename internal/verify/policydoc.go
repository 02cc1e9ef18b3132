package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
)

// scenarioPolicy is the policy the scenarios run: the operator's, re-serialized so that G4's
// racer processes can load exactly the same document, authority section included (the
// scenarios propose as a principal a grant names; see grantPrincipal).
type scenarioPolicy struct {
	pol *policy.Policy
	doc []byte // the document pol was parsed from (JSON, which YAML reads)
}

// newScenarioPolicy builds the scenario policy from the operator's and checks that nothing was
// lost on the way: the re-parsed document must normalize to exactly what the operator's does
// (without its authority section when withAuthority is false: G6 leaves it out when no grant can
// cover an unlisted name, so that the refusal it observes is the policy's; and always without
// its gateway and scopes sections and its actions' precondition entries).
func newScenarioPolicy(op *policy.Policy, extra map[string]policy.Decision, withAuthority bool) (*scenarioPolicy, error) {
	doc, err := encodePolicy(op, extra, withAuthority)
	if err != nil {
		return nil, err
	}
	p, err := policy.Parse("latch-verify-scenario.yaml", doc)
	if err != nil {
		return nil, fmt.Errorf("verify: re-parse the scenario policy: %w", err)
	}
	if len(extra) == 0 {
		want := *op
		if !withAuthority {
			want.Authority = nil
		}
		// The gateway section is the operator's upstreams, which no scenario may start: G12
		// gives its scenario a gateway of its own (gateway.go).
		want.Gateway = nil
		// The scopes section names a scope service no scenario may ask (no network), or the
		// operator's principals, which the scenarios do not propose as: G23 gives its guards
		// scope providers of its own (scopes.go).
		want.Scopes = nil
		// An action's precondition entry names a state service no scenario may ask (no
		// network): G16 gives its calls a precondition provider of its own (precondition.go).
		want.Actions = withoutPreconditions(want.Actions)
		a, err := canon.Marshal(policy.Normalize(&want))
		if err != nil {
			return nil, fmt.Errorf("verify: normalize the policy: %w", err)
		}
		b, err := canon.Marshal(policy.Normalize(p))
		if err != nil {
			return nil, fmt.Errorf("verify: normalize the scenario policy: %w", err)
		}
		if !bytes.Equal(a, b) {
			return nil, fmt.Errorf("verify: the scenario policy differs from the operator's:\n%s\n%s", a, b)
		}
		// Who approves a change of the policy is not part of its normal form: compared apart.
		if x, y := op.ApproversFor(policy.PolicyChangeAction), p.ApproversFor(policy.PolicyChangeAction); !slices.Equal(x.Roles, y.Roles) ||
			x.Required != y.Required || x.Verified != y.Verified {
			return nil, fmt.Errorf("verify: the scenario policy's approvers.policy_change differs from the operator's: %+v, %+v", y, x)
		}
	}
	return &scenarioPolicy{pol: p, doc: doc}, nil
}

// encodePolicy writes a latch.policy/v1 document for p's actions (plus extra actions with a bare
// decision) and, when withAuthority is set, its authority section, in enforce mode.
func encodePolicy(p *policy.Policy, extra map[string]policy.Decision, withAuthority bool) ([]byte, error) {
	actions := make(map[string]any, len(p.Actions)+len(extra))
	for name, a := range p.Actions {
		e := map[string]any{}
		if a.Effect != nil {
			e["effect"] = a.Effect.String()
		}
		if a.Resource != nil {
			e["resource"] = a.Resource.String()
		}
		if a.Lease > 0 {
			e["lease"] = a.Lease.String()
		}
		if a.ApprovalTTL > 0 {
			e["approval_ttl"] = a.ApprovalTTL.String()
		}
		if a.MaxAttempts > 0 {
			e["max_attempts"] = a.MaxAttempts
		}
		if a.Arguments != nil {
			e["arguments"] = encodeArguments(a)
		}
		if r := a.Approvers; r != nil {
			e["approvers"] = encodeApproverRule(r)
		}
		if a.Budgets != nil {
			e["budgets"] = encodeBudgets(a.Budgets)
		}
		if len(a.Rules) == 0 {
			e["decision"] = string(a.Decision)
		} else {
			rules := make([]any, len(a.Rules))
			for i, r := range a.Rules {
				rule := map[string]any{"decision": string(r.Decision)}
				if len(r.When) > 0 {
					when := make(map[string]any, len(r.When))
					for _, c := range r.When {
						when[conditionKey(c)] = c.Operand
					}
					rule["when"] = when
				}
				rules[i] = rule
			}
			e["rules"] = rules
		}
		actions[name] = e
	}
	for name, d := range extra {
		actions[name] = map[string]any{"decision": string(d)}
	}
	doc := map[string]any{"schema": policy.Schema, "mode": string(policy.ModeEnforce), "actions": actions}
	if p.Environment != "" {
		doc["environment"] = p.Environment
	}
	if p.Version != "" {
		doc["version"] = p.Version
	}
	if p.Approvers != nil {
		roles := make(map[string]any, len(p.Approvers.Roles))
		for name, r := range p.Approvers.Roles {
			roles[name] = append([]string{}, r.Members...)
		}
		ap := map[string]any{"roles": roles}
		if r := p.Approvers.PolicyChange; r != nil {
			ap["policy_change"] = encodeApproverRule(r)
		}
		doc["approvers"] = ap
	}
	if r := p.Retention; r != nil {
		ret := map[string]any{}
		if r.SettledEffects > 0 {
			ret["settled_effects"] = r.SettledEffects.String() // a Go duration: 2160h0m0s
		}
		doc["retention"] = ret
	}
	if p.Authority != nil && withAuthority {
		doc["authority"] = encodeAuthority(p.Authority)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("verify: encode the scenario policy: %w", err)
	}
	return b, nil
}

// encodeArguments writes an action's arguments section, display hints included.
func encodeArguments(a *policy.Action) map[string]any {
	out := map[string]any{"additional": !a.RefuseAdditional}
	for _, d := range a.Arguments {
		decl := map[string]any{"type": string(d.Type), "optional": d.Optional}
		if d.Min != nil {
			decl["min"] = *d.Min
		}
		if d.Max != nil {
			decl["max"] = *d.Max
		}
		if d.MaxLength > 0 {
			decl["max_length"] = d.MaxLength
		}
		if d.Enum != nil {
			decl["enum"] = d.Enum
		}
		if h := d.Display; h != nil {
			disp := map[string]any{}
			if h.Label != "" {
				disp["label"] = h.Label
			}
			if m := h.Money; m != nil {
				money := map[string]any{"minor_units": m.MinorUnits}
				if m.Currency != "" {
					money["currency"] = m.Currency
				}
				if m.CurrencyArg != "" {
					money["currency_arg"] = m.CurrencyArg
				}
				disp["money"] = money
			}
			decl["display"] = disp
		}
		if ed := d.Editable; ed != nil {
			e := map[string]any{"decrease": ed.Decrease}
			if ed.Min != nil {
				e["min"] = *ed.Min
			}
			decl["editable"] = e
		}
		switch {
		case d.Redact == policy.RedactFull:
			decl["redact"] = true
		case d.Redact != policy.RedactNone:
			decl["redact"] = string(d.Redact)
		case d.RedactSet:
			decl["redact"] = false // said on purpose: kept, so the scenario warns as the operator's does
		}
		out[d.Name] = decl
	}
	return out
}

// encodeAuthority writes an authority section.
func encodeAuthority(a *policy.Authority) map[string]any {
	grants := make([]any, 0, len(a.Grants))
	for _, g := range a.Grants {
		if g != nil {
			e := encodeGrant(g)
			e["id"] = g.ID
			grants = append(grants, e)
		}
	}
	out := map[string]any{"max_delegation_depth": a.MaxDelegationDepth, "grants": grants}
	if len(a.BreakGlass) > 0 {
		envs := make([]any, 0, len(a.BreakGlass))
		for _, env := range a.BreakGlass {
			if env == nil {
				continue
			}
			e := encodeGrant(&env.Grant)
			e["id"], e["max_ttl"] = env.ID, env.MaxTTL.String()
			if env.Openers != nil {
				e["openers"] = env.Openers
			}
			envs = append(envs, e)
		}
		out["break_glass"] = envs
	}
	return out
}

// encodeGrant writes a grant without its id: the form of a delegation's grant document too.
func encodeGrant(g *policy.Grant) map[string]any {
	subject := map[string]any{}
	if g.Subject.Agent != "" {
		subject["agent"] = g.Subject.Agent
	}
	if g.Subject.User != "" {
		subject["user"] = g.Subject.User
	}
	e := map[string]any{"subject": subject, "actions": g.Actions}
	if g.Resources != nil {
		e["resources"] = g.Resources
	}
	if len(g.Constraints) > 0 {
		c := make(map[string]any, len(g.Constraints))
		for _, cond := range g.Constraints {
			c[conditionKey(cond)] = cond.Operand
		}
		e["constraints"] = c
	}
	if g.Environments != nil {
		e["environments"] = g.Environments
	}
	if g.Tasks != nil {
		e["tasks"] = g.Tasks
	}
	if !g.ExpiresAt.IsZero() {
		e["expires_at"] = g.ExpiresAt.Format(time.RFC3339Nano)
	}
	if g.Delegable {
		e["delegable"] = true
	}
	if len(g.Budgets) > 0 { // a child without budgets leaves the key out: an empty list does not parse
		e["budgets"] = encodeBudgets(g.Budgets)
	}
	return e
}

// encodeBudgets writes a budgets list: a grant's (no per) or an action's own.
func encodeBudgets(bs []policy.Budget) []any {
	out := make([]any, len(bs))
	for i, b := range bs {
		m := map[string]any{"metric": b.Metric, "limit": b.Limit, "window": policy.FormatISODuration(b.Window)}
		if b.Per != "" {
			m["per"] = b.Per
		}
		out[i] = m
	}
	return out
}

func conditionKey(c policy.Condition) string {
	if c.Key != "" {
		return c.Key
	}
	return c.Arg + "_" + string(c.Op)
}

// withoutPreconditions returns actions with every precondition entry left out (actions itself
// when none declares one).
func withoutPreconditions(actions map[string]*policy.Action) map[string]*policy.Action {
	var out map[string]*policy.Action
	for name, a := range actions {
		if a == nil || a.Precondition == nil {
			continue
		}
		if out == nil {
			out = make(map[string]*policy.Action, len(actions))
			for k, v := range actions {
				out[k] = v
			}
		}
		c := *a
		c.Precondition = nil
		out[name] = &c
	}
	if out == nil {
		return actions
	}
	return out
}

// encodeApproverRule writes an approvers entry: an action's, or the policy's policy_change rule.
func encodeApproverRule(r *policy.ApproverRule) map[string]any {
	ap := map[string]any{"required": r.Required, "verified": r.Verified}
	if len(r.Roles) > 0 {
		ap["roles"] = r.Roles
	}
	return ap
}
