package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// keyedCall calls tool of the test upstream with a request key in _meta.
func keyedCall(ctx context.Context, cs *mcp.ClientSession, tool string, args any, key any) (*mcp.CallToolResult, error) {
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: "up." + tool, Arguments: args,
		Meta: mcp.Meta{gateway.MetaRequestKey: key}})
}

// connectAgent serves another gateway on e's guard (its own upstream session, the same store
// and ledger), whose credential-less sessions are principal p, and connects an agent to it.
func connectAgent(t *testing.T, e *gwEnv, p latch.Principal) *mcp.ClientSession {
	t.Helper()
	ctx := t.Context()
	gw, err := gateway.New(ctx, &gateway.Config{Guard: e.guard, Principal: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	st, ct := mcp.NewInMemoryTransports()
	ss, err := gw.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// A call retried under its request key after its outcome is recorded is decided as any
// duplicate is (committed, with the stored result); the upstream ran once. The key is the
// principal's, for one call: other arguments, or another principal, under it are refused
// request_key_mismatch, and nothing is sent.
func TestRequestKeyRetryAfterOutcome(t *testing.T) {
	t.Parallel()
	e := startGateway(t, "stdio", keyedActions, latch.Config{}, gateway.Config{})
	ctx := t.Context()
	if _, err := keyedCall(ctx, e.agent, "act", actArgs{ID: "a"}, "key-1"); err != nil {
		t.Fatalf("first call: %v", err)
	}
	_, err := keyedCall(ctx, e.agent, "act", actArgs{ID: "a"}, "key-1")
	if code, r := refusalOf(t, err); code != gateway.CodeDuplicate || r.Reason != "committed" || len(r.Result) == 0 {
		t.Errorf("retry = %d %+v, want %d committed with the stored result", code, r, gateway.CodeDuplicate)
	}
	_, err = keyedCall(ctx, e.agent, "act", actArgs{ID: "a", Extra: "other"}, "key-1")
	if code, r := refusalOf(t, err); code != gateway.CodeDenied || r.Kind != "request_key_mismatch" || r.Reason != "request_key_other_action" {
		t.Errorf("other arguments under the key = %+v, want request_key_mismatch (other action)", r)
	}
	other := connectAgent(t, e, latch.Principal{Agent: "other-bot"})
	_, err = keyedCall(ctx, other, "act", actArgs{ID: "b"}, "key-1")
	if code, r := refusalOf(t, err); code != gateway.CodeDenied || r.Kind != "request_key_mismatch" || r.Reason != "request_key_other_principal" {
		t.Errorf("another principal under the key = %+v, want request_key_mismatch (other principal)", r)
	}
	if n := e.ledger.count(t, "act a"); n != 1 {
		t.Errorf("the upstream acted on a %d times, want once", n)
	}
	if n := e.ledger.count(t, "act b"); n != 0 {
		t.Errorf("the upstream acted on b %d times, want never", n)
	}
	if _, err := e.guard.Store().Effect(ctx, "act:b"); err == nil {
		t.Error("the refused call under another principal's key wrote effect act:b")
	}
}

// A call retried under its request key while the first is still running is handed the first's
// reservation: it is not refused in_progress, the upstream is not called again, and it answers
// what the first answers — whether the first runs in this gateway or in another one serving
// the same store.
func TestRequestKeyReplayWhileRunning(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"same gateway", "other gateway"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			e := startGateway(t, "stdio", keyedActions, latch.Config{}, gateway.Config{})
			retrier := e.agent
			if where == "other gateway" {
				retrier = connectAgent(t, e, latch.Principal{Agent: "support-bot"})
			}
			ctx1, cancel1 := context.WithCancel(t.Context())
			defer cancel1()
			first := make(chan error, 1)
			go func() { _, err := keyedCall(ctx1, e.agent, "hang", actArgs{ID: "h"}, "key-h"); first <- err }()
			e.ledger.waitFor(t, "hang h")
			second := make(chan error, 1)
			go func() { _, err := keyedCall(t.Context(), retrier, "hang", actArgs{ID: "h"}, "key-h"); second <- err }()
			select {
			case err := <-second:
				code, r := refusalOf(t, err)
				t.Fatalf("the retry answered while the first call was running: %d %+v", code, r)
			case <-time.After(500 * time.Millisecond):
			}
			cancel1() // the first call ends: sent and cancelled, its outcome unknown
			<-first
			var err error
			select {
			case err = <-second:
			case <-time.After(30 * time.Second):
				t.Fatal("the retry never answered after the first call ended")
			}
			code, r := refusalOf(t, err)
			if r.Reason == "in_progress" || (code != gateway.CodeAmbiguous && code != gateway.CodeEffectAmbiguous) {
				t.Errorf("retry = %d %+v, want the first call's ambiguous outcome", code, r)
			}
			if eff := e.effect(t, "hang:h"); eff.State != store.Ambiguous || eff.Attempt != 1 {
				t.Errorf("effect = %s attempt %d, want ambiguous attempt 1", eff.State, eff.Attempt)
			}
			if n := e.ledger.count(t, "hang h"); n != 1 {
				t.Errorf("the upstream was called %d times, want once", n)
			}
		})
	}
}

// A request key that is not a string or not a request key is refused invalid_argument before
// anything is decided, written or sent.
func TestRequestKeyInvalid(t *testing.T) {
	t.Parallel()
	e := startGateway(t, "stdio", keyedActions, latch.Config{}, gateway.Config{})
	for _, key := range []any{5, "", "has space", strings.Repeat("k", store.MaxRequestKey+1), "nl\n"} {
		_, err := keyedCall(t.Context(), e.agent, "act", actArgs{ID: "x"}, key)
		if code, r := refusalOf(t, err); code != gateway.CodeDenied || r.Reason != "invalid_argument" || !strings.Contains(r.Detail, gateway.MetaRequestKey) {
			t.Errorf("key %q = %d %+v, want %d invalid_argument naming %s", key, code, r, gateway.CodeDenied, gateway.MetaRequestKey)
		}
	}
	if lines := e.ledger.lines(t); len(lines) != 0 {
		t.Errorf("ledger = %q, want nothing sent", lines)
	}
	if _, err := e.guard.Store().Effect(t.Context(), "act:x"); err == nil {
		t.Error("a refused call wrote effect act:x")
	}
}
