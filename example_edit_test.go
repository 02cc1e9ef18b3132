package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// An approver lowers a refund when granting it. The call that asked for 50000 is refused with
// the approved arguments; presented with them, under the same approval, it runs once, and its
// receipt records what was requested and who edited it.
func ExampleGuard_Approved() {
	g, done := exampleGuard(`
schema: latch.policy/v1
actions:
  billing.refund:
    effect: "refund:{order_id}"
    decision: approve
    arguments:
      order_id: { type: string }
      amount: { type: integer, editable: { decrease: true, min: 100 } }
`)
	defer done()
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "refund-bot"})
	refund := func(ctx context.Context, args json.RawMessage) (*latch.Receipt, error) {
		return g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: args},
			func(_ context.Context, args json.RawMessage) (any, error) { return "refunded " + string(args), nil })
	}

	_, err := refund(ctx, json.RawMessage(`{"order_id":"o1","amount":50000}`))
	var req *latch.ApprovalRequiredError
	errors.As(err, &req)
	_, err = g.Answer(ctx, &store.AnswerRequest{ID: req.ApprovalID, Grant: true, Approver: "alice", Set: json.RawMessage(`{"amount":40000}`)})
	fmt.Println("edit:", err)

	ctx = latch.WithApproval(ctx, req.ApprovalID)
	_, err = refund(ctx, json.RawMessage(`{"order_id":"o1","amount":50000}`))
	var me *latch.ApprovalMismatchError
	errors.As(err, &me)
	fmt.Println("requested:", latch.RefusalOf(err).Reason, "approved:", string(me.Arguments))

	rc, err := refund(ctx, me.Arguments)
	fmt.Println(rc.Result, err, string(rc.ApprovalEdit.RequestedArguments), rc.ApprovalEdit.EditedBy)
	// Output:
	// edit: <nil>
	// requested: approval_mismatch approved: {"amount":40000,"order_id":"o1"}
	// committed <nil> {"amount":50000,"order_id":"o1"} [cli:alice]
}
