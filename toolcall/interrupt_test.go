package toolcall_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/toolcall"
)

const interruptPolicy = `schema: latch.policy/v1
actions:
  refund:
    effect: "refund:{order_id}"
    rules:
      - when: { amount_lte: 1000 }
        decision: allow
      - decision: approve
`

// answering is an Interrupter standing for a framework's pause in which a person answers: it
// grants or denies the request it is handed, or resolves the unknown effect as failed (nothing
// happened), then resumes with where the wait stands.
type answering struct {
	g     *latch.Guard
	deny  bool
	calls atomic.Int32
}

func (a *answering) Interrupt(ctx context.Context, r *latch.Refusal) (interrupt.Answer, error) {
	a.calls.Add(1)
	var err error
	switch {
	case r.Kind != latch.KindApprovalRequired:
		_, err = a.g.Resolve(ctx, r.EffectKey, store.Failed, "alice")
	case a.deny:
		_, err = a.g.Deny(ctx, r.ApprovalID, "alice")
	default:
		_, err = a.g.Approve(ctx, r.ApprovalID, "alice")
	}
	if err != nil {
		return interrupt.Answer{}, err
	}
	return interrupt.Check(ctx, a.g, r)
}

// With Config.Interrupter, a call answered approval_required waits on it: granted inside the
// wait, it is dispatched again and runs once, its result the tool's; denied, it is refused
// approval_denied and never runs. A call whose outcome is unknown waits too: resolved failed, it
// runs again, once. Without an Interrupter the same calls answer pending and unknown at once.
func TestDispatchThroughInterrupter(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			pol, err := policy.Parse("latch.yaml", []byte(interruptPolicy))
			if err != nil {
				t.Fatal(err)
			}
			g, err := latch.Open(t.Context(), &latch.Config{Policy: pol, StoreURL: testdb.URL(t, backend, "toolcallint")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = g.Close() })
			runs := map[string]int{}
			var lost atomic.Bool
			handler := toolcall.Func(func(_ context.Context, a struct {
				OrderID string `json:"order_id"`
			}) (map[string]string, error) {
				runs[a.OrderID]++
				if strings.HasPrefix(a.OrderID, "lost-") && !lost.Swap(true) {
					return nil, errors.New("read tcp 10.0.0.7:443: i/o timeout") // the first reply is lost
				}
				return map[string]string{"refund_id": "rf_" + a.OrderID}, nil
			})
			registry := func(itr interrupt.Interrupter[context.Context]) *toolcall.Registry {
				reg := toolcall.New(g, &toolcall.Config{Principal: latch.Principal{Agent: "bot"}, Interrupter: itr})
				if err := reg.Register(toolcall.Tool{Name: "refund", Handler: handler}); err != nil {
					t.Fatal(err)
				}
				return reg
			}
			call := func(id, order string, amount int) toolcall.Call {
				args, _ := json.Marshal(map[string]any{"order_id": order, "amount": amount})
				return toolcall.Call{ID: id, Name: "refund", Arguments: args}
			}
			ctx := t.Context()

			grant := &answering{g: g}
			r := registry(grant).Dispatch(ctx, call("c1", "o-g", 5000))
			if r.Status != toolcall.StatusOK || r.Content != `{"refund_id":"rf_o-g"}` || r.CallID != "c1" {
				t.Errorf("granted call = %s %q (call %q), want ok with the tool's result", r.Status, r.Content, r.CallID)
			}
			if runs["o-g"] != 1 || grant.calls.Load() != 1 {
				t.Errorf("granted call ran %d times, interrupted %d times; want 1 and 1", runs["o-g"], grant.calls.Load())
			}

			deny := &answering{g: g, deny: true}
			r = registry(deny).Dispatch(ctx, call("c2", "o-d", 5000))
			if r.Status != toolcall.StatusRefused || r.Refusal == nil || r.Refusal.Reason != latch.ReasonApprovalDenied ||
				!strings.HasPrefix(r.Content, "approval_denied: ") || !r.IsError || r.CallID != "c2" || r.Receipt == nil {
				t.Errorf("denied call = %s %q %+v (receipt %v), want refused approval_denied with a receipt", r.Status, r.Content, r.Refusal, r.Receipt)
			}
			if runs["o-d"] != 0 {
				t.Errorf("denied call ran %d times, want 0", runs["o-d"])
			}

			resolve := &answering{g: g}
			r = registry(resolve).Dispatch(ctx, call("c3", "lost-1", 5))
			if r.Status != toolcall.StatusOK || r.Content != `{"refund_id":"rf_lost-1"}` {
				t.Errorf("call resolved failed = %s %q, want ok once run again", r.Status, r.Content)
			}
			if runs["lost-1"] != 2 || resolve.calls.Load() != 1 {
				t.Errorf("call resolved failed ran %d times, interrupted %d times; want 2 and 1", runs["lost-1"], resolve.calls.Load())
			}

			if r := registry(nil).Dispatch(ctx, call("c4", "o-n", 5000)); r.Status != toolcall.StatusPending || runs["o-n"] != 0 {
				t.Errorf("call without an Interrupter = %s (ran %d), want pending at once", r.Status, runs["o-n"])
			}
		})
	}
}
