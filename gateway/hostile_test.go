package gateway_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/internal/hostile"
	"github.com/latchkit/latch/store"
)

// TestHostileKeysInRefusals: for every key shape an agent can send (internal/hostile.Keys, as
// the order id of refund:{order_id}), the duplicate of a refund is refused with data naming
// exactly that key — never another — and a message that shows its invisible characters as
// escapes. A key longer than the store keeps is refused before anything runs, saying why.
func TestHostileKeysInRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	for _, k := range hostile.Keys {
		key := "refund:" + k.Value
		_, err := refund(ctx, e.agent, k.Value, 100)
		if len(key) > store.MaxText {
			if _, r := refusalOf(t, err); !strings.Contains(r.Detail, "effect key") {
				t.Errorf("refund of the %s key = %+v, want refused naming the effect key", k.Name, r)
			}
			continue
		}
		if err != nil {
			t.Errorf("refund of the %s key %q = %v", k.Name, key, err)
			continue
		}
		_, err = refund(ctx, e.agent, k.Value, 100)
		code, r := refusalOf(t, err)
		if code != gateway.CodeDuplicate || r.EffectKey != key {
			t.Errorf("duplicate of the %s key = %d, effect_key %q; want %d naming %q", k.Name, code, r.EffectKey, gateway.CodeDuplicate, key)
		}
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			if inv := hostile.Invisible(we.Message); len(inv) > 0 {
				t.Errorf("the refusal of the %s key shows invisible characters raw in its message: %q", k.Name, we.Message)
			}
		}
	}
}

// TestHostileArguments: arguments nested deep and a megabyte of arguments are refused with an
// error that says something, or run within bounds — never a crash or a hang — and the gateway
// serves the next call. A megabyte of order id is refused naming the effect key. Arguments
// nested 1,000 deep or more end the sender's session: the MCP SDK closes a connection whose
// message it cannot decode (nested past its decoder's depth) rather than answering it; the
// gateway goes on serving every other session.
func TestHostileArguments(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	for _, c := range []struct {
		name     string
		args     map[string]any
		mayClose bool   // the SDK may end this session
		detail   string // when set, the refusal says this
	}{
		{"nested 500 deep", map[string]any{"order_id": "deep500", "amount": 1, "memo": rawJSON(hostile.DeepJSON(500))}, false, ""},
		{"nested 9,000 deep", map[string]any{"order_id": "deep9k", "amount": 1, "memo": rawJSON(hostile.DeepJSON(9000))}, true, ""},
		{"a megabyte of text", map[string]any{"order_id": "big", "amount": 1, "memo": strings.Repeat("x", 1<<20)}, false, ""},
		{"a megabyte of order id", map[string]any{"order_id": strings.Repeat("x", 1<<20), "amount": 1}, false, "effect key"},
	} {
		cs := connect(t, e.gw)
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "payments.refund", Arguments: c.args})
		if d := time.Since(t0); d > 10*time.Second {
			t.Errorf("%s: answered in %v, want within 10s", c.name, d)
		}
		switch {
		case err != nil && strings.TrimSpace(err.Error()) == "":
			t.Errorf("%s: refused with an empty error", c.name)
		case err == nil && res == nil:
			t.Errorf("%s: no result and no error", c.name)
		case c.detail != "" && (err == nil || !strings.Contains(err.Error(), c.detail)):
			t.Errorf("%s = %v, want refused saying %q", c.name, err, c.detail)
		}
		if !c.mayClose {
			if _, err := refund(ctx, cs, "after-"+strings.ReplaceAll(c.name, " ", "-"), 100); err != nil {
				t.Errorf("%s: the same session's next refund = %v", c.name, err)
			}
		}
		if _, err := refund(ctx, connect(t, e.gw), "fresh-"+strings.ReplaceAll(c.name, " ", "-"), 100); err != nil {
			t.Errorf("%s: a new session's refund = %v", c.name, err)
		}
	}
}

// connect connects a new agent session to gw, ended with the test.
func connect(t *testing.T, gw *gateway.Gateway) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := gw.Server().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// rawJSON is JSON text sent as is.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }
