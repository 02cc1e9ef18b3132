package verify

import (
	"context"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

// policyProposer is who proposes G21's policy change; the approvers are verify's usual ones.
const policyProposer = "latch-verify-proposer"

// g21: an unapproved policy change decides nothing.
//
// A guard with RequireApprovedPolicy opens over a fresh scratch store, where the policy in force
// (the scenario policy: the operator's) has never been approved. A call is made — the first the
// policy can run (allow, else approve), else an unlisted name, which the policy would deny — and
// must be refused policy_unapproved, execute nothing, reserve nothing and store no approval
// request. Then the policy is proposed (Guard.ProposePolicy, as `latch policy propose` does) by
// latch-verify-proposer and granted by as many entitled approvers as approvers.policy_change
// requires. Control: the same call (another key) on the same running guard is then decided by
// the policy — it runs, with an approval when it needs one, or is refused for the policy's own
// reason. Graded on every policy: the call needs no particular decision.
func (r *runner) g21(ctx context.Context) (outcome, error) {
	pk, _ := r.runnable(2)
	u := r.unlistedCall()
	action := u.name
	if pk != nil {
		action = pk.Action
	}
	e, err := r.newEnvWith(ctx, "g21", r.sp, guardOptions{tune: func(cfg *latch.Config, _ func() time.Time) {
		cfg.RequireApprovedPolicy = !r.faults[faultPolicyApprovalUnrequired]
	}})
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	// call makes call i (0 before the approval, 1 after): done right for a pick that can run.
	call := func(i int, c *counter) (string, error) {
		if pk == nil {
			_, err := e.g.Execute(withPrincipal(ctx, u.principal), u.call(), c.commit)
			return fmt.Sprintf("%s as %s", u.name, principalText(u.principal)), err
		}
		v := pk.variant(i)
		if i == 0 {
			_, err := e.exec(ctx, pk, v, c.commit)
			return v.describe(), err
		}
		return v.describe(), e.run(ctx, pk, v, c.commit)
	}

	before, err := e.snapshot(ctx)
	if err != nil {
		return outcome{}, err
	}
	var c0 counter
	what0, err0 := call(0, &c0)
	after, err := e.snapshot(ctx)
	if err != nil {
		return outcome{}, err
	}

	a, perr := e.g.ProposePolicy(withPrincipal(ctx, latch.Principal{Agent: policyProposer}), e.sp.pol, "", nil)
	proposal := ""
	required := e.sp.pol.ApproversFor(policy.PolicyChangeAction).Required
	if perr == nil {
		proposal = a.ID
		_, perr = e.grantAll(ctx, a.ID, policy.PolicyChangeAction, 0)
	}
	var c1 counter
	what1, err1 := call(1, &c1)

	unapproved := string(latch.ReasonPolicyUnapproved)
	reason0, reason1 := refusalReason(err0), refusalReason(err1)
	detail := fmt.Sprintf("RequireApprovedPolicy, policy %s never approved in the scratch store; %s: %s, executions: %d, store before: %s, after: %s; proposed by %s (%s) and granted by %d approver(s), as approvers.policy_change requires: %s; then %s: %s, executions: %d",
		short(e.sp.pol.Hash), what0, refusalText(err0), c0.count(), before, after, policyProposer, proposal, required, errText(perr), what1, refusalText(err1), c1.count())
	switch {
	case perr != nil || reason1 == unapproved || pk != nil && (err1 != nil || c1.count() != 1) || pk == nil && (err1 == nil || c1.count() != 0):
		return controlFailed(action, detail), nil
	case c0.count() != 0:
		return fail(action, "the call under the unapproved policy executed", detail), nil
	case reason0 != unapproved:
		return fail(action, "the call under the unapproved policy was not refused policy_unapproved", detail), nil
	case after.effects != before.effects || after.approvals != before.approvals:
		return fail(action, "the call under the unapproved policy reserved an effect or stored an approval request", detail), nil
	}
	return pass(action, detail), nil
}

// refusalReason is the reason word of a refusal ("" for none).
func refusalReason(err error) string {
	if rf := latch.RefusalOf(err); rf != nil {
		return string(rf.Reason)
	}
	return ""
}
