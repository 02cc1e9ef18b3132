package mcpop_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/hostile"
	"github.com/latchkit/latch/mcpop"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHostileKeysResolveOwnEffect: every key shape an agent can send (internal/hostile.Keys),
// left ambiguous, is inspected and resolved by key through a real MCP client session: inspect
// shows the key's own attempt and no other's, and resolve settles that effect and nothing else.
// The plain key the decoys read as is resolved last, untouched until then.
func TestHostileKeysResolveOwnEffect(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pol, err := policy.Parse("latch.yaml", []byte("schema: latch.policy/v1\nactions:\n  any.call:\n    effect: \"{key}\"\n    arguments:\n      key: { type: string }\n    decision: allow\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	const victim = "pay:inv88"
	var keys []string
	actionOf := map[string]string{}
	for _, k := range hostile.Keys {
		if len(k.Value) > store.MaxText {
			continue
		}
		args, _ := json.Marshal(map[string]string{"key": k.Value})
		rc, err := g.Execute(latch.WithPrincipal(ctx, latch.Principal{Agent: "support-bot"}), &latch.Call{Action: "any.call", Arguments: args},
			func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("read timed out") })
		if !errors.Is(err, latch.ErrAmbiguous) {
			t.Fatalf("Execute(key %q) = %v, want ErrAmbiguous", k.Value, err)
		}
		keys = append(keys, k.Value)
		actionOf[k.Value] = rc.ActionID
	}
	op, err := mcpop.New(&mcpop.Config{Guard: g, Approver: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := op.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "operator"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	states := func() map[string]store.State {
		out := map[string]store.State{}
		for _, k := range keys {
			e, err := g.Store().Effect(ctx, k)
			if err != nil {
				t.Fatalf("Effect(%q): %v", k, err)
			}
			out[k] = e.State
		}
		return out
	}
	var order []string
	for _, k := range keys {
		if k != victim {
			order = append(order, k)
		}
	}
	for _, k := range append(order, victim) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "inspect", Arguments: map[string]any{"id": k}})
		if err != nil || res.IsError {
			t.Errorf("inspect %q = %v %s", k, err, errText(res))
		} else {
			doc, _ := json.Marshal(res.StructuredContent)
			if !strings.Contains(string(doc), actionOf[k]) {
				t.Errorf("inspect %q does not show its own attempt %s", k, actionOf[k])
			}
			for _, o := range keys {
				if o != k && strings.Contains(string(doc), actionOf[o]) {
					t.Errorf("inspect %q shows the attempt of ANOTHER key %q", k, o)
				}
			}
		}
		before := states()
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "resolve", Arguments: map[string]any{"effect_key": k, "to": "failed", "note": "checked"}})
		if err != nil || res.IsError {
			t.Errorf("resolve %q = %v %s", k, err, errText(res))
		}
		after := states()
		for _, o := range keys {
			switch {
			case o == k && after[o] != store.Failed:
				t.Errorf("resolve %q left it %s", k, after[o])
			case o != k && after[o] != before[o]:
				t.Errorf("resolve %q changed ANOTHER effect %q: %s → %s", k, o, before[o], after[o])
			}
		}
	}
}
