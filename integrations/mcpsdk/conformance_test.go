package mcpsdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/integrations/mcpsdk"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/latchtest"
	"github.com/latchkit/latch/mcpwire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// kitTools are the tools of the conformance kit's server, one per action of its table: with
// the middleware's prefix "kit.", tool charge is the action kit.charge.
var kitTools = []string{"charge", "refund", "once", "blocked", "unlisted"}

// TestConformance runs latch's adapter conformance kit against the middleware, on both stores
// and two of the SDK's transports (in memory, streamable HTTP): each call is one CallTool from a
// go-sdk client to a go-sdk server, and its outcome is what the client received — the tool's
// structured content, or the JSON-RPC error's data (mcpwire.Refusal), whose result is the stored
// tool result.
func TestConformance(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, transport := range []string{"memory", "http"} {
			t.Run(backend+"/"+transport, func(t *testing.T) {
				latchtest.Run(t, latchtest.Harness{StoreURL: testdb.URL(t, backend, "mcpsdkkit"),
					Start: func(t testing.TB, g *latch.Guard, h latchtest.Handler) latchtest.Invoke {
						return startMCPSDK(t, g, h, transport)
					}})
			})
		}
	}
}

// startMCPSDK serves the kit's tools, every one protected, to a client session over transport.
func startMCPSDK(t testing.TB, g *latch.Guard, h latchtest.Handler, transport string) latchtest.Invoke {
	ctx := context.Background()
	mw, err := mcpsdk.New(&mcpsdk.Config{Guard: g, Principal: latchtest.Principal(), All: true, Prefix: "kit."})
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "kit", Version: "1"}, nil)
	for _, name := range kitTools {
		action := "kit." + name
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var in struct {
					ID     string `json:"id"`
					Amount int64  `json:"amount"`
					Mode   string `json:"mode"`
				}
				if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
					return nil, latch.NotExecuted(fmt.Errorf("decode the arguments of %s: %w", name, err))
				}
				raw, err := h(ctx, latchtest.Args{Action: action, ID: in.ID, Amount: in.Amount, Mode: in.Mode})
				if err != nil {
					return nil, err
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(raw)}}, StructuredContent: raw}, nil
			})
	}
	srv.AddReceivingMiddleware(mw.Middleware())
	var ct mcp.Transport
	switch transport {
	case "http":
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(hs.Close)
		ct = &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}
	default:
		var st mcp.Transport
		st, ct = mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ss.Close() })
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "kit-agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return func(ctx context.Context, a latchtest.Args) latchtest.Outcome {
		name, ok := strings.CutPrefix(a.Action, "kit.")
		if !ok {
			return latchtest.Outcome{Err: fmt.Errorf("no tool for action %s", a.Action)}
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: a.Arguments()})
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			return refusalOutcome(je)
		case err != nil:
			return latchtest.Outcome{Err: err}
		case res.IsError:
			return latchtest.Outcome{Err: fmt.Errorf("the tool answered an error result with no latch refusal: %+v", res.Content)}
		}
		out, err := structured(res)
		if err != nil {
			return latchtest.Outcome{Err: err}
		}
		return latchtest.Outcome{Result: out}
	}
}

// refusalOutcome is the refusal a JSON-RPC error's data carries, in latch's words; its Result
// is the structured content of the stored tool result it hands back.
func refusalOutcome(je *jsonrpc.Error) latchtest.Outcome {
	var r mcpwire.Refusal
	if err := json.Unmarshal(je.Data, &r); err != nil || r.Reason == "" {
		return latchtest.Outcome{Err: fmt.Errorf("JSON-RPC error %d %q carries no latch refusal (data %s)", je.Code, je.Message, je.Data)}
	}
	if want := latch.Reason(r.Reason).Kind(); string(want) != r.Kind {
		return latchtest.Outcome{Err: fmt.Errorf("the refusal's kind %q is not its reason %s's kind %s", r.Kind, r.Reason, want)}
	}
	out := latchtest.Outcome{Refusal: &latch.Refusal{Kind: latch.RefusalKind(r.Kind), Reason: latch.Reason(r.Reason),
		EffectKey: r.EffectKey, ApprovalID: r.ApprovalID, ActionHash: r.ActionHash, Detail: r.Detail}}
	if len(r.Result) > 0 {
		var stored mcp.CallToolResult
		if err := json.Unmarshal(r.Result, &stored); err != nil {
			return latchtest.Outcome{Err: fmt.Errorf("the refusal's stored result %s is not a tool result: %w", r.Result, err)}
		}
		res, err := structured(&stored)
		if err != nil {
			return latchtest.Outcome{Err: err}
		}
		out.Refusal.Result = res
	}
	return out
}

// structured is a tool result's structured content as JSON.
func structured(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res.StructuredContent == nil {
		return nil, errors.New("the tool result has no structured content")
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, fmt.Errorf("encode the structured content: %w", err)
	}
	return raw, nil
}
