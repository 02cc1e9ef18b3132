package operator

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// eventPage is how many events Coverage reads at a time.
const eventPage = 1000

// decided is one recorded call as coverage counts it: what it named and what decided it.
type decided struct {
	action, reason, policyHash, effectKey string
}

// Coverage counts, for each action and rule of the operator's policy, the calls it decided
// since from (the zero time: every recorded call), and lists what was never exercised: the
// rules that decided no call, the actions no call named, the effect templates that produced no
// key.
//
// A call is counted once, from its call receipt; a call that has none yet — one that asked for
// an approval and was not made again with it, or one still executing — is counted from its
// policy_evaluated event. A request that was made again with its approval is counted by the
// receipt of that call only. What decided a call is the reason its record names (rule[i],
// decision, no_matching_rule, or a refusal such as budget_exhausted), and only calls decided
// under this policy's hash are attributed; the rest are counted in OtherPolicies.
func (o *Operator) Coverage(ctx context.Context, from time.Time) (jsonview.Coverage, error) {
	pol := o.cfg.Policy
	if pol == nil {
		return jsonview.Coverage{}, ErrNoPolicy
	}
	now := o.cfg.Now()
	calls, err := o.recordedCalls(ctx, from)
	if err != nil {
		return jsonview.Coverage{}, err
	}
	return tallyCoverage(pol, calls, from, now), nil
}

// recordedCalls reads every call decided since from: each call receipt (once per action id),
// then the policy_evaluated events of the actions without one.
func (o *Operator) recordedCalls(ctx context.Context, from time.Time) ([]decided, error) {
	var out []decided
	receipted := map[string]bool{} // action ids with a call receipt
	presented := map[string]bool{} // approval ids a receipted call presented
	for sealed, err := range o.cfg.Store.Receipts(ctx, store.ReceiptFilter{Since: from}) {
		if err != nil {
			return nil, fmt.Errorf("coverage: read receipts: %w", err)
		}
		rc, err := receipt.Parse(sealed.Doc)
		if err != nil {
			return nil, fmt.Errorf("coverage: receipt %d: %w", sealed.Seq, err)
		}
		if !receipt.IsCall(rc.Kind) || (rc.ActionID != "" && receipted[rc.ActionID]) {
			continue // a state change, or a second record of a call already counted
		}
		receipted[rc.ActionID] = true
		if rc.ApprovalID != "" {
			presented[rc.ApprovalID] = true
		}
		out = append(out, decided{action: rc.Action, reason: rc.DecisionReason, policyHash: rc.PolicyHash, effectKey: rc.EffectKey})
	}
	pending, err := o.unreceipted(ctx, from, receipted)
	if err != nil {
		return nil, err
	}
	for _, id := range slices.Sorted(maps.Keys(pending)) {
		p := pending[id]
		if !p.evaluated || slices.ContainsFunc(p.approvals, func(a string) bool { return presented[a] }) {
			continue // never decided, or counted by the receipt of the call that presented its approval
		}
		out = append(out, p.decided)
	}
	return out, nil
}

// pendingCall is what the events say of a call without a receipt.
type pendingCall struct {
	decided
	evaluated bool
	approvals []string
}

// unreceipted reads, page by page, the events since from of the actions without a call receipt.
func (o *Operator) unreceipted(ctx context.Context, from time.Time, receipted map[string]bool) (map[string]*pendingCall, error) {
	pending := map[string]*pendingCall{}
	var after int64
	for {
		evs, err := o.cfg.Store.Events(ctx, store.EventFilter{AfterID: after, Limit: eventPage})
		if err != nil {
			return nil, fmt.Errorf("coverage: read events: %w", err)
		}
		for _, e := range evs {
			after = e.ID
			if e.ActionID == "" || receipted[e.ActionID] || e.Time.Before(from) {
				continue
			}
			p := pending[e.ActionID]
			if p == nil {
				p = &pendingCall{}
				pending[e.ActionID] = p
			}
			if e.ApprovalID != "" {
				p.approvals = append(p.approvals, e.ApprovalID)
			}
			switch e.Kind {
			case store.EventActionProposed:
				var v struct {
					Action string `json:"action"`
				}
				if err := json.Unmarshal(e.Payload, &v); err != nil {
					return nil, fmt.Errorf("coverage: event %d (%s): %w", e.ID, e.Kind, err)
				}
				p.action = v.Action
			case store.EventPolicyEvaluated:
				var v struct {
					Reason     string `json:"reason"`
					PolicyHash string `json:"policy_hash"`
				}
				if err := json.Unmarshal(e.Payload, &v); err != nil {
					return nil, fmt.Errorf("coverage: event %d (%s): %w", e.ID, e.Kind, err)
				}
				p.reason, p.policyHash, p.effectKey, p.evaluated = v.Reason, v.PolicyHash, e.EffectKey, true
			}
		}
		if len(evs) < eventPage {
			return pending, nil
		}
	}
}

// tallyCoverage attributes calls to the actions and rules of pol. It is pure.
func tallyCoverage(pol *policy.Policy, calls []decided, from, now time.Time) jsonview.Coverage {
	out := jsonview.Coverage{
		PolicyHash: pol.Hash, PolicyVersion: jsonview.Str(pol.Version), Since: jsonview.Stamp(from), Until: jsonview.Stamp(now),
		Actions: []jsonview.CoverageAction{}, NeverFired: []jsonview.CoverageRule{}, NeverCalled: []string{},
		TemplatesWithoutKey: []string{}, Unlisted: []jsonview.CoverageCount{},
	}
	index := map[string]int{} // action name → its place in out.Actions
	for i, name := range slices.Sorted(maps.Keys(pol.Actions)) {
		index[name] = i
		out.Actions = append(out.Actions, newCoverageAction(pol.Actions[name]))
	}
	other := make([]map[string]int, len(out.Actions))
	unlisted := map[string]int{}
	for _, c := range calls {
		if c.policyHash != pol.Hash {
			out.OtherPolicies++
			continue
		}
		out.Calls++
		i, listed := index[c.action]
		if !listed {
			unlisted[c.action]++
			continue
		}
		a := &out.Actions[i]
		a.Calls++
		if c.effectKey != "" {
			a.EffectKeys++
		}
		if r := ruleOf(a, c.reason); r != nil {
			r.Calls++
			continue
		}
		if c.reason == policy.ReasonNoMatchingRule {
			a.NoMatchingRule++
			continue
		}
		if other[i] == nil {
			other[i] = map[string]int{}
		}
		other[i][c.reason]++
	}
	for i := range out.Actions {
		a := &out.Actions[i]
		a.OtherReasons = counts(other[i])
		for _, r := range a.Rules {
			if r.Calls == 0 {
				out.NeverFired = append(out.NeverFired, r)
			}
		}
		if a.Calls == 0 {
			out.NeverCalled = append(out.NeverCalled, a.Action)
		}
		if a.Effect != nil && a.EffectKeys == 0 {
			out.TemplatesWithoutKey = append(out.TemplatesWithoutKey, a.Action)
		}
	}
	out.Unlisted = counts(unlisted)
	return out
}

// newCoverageAction is a's entry before any call is counted: its rules, or its bare decision.
func newCoverageAction(a *policy.Action) jsonview.CoverageAction {
	out := jsonview.CoverageAction{Action: a.Name, Rules: []jsonview.CoverageRule{}}
	if a.Effect != nil {
		out.Effect = jsonview.Str(a.Effect.String())
	}
	if len(a.Rules) == 0 {
		out.Rules = append(out.Rules, jsonview.CoverageRule{Action: a.Name, Rule: policy.ReasonDecision, Line: a.Pos.Line, Decision: string(a.Decision)})
	}
	for i, r := range a.Rules {
		out.Rules = append(out.Rules, jsonview.CoverageRule{Action: a.Name, Rule: policy.RuleReason(i), Line: r.Pos.Line, Decision: string(r.Decision)})
	}
	return out
}

// ruleOf is the entry of a that reason names (rule[i], or decision for a bare decision); nil
// when it names none of them.
func ruleOf(a *jsonview.CoverageAction, reason string) *jsonview.CoverageRule {
	for i := range a.Rules {
		if a.Rules[i].Rule == reason {
			return &a.Rules[i]
		}
	}
	return nil
}

// counts is m as a list, the largest count first, then by name.
func counts(m map[string]int) []jsonview.CoverageCount {
	out := []jsonview.CoverageCount{}
	for k, n := range m {
		out = append(out, jsonview.CoverageCount{Name: k, Count: n})
	}
	slices.SortFunc(out, func(x, y jsonview.CoverageCount) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Name, y.Name))
	})
	return out
}
