package latch_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchkit/latch"
)

// A grant bound to tasks lets its holder act only inside the work it names. The task is given
// per call with WithTask (or Options.Task); it is recorded on the receipt and is not part of the
// action hash.
func ExampleWithTask() {
	g, done := exampleGuard(`
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
authority:
  grants:
    - id: ticket-charges
      subject: { agent: billing-worker }
      actions: [billing.charge]
      tasks: ["ticket:FIN-*"]
`)
	defer done()

	charge := latch.Protect(g, "billing.charge", func(ctx context.Context, inv Invoice) (string, error) {
		return "ch_" + inv.InvoiceID, nil
	}, nil)
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})

	id, err := charge(latch.WithTask(ctx, "ticket:FIN-7"), Invoice{InvoiceID: "inv_1", Amount: 100})
	fmt.Println(id, err)

	_, err = charge(latch.WithTask(ctx, "ticket:OPS-7"), Invoice{InvoiceID: "inv_2", Amount: 100})
	var ae *latch.AuthorityError
	if errors.As(err, &ae) {
		fmt.Println("refused:", ae.Reason, "on", ae.Dimension)
	}
	// Output:
	// ch_inv_1 <nil>
	// refused: no_authority on tasks
}
