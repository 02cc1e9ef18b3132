// Command standing-approval grants a support bot a standing approval of small refunds.
//
// A person approving the bot's first refund also grants it a standing approval: two more
// refunds of at most 5.00, on any order, within the hour. The next small refunds run without
// asking anyone; one larger than the bound is put before a person again; once the two uses are
// spent the next small refund is put before a person too. Revoking the standing approval ends
// it before its time.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
	"github.com/latchkit/latch/store"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{order_id}"
    resource: "order:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, min: 1 }
    decision: approve
    approvers:
      standing: { max_uses: 10, max_for: 1h }
`

func main() {
	recipe.Run("standing-approval", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		refunded := 0
		ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "support-bot"})
		refund := func(ctx context.Context, order string, amount int) error {
			args, _ := json.Marshal(map[string]any{"order_id": order, "amount": amount})
			_, err := k.Guard.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: args},
				func(context.Context, json.RawMessage) (any, error) { refunded++; return "refunded", nil })
			return err
		}
		var asked *latch.ApprovalRequiredError
		if err := refund(ctx, "o-1", 120); !errors.As(err, &asked) {
			return fmt.Errorf("the first refund = %v, want approval_required", err)
		}
		_, err := k.Guard.Answer(ctx, &store.AnswerRequest{ID: asked.ApprovalID, Grant: true, Approver: "alice",
			Standing: &store.StandingTerms{Uses: 2, For: store.Duration(time.Hour), Max: map[string]int64{"amount": 500}, Vary: []string{"order_id"}}})
		if err != nil {
			return err
		}
		k.Say("alice grants o-1's refund, with a standing approval: 2 refunds of at most 5.00 within the hour")
		if err := refund(latch.WithApproval(ctx, asked.ApprovalID), "o-1", 120); err != nil {
			return fmt.Errorf("o-1 after its approval: %w", err)
		}
		k.Say("o-1 (1.20): refunded under alice's approval")

		want := []struct {
			order  string
			amount int
			reason string
		}{
			{"o-2", 300, ""},
			{"o-3", 900, string(latch.ReasonApprovalRequired)}, // above the standing approval's bound
			{"o-4", 450, ""},
			{"o-5", 10, string(latch.ReasonApprovalRequired)}, // its two uses are spent
		}
		for _, c := range want {
			err := refund(ctx, c.order, c.amount)
			k.Say("%s (%d.%02d): %s", c.order, c.amount/100, c.amount%100, recipe.Word(err, "refunded with no one asked"))
			k.Expect(recipe.Reason(err) == c.reason, "%s was %q, want %q", c.order, recipe.Reason(err), c.reason)
		}
		list, err := k.Guard.Standings(ctx, store.StandingFilter{})
		if err != nil || len(list) != 1 {
			return fmt.Errorf("standings = %d, %v; want one", len(list), err)
		}
		state := store.StandingState(list[0], time.Now())
		k.Say("standing approval %s: %d of %d uses, %s", list[0].ID, list[0].Uses, list[0].Terms.Uses, state)
		k.Expect(list[0].Uses == 2 && string(state) == "exhausted", "the standing approval is %s after %d uses, want exhausted after 2", state, list[0].Uses)
		k.Expect(refunded == 3, "%d refunds ran, want 3 (o-1, o-2, o-4)", refunded)
		return nil
	})
}
