// Command budgeted-agent gives a procurement agent a daily spending budget.
//
// The agent buys cloud credits for several teams. Each purchase is allowed on its own, but
// the policy meters the amount per agent per day: 1,000.00. The purchase that would pass the
// limit is refused budget_exhausted, naming the budget but never how much of it is left, and
// the vendor is not called. Another agent has its own budget.
//
// Unguarded (LATCH_EXAMPLE_UNGUARDED=1) the agent spends 1,600.00: the recipe exits 1.
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  vendor.purchase:
    effect: "purchase:{order_id}"
    arguments:
      order_id: { type: string }
      team: { type: string }
      amount: { type: integer, min: 1 }
    decision: allow
    budgets:
      - { metric: amount, limit: 100000, window: P1D, per: agent }
`

// Purchase is one order of credits.
type Purchase struct {
	OrderID string `json:"order_id"`
	Team    string `json:"team"`
	Amount  int64  `json:"amount"`
}

func main() {
	recipe.Run("budgeted-agent", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		spent := map[string]int64{} // the vendor's invoices, by agent
		buyAs := func(agent string) func(context.Context, Purchase) (string, error) {
			return func(_ context.Context, p Purchase) (string, error) {
				spent[agent] += p.Amount
				return "po_" + p.OrderID, nil
			}
		}
		purchase := latch.Protect(k.Guard, "vendor.purchase", buyAs("procurement-agent"), nil)
		financePurchase := latch.Protect(k.Guard, "vendor.purchase", buyAs("finance-agent"), nil)
		if err := k.Guard.Check(); err != nil {
			return err
		}
		if k.Unguarded {
			purchase = buyAs("procurement-agent")
		}
		agent := latch.WithPrincipal(ctx, latch.Principal{Agent: "procurement-agent"})
		refusals := 0
		for _, p := range []Purchase{{"o1", "search", 40000}, {"o2", "ads", 45000}, {"o3", "ml", 30000}, {"o4", "ml", 10000}, {"o5", "ml", 25000}} {
			_, err := purchase(agent, p)
			var be *latch.BudgetError
			if errors.As(err, &be) {
				refusals++
				k.Say("%s for %s (%s): %s — budget %s, %s per %s", p.OrderID, p.Team, money(p.Amount), be.Reason, be.Budget, be.Metric, be.Window)
				continue
			}
			k.Say("%s for %s (%s): %s", p.OrderID, p.Team, money(p.Amount), recipe.Word(err, "bought"))
		}
		other := latch.WithPrincipal(ctx, latch.Principal{Agent: "finance-agent"})
		_, err := financePurchase(other, Purchase{"o6", "finance", 30000})
		k.Say("finance-agent's o6 (%s): %s", money(30000), recipe.Word(err, "bought, on its own budget"))
		k.Say("vendor invoices: procurement-agent %s, finance-agent %s", money(spent["procurement-agent"]), money(spent["finance-agent"]))
		k.Expect(spent["procurement-agent"] <= 100000, "procurement-agent spent %s, above its budget of 1,000.00", money(spent["procurement-agent"]))
		k.Expect(refusals == 2, "%d purchases were refused budget_exhausted, want 2 (o3, o5)", refusals)
		k.Expect(err == nil, "finance-agent was refused %v, want its own budget", err)
		return nil
	})
}

func money(minor int64) string { return fmt.Sprintf("%d.%02d", minor/100, minor%100) }
