package latch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// charges computes the budget charges of a call the policy (and its authority) allows or sends
// for approval (docs/budgets.md): one per budget of every grant on the authority chain — the
// grant that allowed the call, then each grant above it up to the policy grant, each budget
// under that grant's id — and one per budget of the action itself, under its per-principal id.
// The amount is 1 for count, else the value of the metered argument, which must be passed and
// be a non-negative integer. A call with budgets but no effect key cannot be charged (a charge
// is written with the reservation of an effect key, and released when that effect fails), so
// it is refused. The first budget that refuses, in that order, is the one reported.
func (g *Guard) charges(pr *prepared) ([]store.Charge, error) {
	var out []store.Charge
	add := func(id string, b policy.Budget) error {
		c := store.Charge{Budget: id, Metric: b.Metric, Limit: b.Limit, Window: b.Window}
		refuse := func(reason Reason) error {
			return &BudgetError{Action: pr.call.Action, Reason: string(reason), Budget: id, Metric: b.Metric, Window: b.Window}
		}
		if pr.key == "" {
			return refuse(ReasonBudgetNeedsEffectKey)
		}
		if b.Metric == policy.BudgetCount {
			c.Amount = 1
		} else {
			v, ok := pr.args[b.Metric]
			if !ok {
				return refuse(ReasonBudgetMetricMissing)
			}
			n, isInt := v.(int64) // canon's value model: every JSON integer is an int64, and nothing else is
			if !isInt || n < 0 {
				return refuse(ReasonBudgetMetricInvalid)
			}
			c.Amount = n
		}
		out = append(out, c)
		return nil
	}
	if pr.auth != nil && pr.auth.Allowed {
		for _, link := range pr.auth.Chain {
			for _, b := range link.Budgets {
				if err := add(link.ID, b); err != nil {
					return nil, err
				}
			}
		}
	}
	if pr.action != nil {
		for _, b := range pr.action.Budgets {
			if err := add(actionBudget(pr, b.Per), b); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// actionBudget is the id of the call's share of one of its action's own budgets: per agent, per
// user (calls without a user share one budget), or per principal (the agent, or agent/user).
func actionBudget(pr *prepared, per string) string {
	p := pr.principal
	who := p.Agent
	switch per {
	case policy.BudgetPerUser:
		who = p.User
	case policy.BudgetPerPrincipal:
		if p.User != "" {
			who += "/" + p.User
		}
	}
	return store.ActionBudget(pr.call.Action, per, who)
}

// budgetLedger returns the guard's store as a budget store, or the error that refuses every
// budgeted call when it keeps no ledger: a budget that cannot be enforced must not be taken as
// one that holds.
func (g *Guard) budgetLedger() (store.BudgetStore, error) {
	bs, ok := g.store.(store.BudgetStore)
	if !ok {
		return nil, fmt.Errorf("latch: store %T keeps no budget ledger, and the policy declares budgets: every budgeted call is refused", g.store)
	}
	return bs, nil
}

// receiptCharges is the receipt's record of the charges a reservation made.
func receiptCharges(cs []store.Charge) []receipt.BudgetCharge {
	if len(cs) == 0 {
		return nil
	}
	out := make([]receipt.BudgetCharge, len(cs))
	for i, c := range cs {
		out[i] = receipt.BudgetCharge{Budget: c.Budget, Metric: c.Metric, Amount: c.Amount, Limit: c.Limit,
			Window: policy.FormatISODuration(c.Window)}
	}
	return out
}

// wouldExhaust is observe mode's look at the ledger (docs/budgets.md#observe-mode): the first of
// cs that enforcement would have refused, reading the unreleased charges within each window
// now. It is read outside any reservation, so two calls observed at once may both fit where
// enforcement would have refused one: observe mode reports, it decides nothing.
func (g *Guard) wouldExhaust(ctx context.Context, bs store.BudgetStore, cs []store.Charge, now time.Time) (*store.Charge, error) {
	for i := range cs {
		c := &cs[i]
		rows, err := bs.Charges(ctx, store.ChargeFilter{Budget: c.Budget, Metric: c.Metric, Since: now.Add(-c.Window)})
		if err != nil {
			return nil, fmt.Errorf("read budget %s: %w", c.Budget, err)
		}
		used := int64(0)
		for _, r := range rows {
			if r.ReleasedAt.IsZero() && r.ConsumedAt.After(now.Add(-c.Window)) {
				used += r.Amount
			}
		}
		if used+c.Amount > c.Limit {
			return c, nil
		}
	}
	return nil, nil
}

// budget computes the charges of a call enforcement is about to reserve into pr.charges. A
// *BudgetError refuses the call; any other error means the budgets cannot be enforced here.
func (g *Guard) budget(pr *prepared) error {
	cs, err := g.charges(pr)
	if err != nil {
		return err
	}
	if len(cs) > 0 {
		if _, err := g.budgetLedger(); err != nil {
			return err
		}
	}
	pr.charges = cs
	return nil
}

// observeBudgets is the budgets' part of observe mode: nothing is charged, but a call that
// enforcement would have refused for a budget is decided deny with that reason, which its
// receipt's would_have records (as any refusal observe mode reports).
func (g *Guard) observeBudgets(ctx context.Context, pr *prepared) error {
	if pr.eval.Decision == policy.Deny {
		return nil
	}
	deny := func(reason string) {
		pr.eval = policy.Evaluation{Decision: policy.Deny, Reason: reason, Trace: pr.eval.Trace, Arguments: pr.eval.Arguments}
	}
	cs, err := g.charges(pr)
	if be := (*BudgetError)(nil); errors.As(err, &be) {
		deny(be.Reason)
		return nil
	}
	if len(cs) == 0 {
		return nil
	}
	bs, err := g.budgetLedger()
	if err != nil {
		return err
	}
	c, err := g.wouldExhaust(ctx, bs, cs, g.cfg.Now())
	if err != nil {
		return err
	}
	if c != nil {
		deny(string(ReasonBudgetExhausted))
	}
	return nil
}
