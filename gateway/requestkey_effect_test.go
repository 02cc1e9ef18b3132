package gateway_test

import (
	"context"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
)

// keyNamedActions name the effects of act and hang with the agent's request key.
const keyNamedActions = `  mcp.up.act:
    effect: "act:{$request_key}"
    decision: allow
  mcp.up.hang:
    effect: "hang:{$request_key}"
    decision: allow
`

// An effect template with {$request_key} lets the agent name the effect with its own key: the
// same key and arguments is one effect (a committed duplicate with the stored result), other
// arguments under the key a key_conflict (running or committed), another key another effect,
// and a call without a key is refused request_key_required; the upstream is called only for
// the calls that reserve.
func TestEffectNamedByAgentKey(t *testing.T) {
	t.Parallel()
	e := startGateway(t, "stdio", keyNamedActions, latch.Config{}, gateway.Config{})
	ctx := t.Context()
	if _, err := keyedCall(ctx, e.agent, "act", actArgs{ID: "a"}, "k-1"); err != nil {
		t.Fatalf("first call: %v", err)
	}
	if eff := e.effect(t, "act:k-1"); eff.State != latch.StateCommitted {
		t.Errorf("effect act:k-1 is %s, want committed", eff.State)
	}
	_, err := keyedCall(ctx, e.agent, "act", actArgs{ID: "a"}, "k-1")
	if code, r := refusalOf(t, err); code != gateway.CodeDuplicate || r.Reason != "committed" || len(r.Result) == 0 {
		t.Errorf("the same call again = %d %+v, want committed with the stored result", code, r)
	}
	_, err = keyedCall(ctx, e.agent, "act", actArgs{ID: "b"}, "k-1")
	if code, r := refusalOf(t, err); code != gateway.CodeKeyConflict || r.Reason != "key_conflict" || r.EffectState != "committed" || len(r.Result) != 0 {
		t.Errorf("other arguments under the key = %d %+v, want key_conflict on the committed effect, without its result", code, r)
	}
	if _, err := keyedCall(ctx, e.agent, "act", actArgs{ID: "a"}, "k-2"); err != nil {
		t.Errorf("the same arguments under another key (another effect): %v", err)
	}
	_, err = e.call(ctx, "act", actArgs{ID: "c"})
	if code, r := refusalOf(t, err); code != gateway.CodeDenied || r.Kind != "invalid_argument" || r.Reason != "request_key_required" {
		t.Errorf("a call without a key = %d %+v, want request_key_required", code, r)
	}
	// Other arguments while the first call still runs.
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := keyedCall(hctx, e.agent, "hang", actArgs{ID: "h"}, "k-h"); done <- err }()
	e.ledger.waitFor(t, "hang h")
	_, err = keyedCall(ctx, e.agent, "hang", actArgs{ID: "h2"}, "k-h")
	if code, r := refusalOf(t, err); code != gateway.CodeKeyConflict || r.Reason != "key_conflict" || r.EffectState != "in_progress" {
		t.Errorf("other arguments under a running call's key = %d %+v, want key_conflict on the running (in_progress) effect", code, r)
	}
	cancel()
	<-done
	for line, want := range map[string]int{"act a": 2, "act b": 0, "act c": 0, "hang h2": 0} {
		if n := e.ledger.count(t, line); n != want {
			t.Errorf("the upstream saw %q %d times, want %d", line, n, want)
		}
	}
}
