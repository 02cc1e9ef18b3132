package verify

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
)

// scenarioPolicy is the policy the scenarios run: the operator's, re-serialized so that G4's
// racer processes can load exactly the same document, without its authority section.
//
// The authority section is left out because authority is graded by G8 and G9, and the root
// pipeline does not evaluate authority yet: it fails closed (authority_unreadable) for every call
// of a policy that has one, which would make every other guarantee's control fail. When the
// authority layer lands, the scenarios should keep the section and propose as a principal that a
// grant covers (see runner.principal).
type scenarioPolicy struct {
	pol *policy.Policy
	doc []byte // the document pol was parsed from (JSON, which YAML reads)
}

// newScenarioPolicy builds the scenario policy from the operator's and checks that nothing but
// the authority section was lost on the way: the re-parsed document must normalize to exactly
// what the operator's does.
func newScenarioPolicy(op *policy.Policy, extra map[string]policy.Decision) (*scenarioPolicy, error) {
	doc, err := encodePolicy(op, extra)
	if err != nil {
		return nil, err
	}
	p, err := policy.Parse("latch-verify-scenario.yaml", doc)
	if err != nil {
		return nil, fmt.Errorf("verify: re-parse the scenario policy: %w", err)
	}
	if len(extra) == 0 {
		want := *op
		want.Authority = nil
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
	}
	return &scenarioPolicy{pol: p, doc: doc}, nil
}

// encodePolicy writes a latch.policy/v1 document for p's actions (plus extra actions with a bare
// decision), in enforce mode, without authority.
func encodePolicy(p *policy.Policy, extra map[string]policy.Decision) ([]byte, error) {
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
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("verify: encode the scenario policy: %w", err)
	}
	return b, nil
}

func conditionKey(c policy.Condition) string {
	if c.Key != "" {
		return c.Key
	}
	return c.Arg + "_" + string(c.Op)
}
