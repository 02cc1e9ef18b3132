// Command refund-approval-edit has a support agent ask for a refund that a person must
// approve, and the person approve a smaller one.
//
// The agent asks to refund 180.00 on order o_5531. The policy puts refunds above 50.00 before
// a person and lets the approver lower the amount (never raise it, never below 1.00). Dana
// grants 120.00. The agent presents the approval with the amount it asked for and is refused
// approval_mismatch, with the approved arguments in the refusal; it calls again with those and
// the refund runs once, its receipt naming what was asked and who changed it. Spending the
// approval a second time is refused, and an approver's attempt to raise the amount is refused
// when the answer is given.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
	"github.com/latchkit/latch/store"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{order_id}"
    resource: "order:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, min: 1, editable: { decrease: true, min: 100 } }
    rules:
      - when: { amount_lte: 5000 }
        decision: allow
      - decision: approve
`

func main() {
	recipe.Run("refund-approval-edit", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		refunds := map[string]int64{} // the payment provider's refunds, by order
		execute := func(ctx context.Context, args json.RawMessage) (*latch.Receipt, error) {
			return k.Guard.Execute(ctx, &latch.Call{Action: "payments.refund", Arguments: args},
				func(_ context.Context, args json.RawMessage) (any, error) {
					var a struct {
						OrderID string `json:"order_id"`
						Amount  int64  `json:"amount"`
					}
					if err := json.Unmarshal(args, &a); err != nil {
						return nil, latch.NotExecuted(err)
					}
					refunds[a.OrderID] += a.Amount
					return fmt.Sprintf("re_%s_%d", a.OrderID, a.Amount), nil
				})
		}
		agent := latch.WithPrincipal(ctx, latch.Principal{Agent: "support-agent"})
		asked := json.RawMessage(`{"amount":18000,"order_id":"o_5531"}`) // canonical JSON, as receipts record it

		_, err := execute(agent, asked)
		var req *latch.ApprovalRequiredError
		if !errors.As(err, &req) {
			return fmt.Errorf("a refund of 180.00 = %v, want approval_required", err)
		}
		k.Say("agent asks to refund 180.00 on o_5531: %s (%s)", recipe.Reason(err), req.ApprovalID)
		k.Expect(len(refunds) == 0, "a refund ran before anyone approved it")

		_, err = k.Guard.Answer(ctx, &store.AnswerRequest{ID: req.ApprovalID, Grant: true, Approver: "erin", Set: json.RawMessage(`{"amount":25000}`)})
		k.Say("erin tries to grant it raised to 250.00: %v", err)
		k.Expect(err != nil, "an approver raised the refund above what was asked")
		_, err = k.Guard.Answer(ctx, &store.AnswerRequest{ID: req.ApprovalID, Grant: true, Approver: "dana", Set: json.RawMessage(`{"amount":12000}`)})
		if err != nil {
			return fmt.Errorf("dana's edit: %w", err)
		}
		k.Say("dana grants it lowered to 120.00")

		approved := latch.WithApproval(agent, req.ApprovalID)
		_, err = execute(approved, asked)
		var mm *latch.ApprovalMismatchError
		k.Expect(errors.As(err, &mm) && recipe.Reason(err) == string(latch.ReasonApprovalMismatch), "the call as asked = %v, want approval_mismatch", err)
		if mm == nil {
			return fmt.Errorf("no approved arguments to call with")
		}
		k.Say("agent presents the approval with 180.00: %s; approved arguments %s", recipe.Reason(err), mm.Arguments)

		rc, err := execute(approved, mm.Arguments)
		if err != nil {
			return fmt.Errorf("the approved refund: %w", err)
		}
		k.Say("agent calls with the approved arguments: %s, receipt records the request %s edited by %v",
			rc.Result, rc.ApprovalEdit.RequestedArguments, rc.ApprovalEdit.EditedBy)
		_, err = execute(approved, mm.Arguments)
		k.Say("agent spends the approval again: %s", recipe.Word(err, "refunded"))
		k.Expect(err != nil, "the approval was spent twice")

		k.Say("provider refunds on o_5531: %d minor units", refunds["o_5531"])
		k.Expect(refunds["o_5531"] == 12000, "o_5531 was refunded %d, want 12000 (once, as approved)", refunds["o_5531"])
		k.Expect(string(rc.ApprovalEdit.RequestedArguments) == string(asked), "the receipt records the request as %s, want %s", rc.ApprovalEdit.RequestedArguments, asked)
		return nil
	})
}
