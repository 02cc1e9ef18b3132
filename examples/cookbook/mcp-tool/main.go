// Command mcp-tool puts an agent's MCP tool calls through latch's gateway, in one process.
//
// The upstream is a billing MCP server (the official Go SDK, streamable HTTP on an httptest
// server) with two tools: refund, and delete_customer. The policy's gateway section names it;
// gateway.New connects to it and the agent, an MCP client on an in-memory transport, sees
// billing.refund only — delete_customer is not in the policy, so it is neither listed nor
// callable. The agent refunds an order, then sends the same refund again (its framework
// retried the turn): the gateway answers with a JSON-RPC error whose data says the effect is
// already committed and carries the first result. A refund above 100.00 is answered
// approval_required. The upstream performed one refund and no deletion.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
	"github.com/latchkit/latch/gateway"
)

const policyTemplate = `
schema: latch.policy/v1
gateway:
  upstreams:
    billing:
      url: %s
actions:
  mcp.billing.refund:
    effect: "refund:{order_id}"
    resource: "order:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, min: 1 }
    rules:
      - when: { amount_lte: 10000 }
        decision: allow
      - decision: approve
`

// RefundArgs are the refund tool's arguments.
type RefundArgs struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

// CustomerArgs are delete_customer's arguments.
type CustomerArgs struct {
	CustomerID string `json:"customer_id"`
}

// billing is the upstream's ledger of what it did.
type billing struct {
	mu        sync.Mutex
	refunds   int
	deletions int
}

func (b *billing) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "billing", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "refund", Description: "Refund an order."},
		func(_ context.Context, _ *mcp.CallToolRequest, a RefundArgs) (*mcp.CallToolResult, map[string]any, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.refunds++
			return nil, map[string]any{"refund_id": fmt.Sprintf("re_%d", b.refunds), "order_id": a.OrderID}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_customer", Description: "Delete a customer and their data."},
		func(_ context.Context, _ *mcp.CallToolRequest, a CustomerArgs) (*mcp.CallToolResult, map[string]any, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.deletions++
			return nil, map[string]any{"deleted": a.CustomerID}, nil
		})
	return s
}

func main() {
	b := &billing{}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return b.server() }, nil))
	defer srv.Close()
	recipe.Run("mcp-tool", fmt.Sprintf(policyTemplate, srv.URL), func(ctx context.Context, k *recipe.Kitchen) error {
		gw, err := gateway.New(ctx, &gateway.Config{Guard: k.Guard, Principal: latch.Principal{Agent: "support-agent"}})
		if err != nil {
			return err
		}
		defer gw.Close()
		st, ct := mcp.NewInMemoryTransports()
		ss, err := gw.Server().Connect(ctx, st, nil)
		if err != nil {
			return err
		}
		defer ss.Close()
		agent, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			return err
		}
		defer agent.Close()

		var names []string
		for tool, err := range agent.Tools(ctx, nil) {
			if err != nil {
				return err
			}
			names = append(names, tool.Name)
		}
		k.Say("the agent is offered: %v", names)
		k.Expect(fmt.Sprint(names) == "[billing.refund]", "the agent is offered %v, want [billing.refund]", names)

		call := func(name string, args map[string]any) (*mcp.CallToolResult, *gateway.Refusal, error) {
			res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			var we *jsonrpc.Error
			if errors.As(err, &we) {
				var r gateway.Refusal
				if jerr := json.Unmarshal(we.Data, &r); jerr != nil {
					return nil, nil, fmt.Errorf("refusal data %s: %w", we.Data, jerr)
				}
				return nil, &r, nil
			}
			return res, nil, err
		}
		res, ref, err := call("billing.refund", map[string]any{"order_id": "o_311", "amount": 2500})
		if err != nil || ref != nil || res.IsError {
			return fmt.Errorf("the first refund: %v, %+v", err, ref)
		}
		k.Say("billing.refund o_311 25.00: %s", res.StructuredContent)
		_, ref, err = call("billing.refund", map[string]any{"order_id": "o_311", "amount": 2500})
		if err != nil {
			return err
		}
		k.Expect(ref != nil && ref.Reason == string(latch.ReasonCommitted), "the repeated refund = %+v, want a committed refusal", ref)
		if ref != nil {
			k.Say("billing.refund o_311 again: refused %s (%s), first result %s", ref.Reason, ref.EffectKey, ref.Result)
		}
		_, ref, err = call("billing.refund", map[string]any{"order_id": "o_312", "amount": 90000})
		if err != nil {
			return err
		}
		k.Expect(ref != nil && ref.Reason == string(latch.ReasonApprovalRequired) && ref.ApprovalID != "", "a refund of 900.00 = %+v, want approval_required", ref)
		if ref != nil {
			k.Say("billing.refund o_312 900.00: refused %s, %s waits for a person", ref.Reason, ref.ApprovalID)
		}
		_, ref, err = call("billing.delete_customer", map[string]any{"customer_id": "cus_9"})
		k.Expect(err != nil || ref != nil, "delete_customer was called")
		if ref != nil {
			k.Say("billing.delete_customer (not listed): refused %s", ref.Reason)
		} else {
			k.Say("billing.delete_customer (not listed): %v", err)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		k.Say("upstream refunds: %d, deletions: %d", b.refunds, b.deletions)
		k.Expect(b.refunds == 1 && b.deletions == 0, "the upstream refunded %d times and deleted %d customers, want 1 and 0", b.refunds, b.deletions)
		return nil
	})
}
