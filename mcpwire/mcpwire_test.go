package mcpwire_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/refusaltest"
	"github.com/latchkit/latch/mcpwire"
	"github.com/latchkit/latch/policy"
)

// TestMapTable holds the one MCP mapping to the one refusal table: every refusal gets the code
// of its kind, latch's reason word and the kind itself, and its data object says them.
func TestMapTable(t *testing.T) {
	t.Parallel()
	for _, tc := range refusaltest.Cases {
		code, r := mcpwire.Map("mcp.up.act", nil, tc.Err)
		if w := refusaltest.Wire[tc.Kind].Gateway; code != w || r.Reason != string(tc.Reason) || r.Kind != string(tc.Kind) {
			t.Errorf("%s: %d reason %q kind %q, want %d %q %q", tc.Name, code, r.Reason, r.Kind, w, tc.Reason, tc.Kind)
		}
		var back mcpwire.Refusal
		if err := json.Unmarshal(mcpwire.Data(r), &back); err != nil || back.Reason != r.Reason || back.Action != "mcp.up.act" {
			t.Errorf("%s: data %s decodes to %+v (%v)", tc.Name, mcpwire.Data(r), back, err)
		}
		we := mcpwire.NewError(code, r)
		if we.Error() != r.Detail || we.Code != code {
			t.Errorf("%s: NewError = %d %q, want %d %q", tc.Name, we.Code, we.Error(), code, r.Detail)
		}
	}
}

func TestRequestKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		meta    map[string]any
		want    string
		wantErr string
	}{
		{nil, "", ""},
		{map[string]any{mcpwire.MetaRequestKey: nil}, "", ""},
		{map[string]any{mcpwire.MetaRequestKey: "k-1"}, "k-1", ""},
		{map[string]any{mcpwire.MetaRequestKey: 7.0}, "", "_meta latch/request_key is float64, not a string"},
		{map[string]any{mcpwire.MetaRequestKey: ""}, "", "_meta latch/request_key"},
		{map[string]any{mcpwire.MetaRequestKey: "a b"}, "", "_meta latch/request_key"},
	} {
		got, err := mcpwire.RequestKey(tc.meta)
		switch {
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("RequestKey(%v) = %q, %v; want %q", tc.meta, got, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || latch.RefusalOf(err).Reason != "invalid_argument"):
			t.Errorf("RequestKey(%v) = %q, %v; want invalid_argument containing %q", tc.meta, got, err, tc.wantErr)
		}
	}
}

const runPolicy = `schema: latch.policy/v1
actions:
  pay.refund:
    effect: "refund:{order_id}"
    rules:
      - when: { amount_lte: 100 }
        decision: allow
      - decision: approve
`

func openGuard(t *testing.T) *latch.Guard {
	t.Helper()
	pol, err := policy.Parse("latch.yaml", []byte(runPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// TestRunOutcomes runs calls through Run on a real SQLite store: a result is committed and a
// duplicate refused with it; an isError result is ambiguous unless the tool's errors mean it did
// not act; a keyed call's retry is a duplicate; the tool never runs for a refused call.
func TestRunOutcomes(t *testing.T) {
	t.Parallel()
	g := openGuard(t)
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
	runs := 0
	tool := func(isError bool) mcpwire.Tool {
		return func(_ context.Context, args json.RawMessage) (any, bool, error) {
			runs++
			return map[string]any{"args": args}, isError, nil
		}
	}
	call := func(order, meaning, key string, isError bool) (any, *mcpwire.Error) {
		res, err := mcpwire.Run(ctx, g, &mcpwire.ToolCall{Action: "pay.refund", Arguments: json.RawMessage(`{"order_id":"` + order + `","amount":5}`),
			ErrorsMean: meaning, RequestKey: key}, tool(isError))
		var we *mcpwire.Error
		if err != nil && !errors.As(err, &we) {
			t.Fatalf("Run(%s) = %v (%T), want an *mcpwire.Error", order, err, err)
		}
		return res, we
	}
	if _, we := call("o1", "", "", false); we != nil {
		t.Fatalf("first o1 = %+v", we)
	}
	if _, we := call("o1", "", "", false); we == nil || we.Code != mcpwire.CodeDuplicate || len(we.Data.Result) == 0 {
		t.Errorf("second o1 = %+v, want a duplicate with the stored result", we)
	}
	if _, we := call("o2", "", "", true); we == nil || we.Code != mcpwire.CodeAmbiguous {
		t.Errorf("o2 with an error result = %+v, want %d ambiguous", we, mcpwire.CodeAmbiguous)
	}
	if _, we := call("o3", policy.ErrorsMeanNotExecuted, "", true); we == nil || we.Code != mcpwire.CodeNotExecuted || we.Data.EffectState != "failed" {
		t.Errorf("o3 with an error result that means not executed = %+v, want %d failed", we, mcpwire.CodeNotExecuted)
	}
	if _, we := call("o4", "", "key-4", false); we != nil {
		t.Fatalf("keyed o4 = %+v", we)
	}
	if _, we := call("o4", "", "key-4", false); we == nil || we.Code != mcpwire.CodeDuplicate || len(we.Data.Result) == 0 {
		t.Errorf("keyed o4 retried = %+v, want a duplicate with the stored result", we)
	}
	if runs != 4 { // o1, o2, o3 and o4 once each: never for a duplicate
		t.Errorf("the tool ran %d times, want 4", runs)
	}
}

// TestAwaitAnswer ends when the request is answered, and with ErrWaitEnded when the wait passes
// first.
func TestAwaitAnswer(t *testing.T) {
	t.Parallel()
	g := openGuard(t)
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
	_, err := mcpwire.Run(ctx, g, &mcpwire.ToolCall{Action: "pay.refund", Arguments: json.RawMessage(`{"order_id":"a","amount":500}`)},
		func(context.Context, json.RawMessage) (any, bool, error) {
			return nil, false, errors.New("must not run")
		})
	var we *mcpwire.Error
	if !errors.As(err, &we) || we.Code != mcpwire.CodeApprovalRequired || we.Data.ApprovalID == "" {
		t.Fatalf("Run of 500 = %v, want approval_required with an id", err)
	}
	id := we.Data.ApprovalID
	if err := mcpwire.AwaitAnswer(ctx, g.Store(), id, time.Now().Add(100*time.Millisecond), time.Now, nil); !errors.Is(err, mcpwire.ErrWaitEnded) {
		t.Errorf("AwaitAnswer of a pending request = %v, want ErrWaitEnded", err)
	}
	if _, err := g.Approve(ctx, id, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := mcpwire.AwaitAnswer(ctx, g.Store(), id, time.Now().Add(10*time.Second), time.Now, nil); err != nil {
		t.Errorf("AwaitAnswer of a granted request = %v, want nil", err)
	}
}

// TestRunKeyedReplay sends a keyed call again under its key while the first still runs: the
// retry never runs the tool, waits for the first's outcome, and is then refused as a committed
// duplicate with the stored result.
func TestRunKeyedReplay(t *testing.T) {
	t.Parallel()
	g := openGuard(t)
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
	var runs atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	tool := func(context.Context, json.RawMessage) (any, bool, error) {
		if runs.Add(1) == 1 {
			close(started)
			<-release
		}
		return map[string]any{"refund_id": "rf_1"}, false, nil
	}
	tc := func() *mcpwire.ToolCall {
		return &mcpwire.ToolCall{Action: "pay.refund", Arguments: json.RawMessage(`{"order_id":"k","amount":5}`), RequestKey: "retry-1"}
	}
	first := make(chan error, 1)
	go func() {
		_, err := mcpwire.Run(ctx, g, tc(), tool)
		first <- err
	}()
	<-started
	second := make(chan error, 1)
	go func() {
		_, err := mcpwire.Run(ctx, g, tc(), tool)
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("the retry answered while the first call ran: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first call: %v", err)
	}
	var we *mcpwire.Error
	if err := <-second; !errors.As(err, &we) || we.Code != mcpwire.CodeDuplicate || we.Data.Reason != "committed" || !strings.Contains(string(we.Data.Result), "rf_1") {
		t.Fatalf("retry = %v, want committed with the stored result", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

func TestTaskAndHop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header  []string
		meta    map[string]any
		want    string
		wantErr string
	}{
		{nil, nil, "", ""},
		{[]string{"T-1"}, nil, "T-1", ""},
		{nil, map[string]any{"latch/task": "T-2", "latch/hop": "T-2"}, "T-2", ""},
		{[]string{"T-3"}, map[string]any{"latch/task": "T-3", "latch/hop": "T-3"}, "T-3", ""},
		{[]string{"a", "b"}, nil, "", "header is given 2 times"},
		{nil, map[string]any{"latch/task": 1.0, "latch/hop": 1.0}, "", "is float64, not a string"},
		{[]string{"a"}, map[string]any{"latch/task": "b", "latch/hop": "b"}, "", `"a" and _meta`},
	} {
		task, err := mcpwire.Task(tc.header, tc.meta)
		switch {
		case tc.wantErr == "" && (err != nil || task != tc.want):
			t.Errorf("Task(%q, %v) = %q, %v; want %q", tc.header, tc.meta, task, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || latch.RefusalOf(err).Reason != "invalid_argument"):
			t.Errorf("Task(%q, %v) = %q, %v; want invalid_argument containing %q", tc.header, tc.meta, task, err, tc.wantErr)
		}
		hop, err := mcpwire.Hop(tc.header, tc.meta)
		switch {
		case tc.wantErr == "" && (err != nil || hop != tc.want):
			t.Errorf("Hop(%q, %v) = %q, %v; want %q", tc.header, tc.meta, hop, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || latch.RefusalOf(err).Reason != "authority_hop"):
			t.Errorf("Hop(%q, %v) = %q, %v; want authority_hop containing %q", tc.header, tc.meta, hop, err, tc.wantErr)
		}
	}
}
