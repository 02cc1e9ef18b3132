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

// With approvers.on_expiry: deny, a request nobody answered within its approval_ttl is written
// denied, by latch:expiry, rather than expired; the call presenting it is refused
// approval_denied.
func ExampleGuard_Sweep_onExpiryDeny() {
	p, err := policy.Parse("latch.yaml", []byte(`
schema: latch.policy/v1
actions:
  billing.refund:
    effect: "refund:{invoice_id}"
    decision: approve
    approval_ttl: 1h
    approvers:
      on_expiry: deny
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
	call := &latch.Call{Action: "billing.refund", Arguments: json.RawMessage(`{"invoice_id":"inv_7"}`)}
	refund := func(context.Context, json.RawMessage) (any, error) { return "refunded", nil }
	_, err = g.Execute(ctx, call, refund)
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		panic(err)
	}
	now = now.Add(time.Hour)
	rep, _ := g.Sweep(context.Background())
	fmt.Println("denied at expiry:", len(rep.DeniedAtExpiry))
	a, _ := g.Store().Approval(context.Background(), ar.ApprovalID)
	fmt.Println(a.Status, "by", a.Approver)
	_, err = g.Execute(latch.WithApproval(ctx, ar.ApprovalID), call, refund)
	fmt.Println(latch.RefusalOf(err).Reason)
	// Output:
	// denied at expiry: 1
	// denied by latch:expiry
	// approval_denied
}
