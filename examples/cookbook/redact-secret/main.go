// Command redact-secret keeps a card number and its CVC out of everything a person reads.
//
// A payments agent asks to charge a card that is not on file: the call carries the card
// number and the CVC, and the policy puts it before a person (new cards always are). The
// policy redacts both: the approver is shown ••••4242 and ••••, the receipt records a salted
// commitment in place of each value, and the receipt chain holds neither value anywhere — yet
// an auditor handed the card number can prove it is the one the charge ran with. The action
// hash the approval binds is computed over the full values, so the approval cannot be spent on
// another card.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  payments.charge_new_card:
    effect: "charge:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, min: 1 }
      card_number: { type: string, redact: last4 }
      cvc: { type: string, redact: true }
    decision: approve
`

const card, cvc = "4242424242424242", "737"

// Charge is the agent's call.
type Charge struct {
	OrderID    string `json:"order_id"`
	Amount     int64  `json:"amount"`
	CardNumber string `json:"card_number"`
	CVC        string `json:"cvc"`
}

func main() {
	recipe.Run("redact-secret", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		charged := []string{}
		charge := latch.Protect(k.Guard, "payments.charge_new_card", func(_ context.Context, c Charge) (string, error) {
			charged = append(charged, c.CardNumber)
			return "ch_" + c.OrderID, nil
		}, nil)
		if err := k.Guard.Check(); err != nil {
			return err
		}
		agent := latch.WithPrincipal(ctx, latch.Principal{Agent: "payments-agent"})
		c := Charge{OrderID: "o_88", Amount: 5900, CardNumber: card, CVC: cvc}
		_, err := charge(agent, c)
		var req *latch.ApprovalRequiredError
		if !errors.As(err, &req) {
			return fmt.Errorf("the charge = %v, want approval_required", err)
		}
		apr, err := k.Guard.Store().Approval(ctx, req.ApprovalID)
		if err != nil {
			return err
		}
		var doc struct { // the canonical action document the approval binds
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(apr.Action, &doc); err != nil {
			return err
		}
		// What every surface (console, latch approvals, notifications) shows an approver.
		shown := k.Guard.Policy().RedactJSON(doc.Name, doc.Arguments)
		k.Say("the approver is shown %s %s", doc.Name, shown)
		k.Expect(!bytes.Contains(shown, []byte(card)) && bytes.Contains(shown, []byte("4242")), "the approver is shown %s", shown)
		if _, err := k.Guard.Answer(ctx, &store.AnswerRequest{ID: req.ApprovalID, Grant: true, Approver: "dana"}); err != nil {
			return err
		}

		other := c
		other.CardNumber = "4000056655665556"
		_, err = charge(latch.WithApproval(agent, req.ApprovalID), other)
		k.Say("the agent presents the approval with another card: %s", recipe.Word(err, "charged"))
		k.Expect(recipe.Reason(err) == string(latch.ReasonApprovalMismatch), "another card under the approval = %q, want approval_mismatch", recipe.Reason(err))
		if _, err := charge(latch.WithApproval(agent, req.ApprovalID), c); err != nil {
			return fmt.Errorf("the approved charge: %w", err)
		}
		k.Say("the approved charge runs")

		leaks, n := 0, 0
		var commitment receipt.Redacted
		for s, err := range k.Guard.Store().Receipts(ctx, store.ReceiptFilter{}) {
			if err != nil {
				return err
			}
			n++
			if bytes.Contains(s.Doc, []byte(card)) || bytes.Contains(s.Doc, []byte(`"`+cvc+`"`)) {
				leaks++
			}
			var doc struct {
				Result    string `json:"result"`
				Arguments struct {
					CardNumber json.RawMessage `json:"card_number"`
				} `json:"arguments"`
			}
			if err := json.Unmarshal(s.Doc, &doc); err == nil && doc.Result == "committed" {
				_ = json.Unmarshal(doc.Arguments.CardNumber, &commitment)
			}
		}
		k.Say("receipt chain: %d records, %d holding the card number or the CVC", n, leaks)
		k.Say("the committed receipt records card_number as %q (%s)", commitment.Shown, commitment.Commitment[:19]+"…")
		k.Expect(n > 0 && leaks == 0, "%d of %d receipts hold a secret", leaks, n)
		proved := commitment.Check(json.RawMessage(`"` + card + `"`))
		k.Say("an auditor handed %s…: it is the card the charge ran with: %v", card[:6], proved)
		k.Expect(proved, "the receipt's commitment does not match the card")
		k.Expect(!commitment.Check(json.RawMessage(`"4000056655665556"`)), "the commitment matches another card")
		k.Expect(len(charged) == 1, "%d charges ran, want 1", len(charged))
		return nil
	})
}
