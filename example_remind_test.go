package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

// An unanswered request is reminded about after remind_after and escalated after
// escalate_after, once each, by the sweeper; from then on the people it escalates to may answer.
func ExampleGuard_Sweep_reminders() {
	p, err := policy.Parse("latch.yaml", []byte(`
schema: latch.policy/v1
approvers:
  roles:
    payments-leads: [alice]
actions:
  billing.refund:
    effect: "refund:{invoice_id}"
    decision: approve
    approval_ttl: 2h
    approvers:
      roles: [payments-leads]
      remind_after: 15m
      escalate_after: 1h
      escalate_to: {people: [dana]}
`))
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "latch-example-")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	g, err := latch.Open(context.Background(), &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(dir, "state.db"),
		Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})
	_, err = g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: json.RawMessage(`{"invoice_id":"inv_7"}`)},
		func(context.Context, json.RawMessage) (any, error) { return "refunded", nil })
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		panic(err)
	}
	for _, wait := range []time.Duration{20 * time.Minute, 10 * time.Minute, 40 * time.Minute} {
		now = now.Add(wait)
		rep, _ := g.Sweep(context.Background())
		fmt.Printf("%s: reminded %d, escalated %d\n", now.Format("15:04"), len(rep.Reminded), len(rep.Escalated))
	}
	a, err := g.Approve(context.Background(), ar.ApprovalID, "dana")
	fmt.Println(a.Status, err)
	// Output:
	// 09:20: reminded 1, escalated 0
	// 09:30: reminded 0, escalated 0
	// 10:10: reminded 0, escalated 1
	// granted <nil>
}
