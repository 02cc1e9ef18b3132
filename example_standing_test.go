package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

const exampleStandingPolicy = `
schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer }
    decision: approve
    approvers:
      standing: { max_uses: 10, max_for: 1h }
`

// A person grants the first refund and, with it, a standing approval of two more refunds of
// up to 500 for any order. The next refunds run without asking anyone, until the standing
// approval is spent; one outside its bounds is put before a person again.
func ExampleGuard_Standings() {
	g, done := exampleGuard(exampleStandingPolicy)
	defer done()
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "support-bot"})
	refund := func(order string, amount int) error {
		args, _ := json.Marshal(map[string]any{"order_id": order, "amount": amount})
		_, err := g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: args},
			func(context.Context, json.RawMessage) (any, error) { return "refunded", nil })
		return err
	}
	var asked *latch.ApprovalRequiredError
	if err := refund("o-1", 120); errors.As(err, &asked) {
		_, err := g.Answer(context.Background(), &store.AnswerRequest{ID: asked.ApprovalID, Grant: true, Approver: "alice",
			Standing: &store.StandingTerms{Uses: 2, For: store.Duration(time.Hour), Max: map[string]int64{"amount": 500}, Vary: []string{"order_id"}}})
		fmt.Println("granted with a standing approval:", err == nil)
	}
	for _, c := range []struct {
		order  string
		amount int
	}{{"o-2", 300}, {"o-3", 900}, {"o-4", 450}, {"o-5", 10}} {
		err := refund(c.order, c.amount)
		switch {
		case err == nil:
			fmt.Println(c.order, "refunded")
		case errors.As(err, &asked):
			fmt.Println(c.order, "needs a person")
		default:
			fmt.Println(c.order, latch.RefusalOf(err).Reason)
		}
	}
	list, _ := g.Standings(context.Background(), store.StandingFilter{})
	fmt.Printf("%d of %d uses, %s\n", list[0].Uses, list[0].Terms.Uses, store.StandingState(list[0], time.Now()))
	// Output:
	// granted with a standing approval: true
	// o-2 refunded
	// o-3 needs a person
	// o-4 refunded
	// o-5 needs a person
	// 2 of 2 uses, exhausted
}
