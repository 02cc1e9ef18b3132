package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/latchkit/latch/auth"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gwEnv is a gateway on a real SQLite store in front of the test upstream, with an agent
// connected over an in-process transport.
type gwEnv struct {
	guard  *latch.Guard
	gw     *gateway.Gateway
	agent  *mcp.ClientSession
	ledger upstreamLedger
	db     string
}

// keyedActions lists act and hang of the test upstream, each with an effect key.
const keyedActions = `  mcp.up.act:
    effect: "act:{id}"
    decision: allow
  mcp.up.hang:
    effect: "hang:{id}"
    decision: allow
`

// startGateway starts the test upstream over transport (stdio, sse or json), a guard of lc on
// a policy of its section and actions, a gateway of gc in front, and connects an agent.
func startGateway(t *testing.T, transport, actions string, lc latch.Config, gc gateway.Config) *gwEnv {
	t.Helper()
	return startGatewayTools(t, transport, "", actions, lc, gc)
}

// startGatewayTools is startGateway with the tool settings (a YAML mapping body, indented for
// the upstream's tools: key) of the upstream.
func startGatewayTools(t *testing.T, transport, tools, actions string, lc latch.Config, gc gateway.Config) *gwEnv {
	t.Helper()
	ctx := t.Context()
	section, ledger := upstreamSection(t, transport)
	if tools != "" {
		section += "      tools:\n" + tools
	}
	pol, err := policy.Parse("latch.yaml", []byte("schema: latch.policy/v1\n"+section+"actions:\n"+actions))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "state.db")
	lc.Policy, lc.StoreURL = pol, "sqlite:"+db
	g, err := latch.Open(ctx, &lc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	gc.Guard = g
	if gc.Principal.Agent == "" {
		gc.Principal = latch.Principal{Agent: "support-bot"}
	}
	gw, err := gateway.New(ctx, &gc)
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
	return &gwEnv{guard: g, gw: gw, agent: cs, ledger: ledger, db: db}
}

func (e *gwEnv) call(ctx context.Context, tool string, args any) (*mcp.CallToolResult, error) {
	return e.agent.CallTool(ctx, &mcp.CallToolParams{Name: "up." + tool, Arguments: args})
}

func (e *gwEnv) effect(t *testing.T, key string) *store.Effect {
	t.Helper()
	eff, err := e.guard.Store().Effect(t.Context(), key)
	if err != nil {
		t.Fatalf("effect %s: %v", key, err)
	}
	return eff
}

// receiptResults are the results of the receipts of key, in order.
func (e *gwEnv) receiptResults(t *testing.T, key string) []string {
	t.Helper()
	var out []string
	for s, err := range e.guard.Store().Receipts(t.Context(), store.ReceiptFilter{EffectKey: key}) {
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Result string }
		if err := json.Unmarshal(s.Doc, &doc); err != nil {
			t.Fatal(err)
		}
		out = append(out, doc.Result)
	}
	return out
}

type failingIdentity struct{}

func (failingIdentity) Principal(context.Context) (latch.Principal, error) {
	return latch.Principal{}, errors.New("the identity provider is down")
}

// TestRefusalCodes holds every refusal the gateway maps to the code and reason word
// docs/gateway.md promises, each produced by a real call through the gateway to a real upstream.
func TestRefusalCodes(t *testing.T) {
	t.Parallel()
	type want struct {
		code   int64
		reason string
		state  string // effect_state, "" when none
	}
	check := func(t *testing.T, what string, err error, w want) gateway.Refusal {
		t.Helper()
		code, r := refusalOf(t, err)
		if code != w.code || r.Reason != w.reason || r.EffectState != w.state {
			t.Errorf("%s = %d %q (effect_state %q), want %d %q (effect_state %q); detail %s", what, code, r.Reason, r.EffectState, w.code, w.reason, w.state, r.Detail)
		}
		if k := latch.Reason(r.Reason).Kind(); string(k) != r.Kind {
			t.Errorf("%s: kind %q, want %q, the kind of reason %q", what, r.Kind, k, r.Reason)
		}
		return r
	}
	tests := []struct {
		name    string
		actions string
		tools   string
		lc      latch.Config
		gc      gateway.Config
		run     func(t *testing.T, e *gwEnv, clock *atomic.Int64)
	}{
		{name: "denied", actions: "  mcp.up.act:\n    effect: \"act:{id}\"\n    decision: deny\n",
			run: func(t *testing.T, e *gwEnv, _ *atomic.Int64) {
				_, err := e.call(t.Context(), "act", actArgs{ID: "a"})
				check(t, "denied act", err, want{gateway.CodeDenied, "denied", ""})
				_, err = e.call(t.Context(), "hang", actArgs{ID: "a"})
				check(t, "unlisted hang", err, want{gateway.CodeDenied, "unknown_action", ""})
			}},
		{name: "approval_required", actions: "  mcp.up.act:\n    effect: \"act:{id}\"\n    decision: approve\n",
			run: func(t *testing.T, e *gwEnv, _ *atomic.Int64) {
				_, err := e.call(t.Context(), "act", actArgs{ID: "a"})
				if r := check(t, "act", err, want{gateway.CodeApprovalRequired, "approval_required", ""}); !strings.HasPrefix(r.ApprovalID, "apr_") {
					t.Errorf("approval_id = %q, want apr_…", r.ApprovalID)
				}
			}},
		{name: "approval_expired", actions: "  mcp.up.act:\n    effect: \"act:{id}\"\n    decision: approve\n",
			run: func(t *testing.T, e *gwEnv, clock *atomic.Int64) {
				_, err := e.call(t.Context(), "act", actArgs{ID: "a"})
				r := check(t, "act", err, want{gateway.CodeApprovalRequired, "approval_required", ""})
				if _, err := e.guard.Approve(t.Context(), r.ApprovalID, "alice"); err != nil {
					t.Fatal(err)
				}
				// By the guard's clock the grant has expired: a re-send does not run on it, and a
				// person is asked again (a new request), since the agent presented no approval.
				clock.Add(int64(time.Hour))
				_, err = e.call(t.Context(), "act", actArgs{ID: "a"})
				again := check(t, "re-sent act", err, want{gateway.CodeApprovalRequired, "approval_required", ""})
				if again.ApprovalID == r.ApprovalID || !strings.HasPrefix(again.ApprovalID, "apr_") {
					t.Errorf("re-sent act after the grant expired: approval %q, want a new request (not %s)", again.ApprovalID, r.ApprovalID)
				}
			}},
		{name: "duplicate_committed", actions: keyedActions,
			run: func(t *testing.T, e *gwEnv, _ *atomic.Int64) {
				if _, err := e.call(t.Context(), "act", actArgs{ID: "a"}); err != nil {
					t.Fatal(err)
				}
				_, err := e.call(t.Context(), "act", actArgs{ID: "a"})
				if r := check(t, "second act", err, want{gateway.CodeDuplicate, "committed", "committed"}); len(r.Result) == 0 {
					t.Error("the duplicate carries no stored result")
				}
			}},
		{name: "in_progress", actions: keyedActions,
			run: func(t *testing.T, e *gwEnv, _ *atomic.Int64) {
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { _, err := e.call(ctx, "hang", actArgs{ID: "h"}); done <- err }()
				e.ledger.waitFor(t, "hang h")
				_, err := e.call(t.Context(), "hang", actArgs{ID: "h"})
				if r := check(t, "hang while the first runs", err, want{gateway.CodeDuplicate, "in_progress", "in_progress"}); len(r.Result) != 0 {
					t.Errorf("an in-progress duplicate carries a result: %s", r.Result)
				}
				cancel()
				<-done
			}},
		{name: "ambiguous", actions: keyedActions, gc: gateway.Config{CallTimeout: 300 * time.Millisecond},
			run: func(t *testing.T, e *gwEnv, _ *atomic.Int64) {
				_, err := e.call(t.Context(), "hang", actArgs{ID: "h"})
				check(t, "hang", err, want{gateway.CodeAmbiguous, "outcome_unknown", "ambiguous"})
				_, err = e.call(t.Context(), "hang", actArgs{ID: "h"})
				check(t, "re-sent hang", err, want{gateway.CodeEffectAmbiguous, "ambiguous", "ambiguous"})
			}},
		{name: "attempts_exhausted", tools: "        act: { errors_mean: not_executed }\n", actions: "  mcp.up.act:\n    effect: \"act:{id}\"\n    max_attempts: 1\n    decision: allow\n",
			run: func(t *testing.T, e *gwEnv, _ *atomic.Int64) {
				_, err := e.call(t.Context(), "act", actArgs{ID: "a", Fail: true})
				check(t, "failing act", err, want{gateway.CodeNotExecuted, "not_executed", "failed"})
				_, err = e.call(t.Context(), "act", actArgs{ID: "a", Fail: true})
				check(t, "re-sent act", err, want{gateway.CodeExhausted, "attempts_exhausted", "failed"})
			}},
		{name: "key_conflict", actions: keyedActions,
			run: func(t *testing.T, e *gwEnv, _ *atomic.Int64) {
				if _, err := e.call(t.Context(), "act", actArgs{ID: "a"}); err != nil {
					t.Fatal(err)
				}
				_, err := e.call(t.Context(), "act", actArgs{ID: "a", Extra: "other"})
				if r := check(t, "act of other arguments", err, want{gateway.CodeKeyConflict, "key_conflict", "committed"}); len(r.Result) != 0 {
					t.Errorf("a key conflict hands on another call's result: %s", r.Result)
				}
			}},
		{name: "missing_argument", actions: "  mcp.up.act:\n    effect: \"act:{id}\"\n    arguments:\n      id: { type: string }\n    decision: allow\n",
			run: func(t *testing.T, e *gwEnv, _ *atomic.Int64) {
				_, err := e.call(t.Context(), "act", map[string]any{})
				check(t, "act without id", err, want{gateway.CodeDenied, "missing_argument", ""})
			}},
		{name: "effect_key_error", actions: keyedActions,
			run: func(t *testing.T, e *gwEnv, _ *atomic.Int64) {
				_, err := e.call(t.Context(), "act", map[string]any{"id": map[string]any{"an": "object"}})
				check(t, "act with an object for id", err, want{gateway.CodeDenied, "effect_key_error", ""})
			}},
		{name: "invalid_argument", actions: keyedActions,
			run: func(t *testing.T, e *gwEnv, _ *atomic.Int64) {
				_, err := e.call(t.Context(), "act", json.RawMessage(`{"id":"a","n":1e400}`))
				check(t, "act with a number out of range", err, want{gateway.CodeDenied, "invalid_argument", ""})
			}},
		{name: "identity", actions: keyedActions, lc: latch.Config{Identity: failingIdentity{}},
			run: func(t *testing.T, e *gwEnv, _ *atomic.Int64) {
				_, err := e.call(t.Context(), "act", actArgs{ID: "a"})
				check(t, "act", err, want{gateway.CodeUnauthenticated, "identity", ""})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var offset atomic.Int64
			lc := tt.lc
			lc.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
			e := startGatewayTools(t, "stdio", tt.tools, tt.actions, lc, tt.gc)
			tt.run(t, e, &offset)
		})
	}
}

// A call whose upstream never answers returns at its deadline, ambiguous with its receipt, and
// the upstream is told to stop; the deadline is never later than the call's lease.
func TestCallDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		actions string
		timeout time.Duration
		within  time.Duration
	}{
		{"call timeout", keyedActions, 500 * time.Millisecond, 5 * time.Second},
		{"lease", strings.Replace(keyedActions, "    effect: \"hang:{id}\"\n", "    effect: \"hang:{id}\"\n    lease: 3s\n", 1), time.Hour, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := startGateway(t, "stdio", tt.actions, latch.Config{}, gateway.Config{CallTimeout: tt.timeout})
			start := time.Now()
			_, err := e.call(t.Context(), "hang", actArgs{ID: "h"})
			if d := time.Since(start); d > tt.within {
				t.Errorf("the hanging call returned after %v, want within %v", d, tt.within)
			}
			code, r := refusalOf(t, err)
			if code != gateway.CodeAmbiguous || r.Reason != "outcome_unknown" || !strings.HasPrefix(r.ReceiptID, "rcp_") || !strings.Contains(r.Detail, "deadline") {
				t.Errorf("hang = %d %+v, want %d ambiguous with its receipt, naming the deadline", code, r, gateway.CodeAmbiguous)
			}
			if eff := e.effect(t, "hang:h"); eff.State != store.Ambiguous {
				t.Errorf("effect state = %s, want ambiguous", eff.State)
			}
			if got := e.receiptResults(t, "hang:h"); len(got) != 1 || got[0] != "ambiguous" {
				t.Errorf("receipts of hang:h = %q, want one ambiguous", got)
			}
			e.ledger.waitFor(t, "cancelled h") // the upstream's handler was cancelled
		})
	}
}

// An agent that goes away mid-call cancels the upstream call, and the effect is recorded
// ambiguous at once — over streamable HTTP, where the MCP session outlives the request that
// carried the call, and over an in-process transport.
func TestAgentDisconnectCancelsUpstream(t *testing.T) {
	t.Parallel()
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		e := startGateway(t, "stdio", keyedActions, latch.Config{}, gateway.Config{})
		ts := e.guard.Store().(store.TokenStore)
		tok, _, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenAgent, Agent: "support-bot"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(e.gw.Handler(&auth.Authenticator{Tokens: ts}))
		t.Cleanup(srv.Close)
		var mu sync.Mutex
		var conns []net.Conn
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
			return c, err
		}
		hc := &http.Client{Transport: bearer{tok}}
		base := &http.Transport{DialContext: dial}
		hc.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+tok)
			return base.RoundTrip(r)
		})
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		go func() {
			_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "up.hang", Arguments: actArgs{ID: "d"}})
		}()
		e.ledger.waitFor(t, "hang d")
		mu.Lock()
		for _, c := range conns {
			_ = c.Close() // the agent's machine drops off the network: no cancellation is sent
		}
		mu.Unlock()
		e.ledger.waitFor(t, "cancelled d")
		waitState(t, e, "hang:d", store.Ambiguous)
	})
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		e := startGateway(t, "stdio", keyedActions, latch.Config{}, gateway.Config{})
		// The agent's end of a stdio connection: closing it is the agent process exiting.
		gwEnd, agentEnd := net.Pipe()
		ss, err := e.gw.Server().Connect(t.Context(), &mcp.IOTransport{Reader: gwEnd, Writer: gwEnd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(t.Context(), &mcp.IOTransport{Reader: agentEnd, Writer: agentEnd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "up.hang", Arguments: actArgs{ID: "d"}})
		}()
		e.ledger.waitFor(t, "hang d")
		_ = agentEnd.Close()
		e.ledger.waitFor(t, "cancelled d")
		waitState(t, e, "hang:d", store.Ambiguous)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// waitState waits up to 20 s for the effect of key to be in state.
func waitState(t *testing.T, e *gwEnv, key string, state store.State) {
	t.Helper()
	var eff *store.Effect
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if eff, err = e.guard.Store().Effect(t.Context(), key); err == nil && eff.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("effect %s = %+v, want %s", key, eff, state)
		}
	}
}

// The gateway sweeps: a lapsed lease in its store (a holder that crashed) is written ambiguous
// while it serves, without a caller meeting it.
func TestGatewaySweeps(t *testing.T) {
	t.Parallel()
	actions := strings.Replace(keyedActions, "    effect: \"act:{id}\"\n", "    effect: \"act:{id}\"\n    lease: 1s\n", 1)
	e := startGateway(t, "stdio", actions, latch.Config{}, gateway.Config{Sweep: 100 * time.Millisecond})
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "crashed-worker"})
	if _, err := e.guard.Begin(ctx, &latch.Call{Action: "mcp.up.act", Arguments: json.RawMessage(`{"id":"lost"}`)}); err != nil {
		t.Fatal(err)
	}
	if eff := e.effect(t, "act:lost"); eff.State != store.Executing {
		t.Fatalf("effect = %s, want executing", eff.State)
	}
	waitState(t, e, "act:lost", store.Ambiguous)
}

// An answer larger than MaxAnswer is never held whole nor stored: the call is committed once
// with a marker of the answer's size and hash, and the agent is told the tool ran. Over every
// transport an upstream speaks: stdio, and streamable HTTP answering with SSE or with JSON.
// (Not parallel: it measures the process's allocations.)
func TestAnswerTooLarge(t *testing.T) {
	for _, transport := range []string{"stdio", "sse", "json"} {
		t.Run(transport, func(t *testing.T) {
			e := startGateway(t, transport, keyedActions, latch.Config{}, gateway.Config{})
			ctx := t.Context()
			const huge = 64 << 20
			before := dbSize(t, e.db)
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			_, err := e.call(ctx, "act", actArgs{ID: "big", N: huge})
			runtime.ReadMemStats(&m1)
			if grew := m1.TotalAlloc - m0.TotalAlloc; grew > 24<<20 {
				t.Errorf("the call allocated %d MiB for a %d MiB answer, want under 24 MiB", grew>>20, huge>>20)
			}
			code, r := refusalOf(t, err)
			if code != gateway.CodeAnswerTooLarge || r.Reason != "answer_too_large" || r.EffectState != "committed" || r.EffectKey != "act:big" {
				t.Fatalf("act big = %d %+v, want %d answer_too_large, committed", code, r, gateway.CodeAnswerTooLarge)
			}
			var marker mcp.CallToolResult
			if err := json.Unmarshal(r.Result, &marker); err != nil {
				t.Fatalf("marker %s: %v", r.Result, err)
			}
			mark, _ := json.Marshal(marker.Meta["latch/answer_too_large"])
			if ok, _ := regexp.Match(`^\{"bytes":(6[7-9]|[7-9]\d)\d{6},"limit":1048576,"sha256":"sha256:[0-9a-f]{64}"\}$`, mark); !ok {
				t.Errorf("marker _meta = %s, want the answer's size (over 64 MiB), the limit and its sha256", mark)
			}
			if grew := dbSize(t, e.db) - before; grew > 512<<10 {
				t.Errorf("the store grew by %d KiB, want under 512", grew>>10)
			}
			if eff := e.effect(t, "act:big"); eff.State != store.Committed || len(eff.Result) > 4096 {
				t.Errorf("effect = %s with a result of %d bytes, want committed with the marker", eff.State, len(eff.Result))
			}
			if n := e.ledger.count(t, "act big"); n != 1 {
				t.Errorf("the upstream acted %d times, want once", n)
			}
			// Re-sent: a duplicate, refused with the marker, and nothing is sent.
			_, err = e.call(ctx, "act", actArgs{ID: "big", N: huge})
			code, r = refusalOf(t, err)
			if code != gateway.CodeDuplicate || !strings.Contains(string(r.Result), "latch/answer_too_large") {
				t.Errorf("re-sent act big = %d %+v, want %d with the marker", code, r, gateway.CodeDuplicate)
			}
			if n := e.ledger.count(t, "act big"); n != 1 {
				t.Errorf("the upstream acted %d times, want once", n)
			}
			// An error answer too large to keep says isError still: ambiguous, as the whole would be.
			_, err = e.call(ctx, "act", actArgs{ID: "bigfail", N: 2 << 20, Fail: true})
			if code, r := refusalOf(t, err); code != gateway.CodeAmbiguous || !strings.Contains(r.Detail, "not kept") {
				t.Errorf("act bigfail = %d %+v, want %d ambiguous saying the answer was not kept", code, r, gateway.CodeAmbiguous)
			}
			// The connection is still good, and an answer below the limit passes whole.
			res, err := e.call(ctx, "act", actArgs{ID: "small", N: 512 << 10})
			if err != nil {
				t.Fatalf("act small: %v", err)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || len(tc.Text) != 512<<10 {
				t.Errorf("the answer below the limit was not passed whole")
			}
		})
	}
}

// dbSize is the size of a SQLite store's files.
func dbSize(t *testing.T, db string) int64 {
	t.Helper()
	var n int64
	for _, f := range []string{db, db + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}
