package interrupt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/policy"
)

// A call refused approval_required is interruptible: Check reads where its wait stands, and once
// a person grants the request, the same call run again — without the request's id — runs once.
func ExampleCheck() {
	dir, _ := os.MkdirTemp("", "interrupt")
	defer os.RemoveAll(dir)
	p, _ := policy.Parse("latch.yaml", []byte("schema: latch.policy/v1\nactions:\n  payout.send:\n    effect: \"payout:{id}\"\n    decision: approve\n"))
	g, err := latch.Open(context.Background(), &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(dir, "latch.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "worker"})
	call := &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"p1","amount":100}`)}
	pay := func(context.Context, json.RawMessage) (any, error) { fmt.Println("paid p1"); return nil, nil }

	_, err = g.Execute(ctx, call, pay)
	r := latch.RefusalOf(err)
	fmt.Println(r.Reason, r.EffectKey, interrupt.Interruptible(r))
	ans, _ := interrupt.Check(ctx, g, r)
	fmt.Println(ans.Status)

	_, _ = g.Approve(context.Background(), r.ApprovalID, "alice")
	ans, _ = interrupt.Check(ctx, g, r)
	fmt.Println(ans.Status, ans.By)
	if _, err := g.Execute(ctx, call, pay); err != nil { // resumed: the call again, unchanged
		fmt.Println(err)
	}
	// Output:
	// approval_required payout:p1 true
	// waiting
	// resume alice
	// paid p1
}
