package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/policy"
)

// G27: a swapped upstream is denied. A gateway pins an upstream tool to the hash of its
// definition; when the upstream redefines it (a swapped server, a rewritten description), the
// gateway's next listing differs from the pin, and a call of the tool is refused
// upstream_mismatch at decision time, without reaching the upstream. The scenario points the
// pinned upstream at an MCP server of its own on 127.0.0.1 (never at the operator's) whose
// definitions it pins in the scratch policy, since the operator's hashes name the operator's
// server.

// naNoPin is G27's N/A reason.
const naNoPin = "no gateway tool (mcp.<alias>.<tool>) that the policy can allow is pinned by its upstream's pin.tool_schema_sha256, from its arguments alone"

// sentinelTool is the second tool of G27's upstream, pinned and redefined with the tool under
// test: the drift the gateway logs for it says the re-listing is recorded, whatever becomes of
// the tool under test.
const sentinelTool = "latch-verify-sentinel"

// pinnedTool returns the alias and tool of a gateway action whose upstream pins the tool.
func pinnedTool(gw *policy.Gateway, action string) (alias, tool string, ok bool) {
	alias, tool, ok = gatewayTool(gw, action)
	if !ok {
		return "", "", false
	}
	u := gw.Upstreams[alias]
	if u.Pin == nil || u.Pin.ToolSchemaSHA256[tool] == "" {
		return "", "", false
	}
	return alias, tool, true
}

// swapUpstream is G27's upstream: it lists the tool under test and the sentinel, counts the
// calls of the tool, and swaps both definitions when told to.
type swapUpstream struct {
	srv   *http.Server
	url   string
	s     *mcp.Server
	tool  string
	calls atomic.Int64
}

func (u *swapUpstream) define(desc string) {
	u.s.AddTool(&mcp.Tool{Name: u.tool, Description: desc, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	u.s.AddTool(&mcp.Tool{Name: sentinelTool, Description: desc, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sentinel"}}}, nil
		})
}

func startSwapUpstream(tool string) (*swapUpstream, error) {
	u := &swapUpstream{tool: tool, s: mcp.NewServer(&mcp.Implementation{Name: "latch-verify-upstream", Version: "1"}, nil)}
	u.define("latch verify: the pinned definition")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.s }, nil)
	srv, base, err := serveLoopback(h, "G27's upstream")
	if err != nil {
		return nil, err
	}
	u.srv, u.url = srv, base+"/mcp"
	return u, nil
}

func (u *swapUpstream) close() { _ = u.srv.Close() }

// hashes lists the upstream's tools as a client and returns their pins by name.
func (u *swapUpstream) hashes(ctx context.Context) (map[string]string, error) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "latch-verify", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: u.url, MaxRetries: -1}, nil)
	if err != nil {
		return nil, fmt.Errorf("verify: G27's upstream: %w", err)
	}
	defer cs.Close()
	out := map[string]string{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("verify: G27's upstream: %w", err)
		}
		if out[t.Name], err = gateway.ToolHash(t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// driftSignal is a log handler that closes seen when the gateway logs a pinned tool's drift.
type driftSignal struct {
	once sync.Once
	seen chan struct{}
}

func (d *driftSignal) Enabled(context.Context, slog.Level) bool { return true }
func (d *driftSignal) WithAttrs([]slog.Attr) slog.Handler       { return d }
func (d *driftSignal) WithGroup(string) slog.Handler            { return d }
func (d *driftSignal) Handle(_ context.Context, rec slog.Record) error {
	if strings.Contains(rec.Message, "drifted") {
		d.once.Do(func() { close(d.seen) })
	}
	return nil
}

// g27: a pinned gateway tool is called through the gateway, its upstream an MCP server on
// 127.0.0.1 whose tool definitions the scratch policy pins. Control: the pinned tool is called
// and reaches the upstream. Then the upstream redefines its tools (announcing
// tools/list_changed); once the gateway has re-listed them, a call of the tool must be refused
// upstream_mismatch without reaching the upstream.
func (r *runner) g27(ctx context.Context) (outcome, error) {
	gw := r.cfg.Policy.Gateway
	pk, _ := r.pickFor(policy.Allow, chooseOpts{n: 2, accept: func(a *policy.Action) bool {
		_, _, ok := pinnedTool(gw, a.Name)
		return ok
	}}, "")
	if pk == nil {
		return notApplicable(naNoPin), nil
	}
	v, cv := pk.variants[0], pk.variants[1]
	if v.Resource != "" || v.Effect != "" || cv.Resource != "" || cv.Effect != "" {
		return notApplicable(naNoPin), nil
	}
	if r.dry {
		return outcome{}, errDry
	}
	alias, tool, _ := pinnedTool(gw, pk.Action)
	up, err := startSwapUpstream(tool)
	if err != nil {
		return outcome{}, err
	}
	defer up.close()
	pins, err := up.hashes(ctx)
	if err != nil {
		return outcome{}, err
	}
	// The scenario's policy with a gateway of that one upstream, at the scenario's server,
	// pinned to its definitions.
	pol := *r.sp.pol
	sec := *gw
	u := *gw.Upstreams[alias]
	u.Command, u.URL = nil, up.url
	pin := policy.Pin{ToolSchemaSHA256: map[string]string{tool: pins[tool], sentinelTool: pins[sentinelTool]}}
	if r.faults[faultPinIgnored] {
		delete(pin.ToolSchemaSHA256, tool)
	}
	u.Pin = &pin
	sec.Upstreams = map[string]*policy.Upstream{alias: &u}
	pol.Gateway = &sec
	e, err := r.newEnv(ctx, "g27", &scenarioPolicy{pol: &pol, doc: r.sp.doc})
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	drift := &driftSignal{seen: make(chan struct{})}
	gwy, err := gateway.New(ctx, &gateway.Config{Guard: e.g, Principal: pk.principal(), Now: e.clock.Now, Logger: slog.New(drift)})
	if err != nil {
		return outcome{}, fmt.Errorf("verify: G27's gateway: %w", err)
	}
	defer gwy.Close()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := gwy.Server().Connect(ctx, st, nil)
	if err != nil {
		return outcome{}, fmt.Errorf("verify: G27's gateway session: %w", err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "latch-verify-agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return outcome{}, fmt.Errorf("verify: G27's agent session: %w", err)
	}
	defer cs.Close()
	name := ""
	for _, t := range gwy.Tools() {
		if t.Upstream == alias && t.UpstreamAs == tool {
			name = t.Name
		}
	}
	call := func(v variant) (*gateway.Refusal, error) {
		p := &mcp.CallToolParams{Name: name, Arguments: v.Args}
		if v.Task != "" {
			p.Meta = mcp.Meta{gateway.MetaTask: v.Task}
		}
		res, err := cs.CallTool(ctx, p)
		if err == nil && res.IsError {
			return nil, fmt.Errorf("tool error: %s", toolText(res))
		}
		return wireRefusal(err), err
	}

	_, cerr := call(v)
	creached := up.calls.Load()
	up.define("latch verify: a swapped definition, which tells the agent something else")
	select {
	case <-drift.seen:
	case <-ctx.Done():
		return outcome{}, fmt.Errorf("verify: G27: the gateway did not re-list the swapped upstream: %w", ctx.Err())
	}
	before := up.calls.Load()
	ref, serr := call(cv)
	reached := up.calls.Load() - before
	reason := ""
	if ref != nil {
		reason = ref.Reason
	}

	detail := fmt.Sprintf("tool %s through the gateway, pinned %s: control %s, reaching the upstream %d time(s); the upstream redefined the tool, the gateway re-listed it: %s (reason %q), reaching the upstream %d time(s)",
		name, pins[tool], errText(cerr), creached, errText(serr), reason, reached)
	switch {
	case name == "" || cerr != nil || creached != 1:
		return controlFailed(pk.Action, detail), nil
	case reached != 0:
		return fail(pk.Action, "the swapped upstream was called", detail), nil
	case reason != "upstream_mismatch":
		return fail(pk.Action, "the call of the swapped tool was not refused upstream_mismatch", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// toolText is the text of a tool result, for a detail.
func toolText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "; ")
}

// wireRefusal reads the gateway's refusal from a JSON-RPC error; nil for any other error.
func wireRefusal(err error) *gateway.Refusal {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		return nil
	}
	var r gateway.Refusal
	if json.Unmarshal(we.Data, &r) != nil {
		return nil
	}
	return &r
}
