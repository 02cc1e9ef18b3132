package mcpgo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/integrations/mcpgo"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/latchtest"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// kitTools are the tools of the conformance kit's server, one per action of its table: with
// the middleware's prefix "kit.", tool charge is the action kit.charge.
var kitTools = []string{"charge", "refund", "once", "blocked", "unlisted"}

// TestConformance runs latch's adapter conformance kit against the middleware, on both stores
// and two of mcp-go's transports (streamable HTTP, in process): each call is one CallTool from an
// mcp-go client to an mcp-go server, and its outcome is what the client received — the tool's
// structured content, or the refusal RefusalOf reads from the isError result, whose result is
// the stored tool result. Over HTTP the refusal arrives as JSON; in process, as the server's own
// value: RefusalOf reads both.
func TestConformance(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, transport := range []string{"http", "inprocess"} {
			t.Run(backend+"/"+transport, func(t *testing.T) {
				latchtest.Run(t, latchtest.Harness{StoreURL: testdb.URL(t, backend, "mcpgokit"),
					Start: func(t testing.TB, g *latch.Guard, h latchtest.Handler) latchtest.Invoke {
						return startMCPGo(t, g, h, transport)
					}})
			})
		}
	}
}

// startMCPGo serves the kit's tools, every one protected, to a client connected over transport.
func startMCPGo(t testing.TB, g *latch.Guard, h latchtest.Handler, transport string) latchtest.Invoke {
	mw, err := mcpgo.New(&mcpgo.Config{Guard: g, Principal: latchtest.Principal(), All: true, Prefix: "kit."})
	if err != nil {
		t.Fatal(err)
	}
	s := server.NewMCPServer("kit", "1", server.WithToolHandlerMiddleware(mw.Middleware()))
	for _, name := range kitTools {
		action := "kit." + name
		s.AddTool(mcp.NewTool(name, mcp.WithString("id"), mcp.WithNumber("amount"), mcp.WithString("mode")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var in struct {
					ID     string `json:"id"`
					Amount int64  `json:"amount"`
					Mode   string `json:"mode"`
				}
				if err := req.BindArguments(&in); err != nil {
					return nil, latch.NotExecuted(fmt.Errorf("decode the arguments of %s: %w", name, err))
				}
				raw, err := h(ctx, latchtest.Args{Action: action, ID: in.ID, Amount: in.Amount, Mode: in.Mode})
				if err != nil {
					return nil, err
				}
				return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(raw))}, StructuredContent: raw}, nil
			})
	}
	c := connect(t, s, transport)
	return func(ctx context.Context, a latchtest.Args) latchtest.Outcome {
		name, ok := strings.CutPrefix(a.Action, "kit.")
		if !ok {
			return latchtest.Outcome{Err: fmt.Errorf("no tool for action %s", a.Action)}
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = a.Arguments()
		res, err := c.CallTool(ctx, req)
		if err != nil {
			return latchtest.Outcome{Err: err}
		}
		if we, ok := mcpgo.RefusalOf(res); ok {
			r := we.Data
			if want := latch.Reason(r.Reason).Kind(); string(want) != r.Kind {
				return latchtest.Outcome{Err: fmt.Errorf("the refusal's kind %q is not its reason %s's kind %s", r.Kind, r.Reason, want)}
			}
			out := latchtest.Outcome{Refusal: &latch.Refusal{Kind: latch.RefusalKind(r.Kind), Reason: latch.Reason(r.Reason),
				EffectKey: r.EffectKey, ApprovalID: r.ApprovalID, ActionHash: r.ActionHash, Detail: r.Detail}}
			if len(r.Result) > 0 {
				if out.Refusal.Result, err = structuredOf(r.Result); err != nil {
					return latchtest.Outcome{Err: fmt.Errorf("the refusal's stored result: %w", err)}
				}
			}
			return out
		}
		if res.IsError {
			return latchtest.Outcome{Err: fmt.Errorf("the tool answered an error result with no latch refusal: %+v", res.Content)}
		}
		raw, err := json.Marshal(res)
		if err != nil {
			return latchtest.Outcome{Err: err}
		}
		out, err := structuredOf(raw)
		if err != nil {
			return latchtest.Outcome{Err: err}
		}
		return latchtest.Outcome{Result: out}
	}
}

// connect serves s over transport (streamable HTTP, or in process) and connects an initialized
// mcp-go client to it.
func connect(t testing.TB, s *server.MCPServer, transport string) *client.Client {
	ctx := context.Background()
	var c *client.Client
	var err error
	if transport == "inprocess" {
		c, err = client.NewInProcessClient(s)
	} else {
		hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
		t.Cleanup(hs.Close)
		c, err = client.NewStreamableHttpClient(hs.URL + "/mcp")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "kit-agent", Version: "1"}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// structuredOf is the structured content of a tool result's JSON.
func structuredOf(raw json.RawMessage) (json.RawMessage, error) {
	var r struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s is not a tool result: %w", raw, err)
	}
	if len(r.StructuredContent) == 0 || string(r.StructuredContent) == "null" {
		return nil, errors.New("the tool result has no structured content")
	}
	return r.StructuredContent, nil
}
