package mcpwire_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/mcpwire"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// answering is an Interrupter standing for a framework's pause in which a person answers: it
// grants (or denies) the request it is handed, then resumes with where the wait stands.
type answering struct {
	g     *latch.Guard
	deny  bool
	calls atomic.Int32
}

func (a *answering) Interrupt(ctx context.Context, r *latch.Refusal) (interrupt.Answer, error) {
	a.calls.Add(1)
	answer := a.g.Approve
	if a.deny {
		answer = a.g.Deny
	}
	if _, err := answer(ctx, r.ApprovalID, "alice"); err != nil {
		return interrupt.Answer{}, err
	}
	return interrupt.Check(ctx, a.g, r)
}

// A call answered approval_required waits on ToolCall.Interrupter: granted inside the wait, the
// call runs again, exactly once, and its result is the tool's, the grant spent; denied, it is
// refused approval_denied naming the request and the tool never runs. Keyed calls too.
func TestRunThroughInterrupter(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			pol, err := policy.Parse("latch.yaml", []byte(runPolicy))
			if err != nil {
				t.Fatal(err)
			}
			g, err := latch.Open(t.Context(), &latch.Config{Policy: pol, StoreURL: testdb.URL(t, backend, "mcpwireint")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = g.Close() })
			ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
			for i, key := range []string{"", "key-i"} {
				var runs atomic.Int32
				tool := func(_ context.Context, args json.RawMessage) (any, bool, error) {
					runs.Add(1)
					return map[string]any{"refund_id": "rf_1"}, false, nil
				}
				call := func(order string, itr interrupt.Interrupter[context.Context]) (any, error) {
					k := key
					if k != "" {
						k += "-" + order
					}
					return mcpwire.Run(ctx, g, &mcpwire.ToolCall{Action: "pay.refund", RequestKey: k, Interrupter: itr,
						Arguments: json.RawMessage(`{"order_id":"` + order + `","amount":500}`)}, tool)
				}

				grant := &answering{g: g}
				res, err := call(fmt.Sprintf("g%d", i), grant)
				if err != nil {
					t.Fatalf("key %q: granted call = %v, want the tool's result", key, err)
				}
				if m, ok := res.(map[string]any); !ok || m["refund_id"] != "rf_1" {
					t.Errorf("key %q: granted call's result = %#v, want the tool's", key, res)
				}
				if n, c := runs.Load(), grant.calls.Load(); n != 1 || c != 1 {
					t.Errorf("key %q: tool ran %d times, interrupted %d times; want 1 and 1", key, n, c)
				}
				if as, err := g.Store().Approvals(ctx, store.ApprovalFilter{Status: store.Consumed}); err != nil || len(as) != i+1 {
					t.Errorf("key %q: consumed requests = %d (%v), want %d: the grant spent", key, len(as), err, i+1)
				}

				runs.Store(0)
				deny := &answering{g: g, deny: true}
				_, err = call(fmt.Sprintf("d%d", i), deny)
				var we *mcpwire.Error
				if !errors.As(err, &we) || we.Code != mcpwire.CodeApprovalRefused || we.Data.Reason != "approval_denied" || we.Data.ApprovalID == "" || (key == "" && we.Data.ReceiptID == "") {
					t.Errorf("key %q: denied call = %v (%+v), want %d approval_denied naming the request (unkeyed: with a receipt)", key, err, we, mcpwire.CodeApprovalRefused)
				}
				if n := runs.Load(); n != 0 {
					t.Errorf("key %q: tool ran %d times after a denial, want 0", key, n)
				}
			}
		})
	}
}
