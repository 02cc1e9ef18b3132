package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
)

func (a *app) budgetsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "budgets [flags]",
		Short: "List the budgets in force: consumed, remaining, and what holds each charge",
		Long: `List every budget in force now (docs/budgets.md): each budget of a policy grant
that has not expired, of each live delegation (revoked, expired or cut ones are not
in force), and each action's own budget for every principal with charges in its
window.

CONSUMED is the sum of the charges still held within the budget's rolling window;
REMAINING is LIMIT minus it (never below 0). A charge is held while its effect is
executing, committed or ambiguous, and released only when its effect becomes failed:
an ambiguous effect holds its charge until a person resolves it (latch resolve). The
charges that wait for a person are listed under the table, with why.

A refused caller is never told what remains; this command is for operators.

--json prints JSON Lines, one object per budget, as GET /v1/budgets lists them:
  budget, kind (grant, delegation or action), grant, action, per, who, metric, limit,
  window, window_seconds, consumed, remaining, ratio, held (effect_key, attempt,
  action_id, amount, consumed_at, state, needs_person, why)`,
		Example: "  latch budgets\n  latch budgets --json | jq 'select(.ratio >= 0.8)'\n  latch inspect --grant ops-billing",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pol, err := a.loadPolicy()
			if err != nil {
				return err
			}
			st, err := a.openRead()
			if err != nil {
				return err
			}
			defer st.Close()
			list, err := a.operatorOf(st, pol, nil).Budgets(a.ctx)
			if err != nil {
				return err
			}
			if asJSON {
				for _, b := range list {
					if err := jsonLine(a.stdout, b); err != nil {
						return err
					}
				}
				return nil
			}
			if len(list) == 0 {
				fmt.Fprintln(a.stdout, "no budgets in force")
				return nil
			}
			return a.printBudgets(list, false)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON Lines, one budget per line")
	return cmd
}

// printBudgets prints list as a table, then the held charges: every one when all, else those
// that wait for a person.
func (a *app) printBudgets(list []jsonview.Budget, all bool) error {
	t := newTable(a.stdout, "BUDGET", "OF", "METRIC", "CONSUMED", "LIMIT", "REMAINING", "WINDOW", "HELD")
	for _, b := range list {
		t.row(cell(b.Budget), budgetOf(b), cell(b.Metric), strconv.FormatInt(b.Consumed, 10), strconv.FormatInt(b.Limit, 10),
			strconv.FormatInt(b.Remaining, 10), b.Window, heldSummary(b.Held))
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, b := range list {
		var shown []jsonview.Held
		for _, h := range b.Held {
			if all || h.NeedsPerson {
				shown = append(shown, h)
			}
		}
		if len(shown) == 0 {
			continue
		}
		what := plural(len(shown), "held charge", "held charges")
		if !all {
			what += " waiting for a person"
		}
		fmt.Fprintf(a.stdout, "\n%s %s: %d %s\n", cell(b.Budget), cell(b.Metric), len(shown), what)
		ht := newTable(a.stdout)
		for _, h := range shown {
			ht.row("  "+cell(h.EffectKey), "attempt "+strconv.Itoa(h.Attempt), "amount "+strconv.FormatInt(h.Amount, 10),
				dash(deref(h.ConsumedAt)), dash(deref(h.State)), cell(h.Why))
		}
		if err := ht.flush(); err != nil {
			return err
		}
	}
	return nil
}

// budgetOf says what b belongs to: grant, delegation, or the action and whose budget of it.
func budgetOf(b jsonview.Budget) string {
	if b.Kind == jsonview.BudgetOfAction {
		return "action " + cell(deref(b.Action)) + " per " + deref(b.Per) + " " + cell(deref(b.Who))
	}
	return b.Kind
}

// heldSummary counts the held charges by their effect's state: "3 (2 committed, 1 ambiguous)".
func heldSummary(held []jsonview.Held) string {
	if len(held) == 0 {
		return "0"
	}
	var order []string
	n := map[string]int{}
	for _, h := range held {
		s := deref(h.State)
		if s == "" {
			s = "no record"
		}
		if h.NeedsPerson && s == "executing" {
			s = "lease lapsed"
		}
		if n[s] == 0 {
			order = append(order, s)
		}
		n[s]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = strconv.Itoa(n[s]) + " " + s
	}
	return strconv.Itoa(len(held)) + " (" + strings.Join(parts, ", ") + ")"
}

// inspectGrant prints what `latch inspect --grant ID` shows.
func (a *app) inspectGrant(id string, asJSON bool) error {
	pol, err := a.loadPolicy()
	if err != nil {
		return err
	}
	st, err := a.openRead()
	if err != nil {
		return err
	}
	defer st.Close()
	in, err := a.operatorOf(st, pol, nil).InspectGrant(a.ctx, id)
	switch {
	case errors.Is(err, operator.ErrNoGrant):
		return fmt.Errorf("no grant or delegation %s (not in the policy's authority section, nor in this store)", cell(id))
	case err != nil:
		return err
	}
	if asJSON {
		return jsonLine(a.stdout, in)
	}
	fmt.Fprintf(a.stdout, "%s %s\n", in.Kind, cell(in.GrantID))
	t := newTable(a.stdout)
	if in.Parent != nil {
		t.row("  parent", cell(*in.Parent))
	}
	t.row("  subject", principal(deref(in.Subject.Agent), deref(in.Subject.User)))
	t.row("  actions", dash(strings.Join(in.Actions, ", ")))
	t.row("  expires", dash(deref(in.ExpiresAt)))
	status := "live: it decides calls"
	if !in.Live {
		status = "not live (" + cell(deref(in.NotLive)) + "): it decides nothing; its ledger rows stay"
	}
	t.row("  status", status)
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	if len(in.Budgets) == 0 {
		fmt.Fprintln(a.stdout, "no budgets")
		return nil
	}
	return a.printBudgets(in.Budgets, true)
}
