package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/policy"
)

// G12 through the MCP gateway: a policy whose gateway: section forwards tool calls is a
// transport-level caller too. The scenario points the upstream of one tool at an MCP server of
// its own on 127.0.0.1 (never at the operator's), and calls the tool through the gateway as an
// agent would.

// naGatewayNoTool is G12's N/A reason for a gateway whose tools are not actions it can run.
const naGatewayNoTool = "no action of a gateway tool (mcp.<alias>.<tool>) is allowed with an effect template and more than one attempt, from its arguments alone"

// gatewayTool returns the gateway upstream alias and tool name of a gateway action
// (mcp.<alias>.<tool>), or false.
func gatewayTool(gw *policy.Gateway, action string) (alias, tool string, ok bool) {
	rest, ok := strings.CutPrefix(action, "mcp.")
	if !ok || gw == nil {
		return "", "", false
	}
	for _, a := range slices.Sorted(maps.Keys(gw.Upstreams)) {
		if t, ok := strings.CutPrefix(rest, a+"."); ok && t != "" {
			return a, t, true
		}
	}
	return "", "", false
}

// upstreamServer is G12's MCP upstream: it lists the one tool and answers its calls, or, while
// drop is set, reads a tools/call request and closes the connection without a response.
type upstreamServer struct {
	srv     *http.Server
	url     string
	drop    atomic.Bool
	dropped atomic.Int64 // tools/call requests read and dropped
	calls   atomic.Int64 // tools/call requests answered
}

func startUpstream(tool string) (*upstreamServer, error) {
	u := &upstreamServer{}
	s := mcp.NewServer(&mcp.Implementation{Name: "latch-verify-upstream", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: tool, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv, base, err := serveLoopback(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && u.drop.Load() {
			body, err := io.ReadAll(req.Body)
			if err == nil && bytes.Contains(body, []byte(`"tools/call"`)) {
				u.dropped.Add(1)
				hangUp(w)
				return
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, req)
	}), "G12's upstream")
	if err != nil {
		return nil, err
	}
	u.srv, u.url = srv, base+"/mcp"
	return u, nil
}

func (u *upstreamServer) close() { _ = u.srv.Close() }

// g12Gateway: the first gateway tool whose action can run is called through the gateway, its
// upstream an MCP server on 127.0.0.1 that reads the tools/call request and closes the
// connection without answering. The call must end ambiguous (the record too), and a re-sent
// call must be refused without reaching the upstream. Control: on another key the upstream
// answers; the call commits, and a re-sent call is refused as a duplicate without reaching it.
func (r *runner) g12Gateway(ctx context.Context) (outcome, error) {
	gw := r.cfg.Policy.Gateway
	pk, _ := r.pickFor(policy.Allow, chooseOpts{needEffect: true, n: 2, accept: func(a *policy.Action) bool {
		_, _, ok := gatewayTool(gw, a.Name)
		return ok && a.MaxAttempts != 1
	}}, "")
	if pk == nil {
		return notApplicable(naGatewayNoTool), nil
	}
	v, cv := pk.variants[0], pk.variants[1]
	if v.Resource != "" || v.Effect != "" || cv.Resource != "" || cv.Effect != "" {
		return notApplicable(naGatewayNoTool), nil
	}
	if r.dry {
		return outcome{}, errDry // applicable: --list stops here, before any server starts
	}
	alias, tool, _ := gatewayTool(gw, pk.Action)
	up, err := startUpstream(tool)
	if err != nil {
		return outcome{}, err
	}
	defer up.close()
	// The scenario's policy with a gateway of that one upstream, at the scenario's server.
	pol := *r.sp.pol
	sec := *gw
	u := *gw.Upstreams[alias]
	u.Command, u.URL = nil, up.url
	sec.Upstreams = map[string]*policy.Upstream{alias: &u}
	pol.Gateway = &sec
	e, err := r.newEnv(ctx, "g12", &scenarioPolicy{pol: &pol, doc: r.sp.doc})
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	g := e.g
	gwy, err := gateway.New(ctx, &gateway.Config{Guard: g, Principal: pk.principal(), Now: e.clock.Now})
	if err != nil {
		return outcome{}, fmt.Errorf("verify: G12's gateway: %w", err)
	}
	defer gwy.Close()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := gwy.Server().Connect(ctx, st, nil)
	if err != nil {
		return outcome{}, fmt.Errorf("verify: G12's gateway session: %w", err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "latch-verify-agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return outcome{}, fmt.Errorf("verify: G12's agent session: %w", err)
	}
	defer cs.Close()
	name := ""
	for _, t := range gwy.Tools() {
		if t.Upstream == alias && t.UpstreamAs == tool {
			name = t.Name
		}
	}
	call := func(v variant) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: v.Args})
		if err == nil && res.IsError {
			err = errors.New("tool error")
		}
		return err
	}

	up.drop.Store(true)
	werr := call(v)
	up.drop.Store(false)
	st1, err := e.effectState(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}
	before := up.calls.Load()
	rerr := call(v)
	reached := up.calls.Load() - before

	cerr1 := call(cv)
	cst1, err := e.effectState(ctx, cv.Key)
	if err != nil {
		return outcome{}, err
	}
	before = up.calls.Load()
	cerr2 := call(cv)
	creached := up.calls.Load() - before

	detail := fmt.Sprintf("tool %s through the gateway, %s: tools/call read by the upstream, connection closed without a response (dropped %d): %s (record %s); re-sent: %s, reaching the upstream %d times; control %s: the upstream answers: %s (record %s), re-sent: %s, reaching it %d more times",
		name, v.Key, up.dropped.Load(), errText(werr), st1, errText(rerr), reached, cv.Key, errText(cerr1), cst1, errText(cerr2), creached)
	switch {
	case name == "" || cerr1 != nil || cst1 != "committed" || cerr2 == nil || creached != 0 || up.dropped.Load() != 1:
		return controlFailed(pk.Action, detail), nil
	case reached != 0:
		return fail(pk.Action, "the re-sent call reached the upstream after its tools/call was written", detail), nil
	case werr == nil || st1 != "ambiguous":
		return fail(pk.Action, "a tools/call written with no response was not recorded ambiguous", detail), nil
	case rerr == nil:
		return fail(pk.Action, "the re-sent call was not refused", detail), nil
	}
	return pass(pk.Action, detail), nil
}
