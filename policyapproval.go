package latch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// A change of the policy is itself an approved action (docs/governance.md): a proposal is an
// approval request of the reserved action policy.PolicyChangeAction, its arguments the proposed
// policy's hash, the diff against the policy in force and, when given, a replay report; its
// resource and effect key are "policy:" + the hash. Answering it is answering any approval
// request — roles (the approvers section's policy_change rule of the policy in force, never
// the proposed one's), M of N, verified answers. Once granted, the guard spends it like any
// approval: it reserves the effect policy:HASH with it and commits it, with a receipt on the
// chain. A policy is approved when that effect is committed.

// PolicyEffectKey is the effect key whose committed record says the policy of hash h was
// approved.
func PolicyEffectKey(h string) string { return "policy:" + h }

// ReasonPolicyChange is the decision reason of a policy proposal: the reserved action always
// asks for approval.
const ReasonPolicyChange = "policy_change"

// ProposePolicy stores a proposal of the policy p: an approval request of the reserved action
// policy.PolicyChangeAction, asked by the principal of ctx (as for Execute), with diff (the
// change against the policy in force, shown to the approver) and replay (a JSON report of what
// the change would decide differently; nil when none). It returns the pending request; asking
// again for the same proposal by the same principal hands back the pending one. A policy already
// approved is refused with an *EffectError (committed).
func (g *Guard) ProposePolicy(ctx context.Context, p *policy.Policy, diff string, replay json.RawMessage) (*store.Approval, error) {
	if p == nil || p.Hash == "" {
		return nil, errors.New("latch: propose policy: no policy")
	}
	principal, err := g.principal(ctx)
	switch {
	case err != nil:
		return nil, err
	case principal.Agent == "":
		return nil, &DeniedError{Action: policy.PolicyChangeAction, Reason: "no_principal"}
	}
	// Already approved: said as committed, whatever the diff of this proposal (a proposal with
	// another diff would be a key conflict on the effect, which reads as something else).
	if ok, err := g.policyCommitted(ctx, p.Hash); err != nil {
		return nil, err
	} else if ok {
		return nil, &EffectError{Key: PolicyEffectKey(p.Hash), State: StateCommitted, Reason: string(ReasonCommitted)}
	}
	args := map[string]any{"policy_hash": p.Hash, "diff": diff}
	if len(replay) > 0 {
		args["replay"] = replay
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("latch: propose policy: %w", err)
	}
	_, canonArgs, err := canon.ParseCanonical(raw)
	if err != nil {
		return nil, fmt.Errorf("latch: propose policy: arguments: %w", err)
	}
	pr, err := g.policyChange(canonArgs, p.Hash, principal, g.env)
	if err != nil {
		return nil, err
	}
	started := g.cfg.Now()
	a, _, err := g.requestApproval(ctx, pr, newID("act_"), started, nil)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// policyChange is the prepared call of a proposal of the policy of hash h: the reserved action,
// decided approve under the policy in force.
func (g *Guard) policyChange(canonArgs []byte, h string, p Principal, env string) (*prepared, error) {
	var args map[string]any
	if err := json.Unmarshal(canonArgs, &args); err != nil {
		return nil, fmt.Errorf("latch: policy change arguments: %w", err)
	}
	call := &Call{Action: policy.PolicyChangeAction, Arguments: canonArgs, Resource: PolicyEffectKey(h), Environment: env}
	pr := &prepared{call: call, principal: p, env: env, pol: g.current(), args: args, canonArgs: canonArgs,
		resource: PolicyEffectKey(h), key: PolicyEffectKey(h),
		eval: policy.Evaluation{Decision: policy.Approve, Reason: ReasonPolicyChange}}
	var err error
	if pr.doc, pr.hash, err = actionDocument(call.Action, canonArgs, pr.resource, p, env); err != nil {
		return nil, fmt.Errorf("latch: policy change: %w", err)
	}
	if err := checkNames("agent", p.Agent, "user", p.User, "environment", env); err != nil {
		return nil, err
	}
	return pr, nil
}

// policyApproved reports whether the policy p is approved: the effect policy:HASH is
// committed, or a granted proposal of it is waiting to be spent, which this call spends. A
// refusal is never remembered (an approval that lands later counts at the next call); an
// approval is, by hash, for the life of the process. An error means it could not tell, and the
// caller refuses the call without writing.
func (g *Guard) policyApproved(ctx context.Context, p *policy.Policy) (bool, error) {
	if h := g.approvedPolicy.Load(); h != nil && *h == p.Hash {
		return true, nil
	}
	ok, err := g.policyCommitted(ctx, p.Hash)
	if err != nil || ok {
		return ok, err
	}
	granted, err := g.store.Approvals(ctx, store.ApprovalFilter{Status: store.Granted})
	if err != nil {
		return false, fmt.Errorf("latch: policy approval: %w", err)
	}
	for _, a := range granted {
		if a.ActionName != policy.PolicyChangeAction || proposedHash(a) != p.Hash {
			continue
		}
		if err := g.applyPolicy(ctx, a); err != nil {
			g.log.Warn("latch: granted policy proposal not applied", "approval_id", a.ID, "err", err)
		}
		break
	}
	return g.policyCommitted(ctx, p.Hash)
}

// policyCommitted reports whether the effect policy:h is committed, remembering it when it is.
func (g *Guard) policyCommitted(ctx context.Context, h string) (bool, error) {
	eff, err := g.store.Effect(ctx, PolicyEffectKey(h))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("latch: policy approval: %w", err)
	case eff.State != store.Committed:
		return false, nil
	}
	g.approvedPolicy.Store(&h)
	return true, nil
}

// PolicyApproved reports whether the policy p is approved (docs/governance.md), spending a
// granted proposal of it as a call would. latch serve asks it before it switches policies.
func (g *Guard) PolicyApproved(ctx context.Context, p *policy.Policy) (bool, error) {
	return g.policyApproved(ctx, p)
}

// proposedHash is the policy hash a proposal's action document names, "" when it names none.
func proposedHash(a *store.Approval) string {
	var doc struct {
		Arguments struct {
			PolicyHash string `json:"policy_hash"`
		} `json:"arguments"`
	}
	if json.Unmarshal(a.Action, &doc) != nil {
		return ""
	}
	return doc.Arguments.PolicyHash
}

// applyPolicy spends the granted proposal a: it reserves the effect policy:HASH with it, as the
// proposal's own principal, and commits it. Two processes applying one proposal race on the
// reservation like any two calls; the loser is refused and finds the effect committed, or in
// progress for a moment.
func (g *Guard) applyPolicy(ctx context.Context, a *store.Approval) error {
	var doc struct {
		Arguments   json.RawMessage `json:"arguments"`
		Environment string          `json:"environment"`
		Principal   struct {
			Agent string `json:"agent"`
			User  string `json:"user"`
		} `json:"principal"`
	}
	if err := json.Unmarshal(a.Action, &doc); err != nil {
		return fmt.Errorf("proposal %s: action document: %w", a.ID, err)
	}
	pr, err := g.policyChange(doc.Arguments, proposedHash(a), Principal{Agent: doc.Principal.Agent, User: doc.Principal.User}, doc.Environment)
	if err != nil {
		return err
	}
	if pr.hash != a.ActionHash {
		return fmt.Errorf("proposal %s: its action document does not hash to its action hash", a.ID)
	}
	started := g.cfg.Now()
	b, _, err := g.reserve(ctx, pr, newID("act_"), a.ID, started)
	if err != nil {
		return err
	}
	_, err = g.finish(ctx, b.pr, b.rc, b.h, func(context.Context, json.RawMessage) (any, error) {
		return map[string]any{"policy_hash": proposedHash(a)}, nil
	})
	return err
}

// SetPolicy makes p the guard's policy in force, atomically: calls that already read the policy
// finish under the one they were decided with; later calls are decided under p. With
// Config.RequireApprovedPolicy, p must be approved (PolicyApproved), else it is refused with a
// *DeniedError (policy_unapproved) and the policy in force stays.
func (g *Guard) SetPolicy(ctx context.Context, p *policy.Policy) error {
	if p == nil {
		return errors.New("latch: set policy: no policy")
	}
	var scope *guardScope
	if g.cfg.Scope == nil && p.Scopes != nil {
		var err error
		if scope, err = policyScope(p.Scopes); err != nil {
			return err
		}
	}
	if g.cfg.RequireApprovedPolicy {
		ok, err := g.policyApproved(ctx, p)
		if err != nil {
			return err
		}
		if !ok {
			return &DeniedError{Action: policy.PolicyChangeAction, Reason: string(ReasonPolicyUnapproved)}
		}
	}
	g.scope.Store(scope)
	old := g.pol.Swap(p)
	g.log.Info("latch: policy in force", "policy_hash", p.Hash, "previous_hash", old.Hash)
	return nil
}

// unapproved returns the refusal of a call decided under pol when the guard requires an
// approved policy and pol is not approved; nil when the call may go on. An error reading the
// store is returned as it is: nothing is decided.
func (g *Guard) unapproved(ctx context.Context, pr *prepared) (bool, error) {
	if !g.cfg.RequireApprovedPolicy {
		return false, nil
	}
	ok, err := g.policyApproved(ctx, pr.pol)
	return !ok && err == nil, err
}
