// Command break-glass opens an emergency grant for an ops bot during an incident.
//
// The ops bot holds no grant for refunds: in normal times it is refused no_authority. During
// an incident the on-call person (carol, authenticated by latch) opens the policy's
// break-glass envelope for it, for an hour, with a reason. Under the opening the bot's refund
// runs and its receipt names the envelope; a refund beyond the envelope's constraint is still
// refused; an opening asked by a name merely asserted (not verified) is refused; once carol
// revokes the opening, the bot is refused again.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
	"github.com/latchkit/latch/store"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    arguments:
      refund_id: { type: string }
      amount: { type: integer, min: 1 }
    decision: allow
approvers:
  roles:
    oncall: [carol]
authority:
  grants:
    - id: support-refunds
      subject: { agent: support-bot }
      actions: [payments.refund]
      constraints: { amount_lte: 5000 }
  break_glass:
    - id: payments-incident
      subject: { agent: "ops-*" }
      actions: [payments.refund]
      constraints: { amount_lte: 100000 }
      max_ttl: 2h
      openers: [oncall]
`

func main() {
	recipe.Run("break-glass", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		refunds := 0
		bot := latch.WithPrincipal(ctx, latch.Principal{Agent: "ops-bot"})
		refund := func(id string, amount int) (*latch.Receipt, error) {
			args, _ := json.Marshal(map[string]any{"refund_id": id, "amount": amount})
			return k.Guard.Execute(bot, &latch.Call{Action: "payments.refund", Arguments: args},
				func(context.Context, json.RawMessage) (any, error) { refunds++; return "refunded", nil })
		}
		_, err := refund("rf_1", 40000)
		k.Say("ops-bot refunds rf_1 (400.00) in normal times: %s", recipe.Word(err, "refunded"))
		k.Expect(recipe.Reason(err) == string(latch.ReasonNoAuthority), "rf_1 before the opening = %q, want no_authority", recipe.Reason(err))

		open := func(by store.Approver) (*store.Delegation, error) {
			return k.Guard.BreakGlass(ctx, &latch.BreakGlassRequest{Envelope: "payments-incident", For: latch.Principal{Agent: "ops-bot"},
				TTL: time.Hour, Reason: "INC-42: refunds stuck after the card processor outage", By: by})
		}
		_, err = open(store.Approver{Name: "carol", Method: store.MethodCLI})
		k.Say("an opening asked as carol, unverified: %v", err)
		k.Expect(err != nil, "an unverified name opened the envelope")
		d, err := open(store.Approver{Name: "carol", Method: store.MethodSession, Verified: true})
		if err != nil {
			return fmt.Errorf("carol's opening: %w", err)
		}
		k.Say("carol (console session) opens payments-incident for ops-bot for an hour: %s (via %s, by %s)", d.ID, d.Via, d.CreatedBy)

		rc, err := refund("rf_1", 40000)
		if err != nil {
			return fmt.Errorf("rf_1 under the opening: %w", err)
		}
		k.Say("ops-bot refunds rf_1 (400.00): %s, receipt authority: grant %s, break_glass %s", rc.Result, rc.Authority.GrantID, rc.Authority.BreakGlass)
		k.Expect(rc.Authority.BreakGlass == "payments-incident" && rc.Authority.DelegationID == d.ID, "the receipt's authority is %+v, want the envelope and the opening", rc.Authority)
		_, err = refund("rf_2", 250000)
		k.Say("ops-bot refunds rf_2 (2,500.00): %s", recipe.Word(err, "refunded"))
		k.Expect(recipe.Reason(err) == string(latch.ReasonAuthorityConstraint), "rf_2 beyond the envelope = %q, want authority_constraint", recipe.Reason(err))

		if _, err := k.Guard.Revoke(ctx, d.ID, "carol"); err != nil {
			return err
		}
		_, err = refund("rf_3", 1000)
		k.Say("carol revokes the opening; ops-bot refunds rf_3 (10.00): %s", recipe.Word(err, "refunded"))
		k.Expect(recipe.Reason(err) == string(latch.ReasonAuthorityRevoked), "rf_3 after the revocation = %q, want authority_revoked", recipe.Reason(err))
		k.Say("refunds made: %d", refunds)
		k.Expect(refunds == 1, "%d refunds were made, want 1", refunds)
		return nil
	})
}
