package mcpsdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/integrations/mcpsdk"
	"github.com/latchkit/latch/mcpwire"
	"github.com/latchkit/latch/policy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A payments MCP server protects its refund tool: the second refund of an order is refused with
// the first one's stored result, and a refund above the limit waits for a person.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "mcpsdk-example")
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

	mw, err := mcpsdk.New(&mcpsdk.Config{Guard: g, Principal: latch.Principal{Agent: "support-bot"},
		Tools: map[string]mcpsdk.Tool{"refund": {Action: "mcp.payments.refund"}}})
	if err != nil {
		panic(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "payments"}, nil)
	type refundArgs struct {
		OrderID string `json:"order_id"`
		Amount  int    `json:"amount"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "refund"}, func(_ context.Context, _ *mcp.CallToolRequest, a refundArgs) (*mcp.CallToolResult, any, error) {
		fmt.Printf("refunding %d on %s\n", a.Amount, a.OrderID)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refund rf_1"}}}, nil, nil
	})
	server.AddReceivingMiddleware(mw.Middleware())

	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		panic(err)
	}
	defer ss.Close()
	agent, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		panic(err)
	}
	defer agent.Close()

	for _, amount := range []int{2500, 2500, 90000} {
		_, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": fmt.Sprint("ord_", amount/90000), "amount": amount}})
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			var r mcpwire.Refusal
			_ = json.Unmarshal(we.Data, &r)
			fmt.Printf("refused %d %s (stored result: %t, approval id: %t)\n", we.Code, r.Reason, len(r.Result) > 0, r.ApprovalID != "")
		}
	}
	// Output:
	// refunding 2500 on ord_0
	// refused -31004 committed (stored result: true, approval id: false)
	// refused -31002 approval_required (stored result: false, approval id: true)
}
