package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// The relay tests run this binary as an upstream whose tool asks its client a question in the
// middle of the call: `gateway.test latch-test-asking-upstream LEDGER` speaks MCP on stdio.
const askingUpstreamArg = "latch-test-asking-upstream"

func init() {
	if len(os.Args) < 3 || os.Args[1] != askingUpstreamArg {
		return
	}
	ledger := os.Args[2]
	s := mcp.NewServer(&mcp.Implementation{Name: "asking-upstream"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "refund", Description: "Refund, asking which account."},
		func(ctx context.Context, req *mcp.CallToolRequest, a actArgs) (*mcp.CallToolResult, any, error) {
			r, ok := req.Params.InputResponses["account"].(*mcp.ElicitResult)
			if !ok {
				appendLedger(ledger, "ask "+a.ID)
				return &mcp.CallToolResult{RequestState: "upstream-state-" + a.ID, InputRequests: mcp.InputRequestMap{
					"account": &mcp.ElicitParams{Message: "Which account?", RequestedSchema: map[string]any{
						"type": "object", "properties": map[string]any{"account": map[string]any{"type": "string"}}}}}}, nil, nil
			}
			if req.Params.RequestState != "upstream-state-"+a.ID {
				appendLedger(ledger, "refund "+a.ID+" bad state "+req.Params.RequestState)
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "bad state"}}}, nil, nil
			}
			account, _ := r.Content["account"].(string)
			appendLedger(ledger, "refund "+a.ID+" "+r.Action+" "+account)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded to " + account}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// relayEnv is a gateway in front of the asking upstream, and its guard and ledger.
func relayEnv(t *testing.T) (*gateway.Gateway, *latch.Guard, upstreamLedger) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(t.TempDir(), "ledger")
	doc := fmt.Sprintf("schema: latch.policy/v1\ngateway:\n  upstreams:\n    asker:\n      command: [%q, %s, %q]\n"+
		"actions:\n  mcp.asker.refund:\n    effect: \"refund:{id}\"\n    decision: allow\n", exe, askingUpstreamArg, ledger)
	pol, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	gw, err := gateway.New(t.Context(), &gateway.Config{Guard: g, Principal: latch.Principal{Agent: "support-bot"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	return gw, g, upstreamLedger(ledger)
}

// agentOf connects an agent to gw; with handler, its client supports elicitation.
func agentOf(t *testing.T, gw *gateway.Gateway, handler func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := gw.Server().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, &mcp.ClientOptions{ElicitationHandler: handler}).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestRelayElicitation: an upstream asks its client a question mid-call; the gateway relays it
// to the agent's client (go-sdk, with elicitation) through a suspension round of the call: the
// agent sees the upstream's question, its answer reaches the upstream, the tool runs once and
// the agent gets the result in the same call. The store holds one receipt, committed, and the
// round's events: execution_suspended, then execution_resumed with the answer's keys and digest,
// never the answer itself.
func TestRelayElicitation(t *testing.T) {
	t.Parallel()
	gw, g, ledger := relayEnv(t)
	var asked atomic.Int32
	var question string
	agent := agentOf(t, gw, func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		question = req.Params.Message
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"account": "ACC-SECRET-7"}}, nil
	})
	res, err := agent.CallTool(t.Context(), &mcp.CallToolParams{Name: "asker.refund", Arguments: map[string]any{"id": "r1"}})
	if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "refunded to ACC-SECRET-7" {
		t.Fatalf("CallTool = %+v, %v; want the upstream's result from the agent's answer", res, err)
	}
	if asked.Load() != 1 || question != "Which account?" {
		t.Errorf("the agent was asked %d times (%q), want once, the upstream's question", asked.Load(), question)
	}
	if n := ledger.count(t, "refund r1 accept ACC-SECRET-7"); n != 1 || ledger.count(t, "ask r1") != 1 || len(ledger.lines(t)) != 2 {
		t.Errorf("upstream ledger %q, want one question and one refund with the answer", ledger.lines(t))
	}
	eff, err := g.Store().Effect(t.Context(), "refund:r1")
	if err != nil || eff.State != store.Committed {
		t.Fatalf("effect = %+v, %v; want committed", eff, err)
	}
	evs, err := g.Store().Events(t.Context(), store.EventFilter{ActionID: eff.ActionID})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
		if strings.Contains(string(e.Payload), "ACC-SECRET-7") {
			t.Errorf("event %s holds the answer: %s", e.Kind, e.Payload)
		}
		if e.Kind == store.EventExecutionResumed {
			var p struct {
				InputKeys []string `json:"input_keys"`
			}
			if json.Unmarshal(e.Payload, &p) != nil || strings.Join(p.InputKeys, ",") != "account" {
				t.Errorf("execution_resumed %s, want the input request ids", e.Payload)
			}
		}
	}
	if !strings.Contains(strings.Join(kinds, " "), "execution_suspended execution_resumed execution_committed") {
		t.Errorf("events %v, want a suspension round before the commit", kinds)
	}
	n := 0
	for _, err := range g.Store().Receipts(t.Context(), store.ReceiptFilter{ActionID: eff.ActionID}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("%d receipts, want 1", n)
	}
}

// TestRelayElicitationClientCannot: an agent whose client does not support elicitation is not
// asked and no round is recorded; the upstream's question leaves the call's outcome unknown
// (ambiguous), as any answer the gateway cannot use.
func TestRelayElicitationClientCannot(t *testing.T) {
	t.Parallel()
	gw, g, ledger := relayEnv(t)
	agent := agentOf(t, gw, nil)
	_, err := agent.CallTool(t.Context(), &mcp.CallToolParams{Name: "asker.refund", Arguments: map[string]any{"id": "r2"}})
	if code, r := refusalOf(t, err); code != gateway.CodeAmbiguous || !strings.Contains(r.Detail, "does not support elicitation") {
		t.Errorf("CallTool = %v, want -31006 naming the missing elicitation support", err)
	}
	if n := ledger.count(t, "ask r2"); n != 1 || len(ledger.lines(t)) != 1 {
		t.Errorf("upstream ledger %q, want the question only", ledger.lines(t))
	}
	eff, err := g.Store().Effect(t.Context(), "refund:r2")
	if err != nil || eff.State != store.Ambiguous {
		t.Fatalf("effect = %+v, %v; want ambiguous", eff, err)
	}
	evs, _ := g.Store().Events(t.Context(), store.EventFilter{ActionID: eff.ActionID})
	for _, e := range evs {
		if e.Kind == store.EventExecutionSuspended || e.Kind == store.EventExecutionResumed {
			t.Errorf("a round was recorded for a client that cannot answer: %s", e.Kind)
		}
	}
}

// TestRelayStateRefused: a call carrying the gateway's state with a wrong token resumes nothing
// and reaches no upstream (outcome_refused suspension_token); the right one, sent again after it
// was used, is refused suspension_resumed.
func TestRelayStateRefused(t *testing.T) {
	t.Parallel()
	gw, _, ledger := relayEnv(t)
	var state string
	agent := agentOf(t, gw, func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"account": "ACC-1"}}, nil
	})
	// A raw agent (no automatic retry) sees the input requests and the gateway's state.
	st, ct := mcp.NewInMemoryTransports()
	ss, err := gw.Server().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	raw, err := mcp.NewClient(&mcp.Implementation{Name: "raw"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, nil }}).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	res, err := raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "asker.refund", Arguments: map[string]any{"id": "r3"}})
	if err != nil || !res.NeedsInput() || !strings.HasPrefix(res.RequestState, "latch-resume:act_") || res.InputRequests["account"] == nil {
		t.Fatalf("first call = %+v, %v; want the upstream's input request with the gateway's state", res, err)
	}
	state = res.RequestState
	answer := mcp.InputResponseMap{"account": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"account": "ACC-9"}}}
	_, err = raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "asker.refund", Arguments: map[string]any{"id": "r3"},
		InputResponses: answer, RequestState: state + "x"})
	if _, r := refusalOf(t, err); r.Reason != string(latch.ReasonSuspensionToken) {
		t.Errorf("a wrong token = %v, want suspension_token", err)
	}
	// Another agent session of the same principal, with other arguments.
	_, err = agent.CallTool(t.Context(), &mcp.CallToolParams{Name: "asker.refund", Arguments: map[string]any{"id": "r3", "n": 5},
		InputResponses: answer, RequestState: state})
	if _, r := refusalOf(t, err); r.Reason != string(latch.ReasonSuspensionArguments) {
		t.Errorf("other arguments = %v, want suspension_arguments", err)
	}
	res, err = raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "asker.refund", Arguments: map[string]any{"id": "r3"},
		InputResponses: answer, RequestState: state})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "refunded to ACC-9" {
		t.Fatalf("the answer = %+v, %v; want the refund", res, err)
	}
	_, err = raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "asker.refund", Arguments: map[string]any{"id": "r3"},
		InputResponses: answer, RequestState: state})
	if _, r := refusalOf(t, err); r.Reason != string(latch.ReasonSuspensionResumed) {
		t.Errorf("the state sent again = %v, want suspension_resumed", err)
	}
	if n := ledger.count(t, "refund r3 accept ACC-9"); n != 1 || len(ledger.lines(t)) != 2 {
		t.Errorf("upstream ledger %q, want one question and one refund", ledger.lines(t))
	}
}
