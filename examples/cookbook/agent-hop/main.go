// Command agent-hop hands work from a planner agent to a billing agent with a hop: a signed,
// narrower slice of the planner's authority that the billing agent must act under.
//
// The planner holds refunds up to 1,000.00 and may delegate. It hands billing refunds of at
// most 50.00 for the next hour, as a hop token signed with the planner service's key. The
// billing service (a second guard on the same store, trusting only the planner's public key)
// runs a 40.00 refund presenting the token; its receipt names the hop. A 120.00 refund under
// the same token is refused authority_constraint, although billing's own grant would allow
// it: a call that presents a hop is decided by the hop alone. A token presented by another
// agent is refused authority_hop, and a hop wider than the planner's own grant is refused when
// it is made.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
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
authority:
  grants:
    - id: planner-refunds
      subject: { agent: planner }
      actions: [payments.refund]
      constraints: { amount_lte: 100000 }
      delegable: true
      expires_at: 2099-01-01T00:00:00Z
    - id: billing-own
      subject: { agent: billing }
      actions: [payments.refund]
`

func main() {
	recipe.Run("agent-hop", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		pub, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		planner, err := k.Open(ctx, policyYAML, &latch.Config{HopKey: key})
		if err != nil {
			return err
		}
		defer planner.Close()
		billing, err := k.Open(ctx, policyYAML, &latch.Config{HopVerifyKeys: []ed25519.PublicKey{pub}})
		if err != nil {
			return err
		}
		defer billing.Close()
		who := func(agent string) latch.Principal { return latch.Principal{Agent: agent} }

		_, err = planner.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500000}\n"), who("billing"), who("planner"))
		var ae *latch.AuthorityError
		k.Expect(errors.As(err, &ae) && ae.Reason == string(latch.ReasonAuthorityEscalation), "a hop wider than the planner's grant = %v, want authority_escalation", err)
		k.Say("planner tries to hand billing refunds up to 5,000.00: %s", recipe.Word(err, "handed"))

		until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		hop, err := planner.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 5000}\nexpires_at: "+until+"\n"), who("billing"), who("planner"))
		if err != nil {
			return err
		}
		token, err := planner.HopToken(hop)
		if err != nil {
			return err
		}
		k.Say("planner hands billing refunds up to 50.00 for an hour: %s, as a signed token", hop.ID)

		refunds := 0
		refund := func(agent, id string, amount int) (*latch.Receipt, error) {
			args, _ := json.Marshal(map[string]any{"refund_id": id, "amount": amount})
			return billing.Execute(latch.WithPrincipal(ctx, who(agent)),
				&latch.Call{Action: "payments.refund", Arguments: args, Options: &latch.Options{Hop: token}},
				func(context.Context, json.RawMessage) (any, error) { refunds++; return "refunded", nil })
		}
		rc, err := refund("billing", "rf_1", 4000)
		if err != nil {
			return fmt.Errorf("rf_1 under the hop: %w", err)
		}
		k.Say("billing refunds rf_1 (40.00) presenting the token: %s, receipt names %s", rc.Result, rc.Authority.DelegationID)
		k.Expect(rc.Authority.DelegationID == hop.ID, "the receipt names %q, want the hop %s", rc.Authority.DelegationID, hop.ID)

		_, err = refund("billing", "rf_2", 12000)
		k.Say("billing refunds rf_2 (120.00) presenting the token: %s", recipe.Word(err, "refunded"))
		k.Expect(recipe.Reason(err) == string(latch.ReasonAuthorityConstraint), "rf_2 beyond the hop = %q, want authority_constraint", recipe.Reason(err))

		_, err = refund("support", "rf_3", 1000)
		k.Say("another agent presents billing's token for rf_3: %s", recipe.Word(err, "refunded"))
		k.Expect(recipe.Reason(err) == string(latch.ReasonAuthorityHop), "rf_3 by another agent = %q, want authority_hop", recipe.Reason(err))
		k.Say("refunds made: %d", refunds)
		k.Expect(refunds == 1, "%d refunds were made, want 1", refunds)
		return nil
	})
}
