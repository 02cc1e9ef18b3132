package mcpgo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/integrations/mcpgo"
	"github.com/latchkit/latch/policy"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A payments MCP server protects its refund tool: the second refund of an order is refused with
// the first one's stored result, and a refund above the limit waits for a person. mcp-go answers
// a refusal as an isError result carrying the gateway's error object, which RefusalOf reads.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "mcpgo-example")
	defer os.RemoveAll(dir)
	pol, err := policy.Parse("latch.yaml", []byte(`schema: latch.policy/v1
actions:
  mcp.payments.refund:
    effect: "refund:{order_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
`))
	if err != nil {
		panic(err)
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(dir, "latch.db")})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	mw, err := mcpgo.New(&mcpgo.Config{Guard: g, Principal: latch.Principal{Agent: "support-bot"},
		Tools: map[string]mcpgo.Tool{"refund": {Action: "mcp.payments.refund"}}})
	if err != nil {
		panic(err)
	}
	s := server.NewMCPServer("payments", "1.0.0", server.WithToolHandlerMiddleware(mw.Middleware()))
	s.AddTool(mcp.NewTool("refund", mcp.WithString("order_id"), mcp.WithNumber("amount")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Printf("refunding %v on %v\n", req.GetArguments()["amount"], req.GetArguments()["order_id"])
			return mcp.NewToolResultText("refund rf_1"), nil
		})

	agent, err := client.NewInProcessClient(s)
	if err != nil {
		panic(err)
	}
	defer agent.Close()
	if err := agent.Start(ctx); err != nil {
		panic(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "agent", Version: "1"}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := agent.Initialize(ctx, init); err != nil {
		panic(err)
	}

	for _, amount := range []int{2500, 2500, 90000} {
		req := mcp.CallToolRequest{}
		req.Params.Name = "refund"
		req.Params.Arguments = map[string]any{"order_id": fmt.Sprint("ord_", amount/90000), "amount": amount}
		res, err := agent.CallTool(ctx, req)
		if err != nil {
			panic(err)
		}
		if we, ok := mcpgo.RefusalOf(res); ok {
			fmt.Printf("refused %d %s (stored result: %t, approval id: %t)\n", we.Code, we.Data.Reason, len(we.Data.Result) > 0, we.Data.ApprovalID != "")
		}
	}
	// Output:
	// refunding 2500 on ord_0
	// refused -31004 committed (stored result: true, approval id: false)
	// refused -31002 approval_required (stored result: false, approval id: true)
}
