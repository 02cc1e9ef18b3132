package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/latchkit/latch"
)

// keyNamedPolicy names the effect of order.place with the caller's request key.
const keyNamedPolicy = `
schema: latch.policy/v1
actions:
  order.place:
    effect: "order:{$request_key}"
    decision: allow
`

// TestEffectNamedByRequestKey: an effect template with {$request_key} renders the caller's own
// key; the same key with the same arguments is the same effect (replayed while it runs, a
// committed duplicate after), with other arguments a key_conflict that writes nothing to the
// effect, another key another effect, and a call without a key is refused request_key_required
// before any reservation — on both stores, through Begin (where the key is stored) and Execute.
func TestEffectNamedByRequestKey(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, keyNamedPolicy)
			keyed := func(k string) context.Context { return latch.WithRequestKey(agent(t.Context()), k) }
			call := func(sku string) *latch.Call {
				return &latch.Call{Action: "order.place", Arguments: json.RawMessage(`{"sku":"` + sku + `"}`)}
			}
			first, err := e.g.Begin(keyed("k-1"), call("a"))
			if err != nil {
				t.Fatal(err)
			}
			if first.EffectKey != "order:k-1" {
				t.Errorf("effect key = %q, want order:k-1", first.EffectKey)
			}
			again, err := e.g.Begin(keyed("k-1"), call("a"))
			if err != nil || !again.Replayed || again.ActionID != first.ActionID {
				t.Errorf("the same key and arguments while the first runs: %+v, %v; want a replay of %s", again, err, first.ActionID)
			}
			var ee *latch.EffectError
			if _, err := e.g.Begin(keyed("k-1"), call("b")); !errors.As(err, &ee) || ee.Reason != "key_conflict" || ee.State != latch.StateExecuting {
				t.Errorf("other arguments under the key while the first runs: %v, want key_conflict on an executing record", err)
			}
			if _, err := e.g.Finish(agent(t.Context()), first.ActionID, latch.OutcomeCommitted, json.RawMessage(`{"ok":true}`), ""); err != nil {
				t.Fatal(err)
			}
			if _, err := e.g.Begin(keyed("k-1"), call("b")); !errors.As(err, &ee) || ee.Reason != "key_conflict" || ee.State != latch.StateCommitted {
				t.Errorf("other arguments under the key after it committed: %v, want key_conflict on a committed record", err)
			}
			if _, err := e.g.Begin(keyed("k-1"), call("a")); !errors.As(err, &ee) || ee.Reason != "committed" {
				t.Errorf("the same call after it committed: %v, want committed", err)
			}
			eff, err := e.g.Store().Effect(t.Context(), "order:k-1")
			if err != nil || eff.Attempt != 1 || eff.ActionID != first.ActionID {
				t.Errorf("effect order:k-1 = %+v, %v; want attempt 1 of %s", eff, err, first.ActionID)
			}
			// Execute renders the key too (it keeps no request key row: the effect decides).
			runs := 0
			run := func(context.Context, json.RawMessage) (any, error) { runs++; return "done", nil }
			if _, err := e.g.Execute(keyed("k-2"), call("a"), run); err != nil {
				t.Fatalf("another key: %v", err)
			}
			if _, err := e.g.Execute(keyed("k-2"), call("c"), run); !errors.As(err, &ee) || ee.Reason != "key_conflict" {
				t.Errorf("Execute, other arguments under k-2: %v, want key_conflict", err)
			}
			before := receiptCount(t, e.g)
			_, err = e.g.Execute(agent(t.Context()), call("a"), run)
			if r := latch.RefusalOf(err); r == nil || r.Reason != latch.ReasonRequestKeyRequired || r.Kind != latch.KindInvalidArgument {
				t.Errorf("a call without a request key: %v, want request_key_required", err)
			}
			if _, err := e.g.Begin(agent(t.Context()), call("a")); latch.ReasonOf(err) != string(latch.ReasonRequestKeyRequired) {
				t.Errorf("Begin without a request key: %v, want request_key_required", err)
			}
			if runs != 1 {
				t.Errorf("the executor ran %d times, want once", runs)
			}
			if n := receiptCount(t, e.g); n-before > 2 {
				t.Errorf("the refusals without a key wrote %d receipts, want at most one each", n-before)
			}
		})
	}
}
