package mcpgo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/integrations/mcpgo"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/mcpwire"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// testPolicy decides the payments server's tools: a refund of at most 1000 runs, a larger one
// needs a person, and wipe is denied.
const testPolicy = `schema: latch.policy/v1
actions:
  mcp.pay.refund:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer }
    rules:
      - when: { amount_lte: 1000 }
        decision: allow
      - decision: approve
  mcp.pay.wipe:
    decision: deny
`

// payments is an MCP server written with mcp-go: refund counts its runs.
type payments struct {
	refunds atomic.Int64
	wipes   atomic.Int64
}

func (p *payments) server(opts ...server.ServerOption) *server.MCPServer {
	s := server.NewMCPServer("payments", "1", opts...)
	s.AddTool(mcp.NewTool("refund", mcp.WithString("order_id"), mcp.WithNumber("amount")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				OrderID string `json:"order_id"`
				Amount  int    `json:"amount"`
			}
			if err := req.BindArguments(&a); err != nil {
				return nil, err
			}
			n := p.refunds.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(fmt.Sprintf("refunded %d on %s", a.Amount, a.OrderID))},
				StructuredContent: map[string]any{"refund_id": fmt.Sprintf("rf_%s_%d", a.OrderID, n), "amount": a.Amount}}, nil
		})
	s.AddTool(mcp.NewTool("wipe"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p.wipes.Add(1)
		return mcp.NewToolResultText("wiped"), nil
	})
	return s
}

type env struct {
	guard *latch.Guard
	pay   *payments
	c     *client.Client
}

func openGuard(t *testing.T, doc string) *latch.Guard {
	t.Helper()
	return openGuardOn(t, "sqlite", doc)
}

// openGuardOn opens a guard with the policy doc on a fresh store of backend (sqlite, postgres:
// internal/testdb).
func openGuardOn(t *testing.T, backend, doc string) *latch.Guard {
	t.Helper()
	pol, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: pol, StoreURL: testdb.URL(t, backend, "mcpgo")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// serve serves s over streamable HTTP and connects an mcp-go client to it.
func serve(t *testing.T, s *server.MCPServer) (*client.Client, string) {
	t.Helper()
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	c, err := client.NewStreamableHttpClient(hs.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "agent", Version: "1"}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	return c, hs.URL + "/mcp"
}

// setup serves the payments server, every tool protected as mcp.pay.<tool>, to an mcp-go client
// over streamable HTTP, as agent support-bot.
func setup(t *testing.T, wait time.Duration) *env {
	t.Helper()
	return setupOn(t, "sqlite", wait)
}

// setupOn is setup on a store of backend.
func setupOn(t *testing.T, backend string, wait time.Duration) *env {
	t.Helper()
	return setupWith(t, backend, wait, nil)
}

// setupWith is setupOn with Config.Interrupter, when itr is set, itr of the guard.
func setupWith(t *testing.T, backend string, wait time.Duration, itr func(*latch.Guard) interrupt.Interrupter[context.Context]) *env {
	t.Helper()
	g := openGuardOn(t, backend, testPolicy)
	mw, err := mcpgo.New(&mcpgo.Config{Guard: g, Principal: latch.Principal{Agent: "support-bot"}, All: true, Prefix: "mcp.pay.",
		ApprovalWait: wait, Interrupter: interrupterOf(g, itr)})
	if err != nil {
		t.Fatal(err)
	}
	pay := &payments{}
	c, _ := serve(t, pay.server(server.WithToolHandlerMiddleware(mw.Middleware())))
	return &env{guard: g, pay: pay, c: c}
}

func call(ctx context.Context, c *client.Client, name string, args map[string]any, meta map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	if meta != nil {
		req.Params.Meta = &mcp.Meta{AdditionalFields: meta}
	}
	return c.CallTool(ctx, req)
}

func refund(ctx context.Context, c *client.Client, order string, amount int, meta map[string]any) (*mcp.CallToolResult, error) {
	return call(ctx, c, "refund", map[string]any{"order_id": order, "amount": amount}, meta)
}

// refusalOf sends a call and returns the refusal its answer carries; it must have been refused.
func refusalOf(t *testing.T, send func() (*mcp.CallToolResult, error)) (int64, mcpwire.Refusal) {
	t.Helper()
	res, err := send()
	if err != nil {
		t.Fatalf("call: %v, want a refused result", err)
	}
	we, ok := mcpgo.RefusalOf(res)
	if !ok {
		t.Fatalf("result %+v carries no refusal", res)
	}
	// The text a model reads is the same JSON-RPC error object.
	tc, ok := res.Content[0].(mcp.TextContent)
	var fromText mcpwire.Error
	if !ok || json.Unmarshal([]byte(tc.Text), &fromText) != nil || fromText.Code != we.Code || fromText.Data.Reason != we.Data.Reason ||
		fromText.Data.ApprovalID != we.Data.ApprovalID || fromText.Message != we.Data.Detail {
		t.Errorf("result text %+v, want the refusal %+v as JSON", res.Content[0], we)
	}
	return we.Code, we.Data
}

func TestDuplicateRefusedWithStoredResult(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := setupOn(t, backend, 0)
			first, err := refund(t.Context(), e.c, "ord_1", 700, nil)
			if err != nil || first.IsError {
				t.Fatalf("first refund = %+v, %v", first, err)
			}
			code, r := refusalOf(t, func() (*mcp.CallToolResult, error) { return refund(t.Context(), e.c, "ord_1", 700, nil) })
			if code != mcpwire.CodeDuplicate || r.Reason != "committed" || r.EffectKey != "refund:ord_1" || r.EffectState != "committed" {
				t.Fatalf("second refund = %d %+v, want %d committed on refund:ord_1", code, r, mcpwire.CodeDuplicate)
			}
			var stored struct {
				StructuredContent map[string]any `json:"structuredContent"`
			}
			if err := json.Unmarshal(r.Result, &stored); err != nil {
				t.Fatalf("stored result %s: %v", r.Result, err)
			}
			want, _ := json.Marshal(first.StructuredContent)
			got, _ := json.Marshal(stored.StructuredContent)
			if string(got) != string(want) {
				t.Errorf("stored result %s, want the first call's %s", got, want)
			}
			if n := e.pay.refunds.Load(); n != 1 {
				t.Errorf("refund handler ran %d times, want 1", n)
			}
		})
	}
}

func TestRequestKey(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := setupOn(t, backend, 0)
			key := map[string]any{mcpwire.MetaRequestKey: "6f1c2d0e-8b7a-4c53"}
			if res, err := refund(t.Context(), e.c, "ord_k", 300, key); err != nil || res.IsError {
				t.Fatalf("keyed refund = %+v, %v", res, err)
			}
			code, r := refusalOf(t, func() (*mcp.CallToolResult, error) { return refund(t.Context(), e.c, "ord_k", 300, key) })
			if code != mcpwire.CodeDuplicate || r.Reason != "committed" || len(r.Result) == 0 {
				t.Errorf("retry under the key = %d %+v, want committed with the stored result", code, r)
			}
			code, r = refusalOf(t, func() (*mcp.CallToolResult, error) {
				return refund(t.Context(), e.c, "ord_bad", 300, map[string]any{mcpwire.MetaRequestKey: 42})
			})
			if code != mcpwire.CodeDenied || r.Reason != "invalid_argument" {
				t.Errorf("a numeric request key = %d %+v, want %d invalid_argument", code, r, mcpwire.CodeDenied)
			}
			if n := e.pay.refunds.Load(); n != 1 {
				t.Errorf("refund handler ran %d times, want 1", n)
			}
		})
	}
}

func TestApprovalRefusedThenResent(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := setupOn(t, backend, 0)
			ctx := t.Context()
			code, r := refusalOf(t, func() (*mcp.CallToolResult, error) { return refund(ctx, e.c, "ord_9", 5000, nil) })
			if code != mcpwire.CodeApprovalRequired || r.Reason != "approval_required" || !strings.HasPrefix(r.ApprovalID, "apr_") || r.ActionHash == "" {
				t.Fatalf("refund of 5000 = %d %+v, want %d approval_required with an approval id", code, r, mcpwire.CodeApprovalRequired)
			}
			if _, err := e.guard.Approve(ctx, r.ApprovalID, "alice"); err != nil {
				t.Fatal(err)
			}
			code, r2 := refusalOf(t, func() (*mcp.CallToolResult, error) { return refund(ctx, e.c, "ord_9", 6000, nil) })
			if code != mcpwire.CodeApprovalRequired || r2.ApprovalID == r.ApprovalID || r2.ActionHash == r.ActionHash {
				t.Fatalf("refund of another amount after the grant = %d %+v, want a new approval_required", code, r2)
			}
			if n := e.pay.refunds.Load(); n != 0 {
				t.Fatalf("refund handler ran %d times before the granted call was re-sent, want 0", n)
			}
			res, err := refund(ctx, e.c, "ord_9", 5000, nil)
			if err != nil || res.IsError {
				t.Fatalf("re-sent granted refund = %+v, %v; want its result", res, err)
			}
			a, err := e.guard.Store().Approval(ctx, r.ApprovalID)
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != store.Consumed {
				t.Errorf("approval %s = %s, want consumed", a.ID, a.Status)
			}
			code, _ = refusalOf(t, func() (*mcp.CallToolResult, error) { return refund(ctx, e.c, "ord_9", 5000, nil) })
			if code != mcpwire.CodeDuplicate && code != mcpwire.CodeApprovalRequired {
				t.Errorf("third refund = %d, want a refusal", code)
			}
			if n := e.pay.refunds.Load(); n != 1 {
				t.Errorf("refund handler ran %d times, want 1", n)
			}
		})
	}
}

func TestApprovalHeldUntilGranted(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := setupOn(t, backend, time.Minute)
			ctx := t.Context()
			type answer struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan answer, 1)
			go func() {
				res, err := refund(ctx, e.c, "ord_h", 4000, nil)
				done <- answer{res, err}
			}()
			var pending *store.Approval
			for deadline := time.Now().Add(20 * time.Second); pending == nil; {
				as, err := e.guard.Store().Approvals(ctx, store.ApprovalFilter{Status: store.Pending})
				if err != nil {
					t.Fatal(err)
				}
				if len(as) > 0 {
					pending = as[0]
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no approval request was made for the held call")
				}
				time.Sleep(20 * time.Millisecond)
			}
			select {
			case a := <-done:
				t.Fatalf("the call answered before its request was granted: %+v %v", a.res, a.err)
			case <-time.After(200 * time.Millisecond):
			}
			if _, err := e.guard.Approve(ctx, pending.ID, "alice"); err != nil {
				t.Fatal(err)
			}
			select {
			case a := <-done:
				if a.err != nil || a.res.IsError {
					t.Fatalf("held refund after the grant = %+v %v, want its result", a.res, a.err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the held call did not answer after its request was granted")
			}
			if n := e.pay.refunds.Load(); n != 1 {
				t.Errorf("refund handler ran %d times, want 1", n)
			}
		})
	}
}

// A denied tool is refused with the code and data the MCP gateway sends for the same call under
// the same policy: the payments server is served, unprotected, over streamable HTTP as the
// gateway's upstream pay, and the same call is made through the gateway (with a go-sdk client)
// and through the middleware (with an mcp-go client).
func TestDeniedMatchesGateway(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	upstream := &payments{}
	hs := httptest.NewServer(server.NewStreamableHTTPServer(upstream.server()))
	t.Cleanup(hs.Close)
	gg := openGuard(t, testPolicy+fmt.Sprintf("gateway:\n  upstreams:\n    pay:\n      url: %s/mcp\n", hs.URL))
	gw, err := gateway.New(ctx, &gateway.Config{Guard: gg, Principal: latch.Principal{Agent: "support-bot"}, ListDenied: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	gst, gct := sdk.NewInMemoryTransports()
	gss, err := gw.Server().Connect(ctx, gst, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gss.Close() })
	gcs, err := sdk.NewClient(&sdk.Implementation{Name: "agent"}, nil).Connect(ctx, gct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gcs.Close() })
	_, gerr := gcs.CallTool(ctx, &sdk.CallToolParams{Name: "pay.wipe", Arguments: map[string]any{"all": true}})
	var je *sdkjsonrpc.Error
	if !errors.As(gerr, &je) {
		t.Fatalf("gateway's wipe = %v, want a JSON-RPC error", gerr)
	}
	var gr mcpwire.Refusal
	if err := json.Unmarshal(je.Data, &gr); err != nil {
		t.Fatal(err)
	}

	e := setup(t, 0)
	mcode, mr := refusalOf(t, func() (*mcp.CallToolResult, error) { return call(ctx, e.c, "wipe", map[string]any{"all": true}, nil) })
	if je.Code != mcpwire.CodeDenied || gr.Reason != "denied" {
		t.Fatalf("gateway's wipe = %d %+v, want %d denied", je.Code, gr, mcpwire.CodeDenied)
	}
	if !strings.HasPrefix(mr.ReceiptID, "rcp_") || !strings.HasPrefix(mr.ActionID, "act_") {
		t.Errorf("middleware's refusal receipt_id %q action_id %q, want rcp_… and act_…", mr.ReceiptID, mr.ActionID)
	}
	gr.ReceiptID, gr.ActionID, mr.ReceiptID, mr.ActionID = "", "", "", ""
	gj, _ := json.Marshal(gr)
	mj, _ := json.Marshal(mr)
	if mcode != je.Code || string(mj) != string(gj) {
		t.Errorf("middleware's wipe = %d %s\ngateway's wipe    = %d %s", mcode, mj, je.Code, gj)
	}
	if upstream.wipes.Load() != 0 || e.pay.wipes.Load() != 0 {
		t.Errorf("wipe ran %d times behind the gateway and %d behind the middleware, want 0", upstream.wipes.Load(), e.pay.wipes.Load())
	}
}

// Only the selected tools are protected: another passes through untouched. A protected tool
// called without a principal is refused unauthenticated and does not run.
func TestUnprotectedToolPassesAndNoPrincipalRefused(t *testing.T) {
	t.Parallel()
	g := openGuard(t, testPolicy)
	mw, err := mcpgo.New(&mcpgo.Config{Guard: g, Tools: map[string]mcpgo.Tool{"refund": {Action: "mcp.pay.refund"}}})
	if err != nil {
		t.Fatal(err)
	}
	pay := &payments{}
	c, _ := serve(t, pay.server(server.WithToolHandlerMiddleware(mw.Middleware())))
	if res, err := call(t.Context(), c, "wipe", map[string]any{}, nil); err != nil || res.IsError {
		t.Fatalf("unprotected wipe = %+v, %v", res, err)
	}
	if pay.wipes.Load() != 1 {
		t.Errorf("unprotected wipe ran %d times, want 1", pay.wipes.Load())
	}
	code, r := refusalOf(t, func() (*mcp.CallToolResult, error) { return refund(t.Context(), c, "ord_p", 10, nil) })
	if code != mcpwire.CodeUnauthenticated || r.Reason != "unauthenticated" {
		t.Errorf("refund without a principal = %d %+v, want %d unauthenticated", code, r, mcpwire.CodeUnauthenticated)
	}
	if pay.refunds.Load() != 0 {
		t.Errorf("refund ran %d times without a principal, want 0", pay.refunds.Load())
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := mcpgo.New(nil); err == nil || !strings.Contains(err.Error(), "Config.Guard") {
		t.Errorf("New(nil) = %v, want an error naming Config.Guard", err)
	}
	g := openGuard(t, testPolicy)
	_, err := mcpgo.New(&mcpgo.Config{Guard: g, Tools: map[string]mcpgo.Tool{"refund": {ErrorsMean: "maybe"}}})
	if err == nil || !strings.Contains(err.Error(), `Config.Tools["refund"].ErrorsMean "maybe"`) {
		t.Errorf("New with ErrorsMean maybe = %v, want an error naming the field", err)
	}
}

// RefusalOf finds no refusal in a tool's own error result.
func TestRefusalOfOwnErrorResult(t *testing.T) {
	t.Parallel()
	if _, ok := mcpgo.RefusalOf(mcp.NewToolResultError("the card was declined")); ok {
		t.Error("RefusalOf(a tool's own error result) = true, want false")
	}
	if _, ok := mcpgo.RefusalOf(nil); ok {
		t.Error("RefusalOf(nil) = true, want false")
	}
}

// A call's _meta latch/task is recorded on its receipt; a task or a hop that cannot be read is
// refused as the gateway refuses it, before anything runs.
func TestTaskAndHopFromMeta(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	ctx := t.Context()
	if res, err := refund(ctx, e.c, "ord_t", 10, map[string]any{mcpwire.MetaTask: "ticket-42"}); err != nil || res.IsError {
		t.Fatalf("refund with a task = %+v, %v", res, err)
	}
	var tasks []string
	for sealed, err := range e.guard.Store().Receipts(ctx, store.ReceiptFilter{EffectKey: "refund:ord_t"}) {
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Task *string `json:"task"`
		}
		if err := json.Unmarshal(sealed.Doc, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Task != nil {
			tasks = append(tasks, *doc.Task)
		}
	}
	if len(tasks) != 1 || tasks[0] != "ticket-42" {
		t.Errorf("receipt tasks = %q, want [ticket-42]", tasks)
	}
	code, r := refusalOf(t, func() (*mcp.CallToolResult, error) {
		return refund(ctx, e.c, "ord_t2", 10, map[string]any{mcpwire.MetaTask: 42})
	})
	if code != mcpwire.CodeDenied || r.Reason != "invalid_argument" {
		t.Errorf("a numeric task = %d %+v, want %d invalid_argument", code, r, mcpwire.CodeDenied)
	}
	code, r = refusalOf(t, func() (*mcp.CallToolResult, error) {
		return refund(ctx, e.c, "ord_t3", 10, map[string]any{mcpwire.MetaHop: true})
	})
	if code != mcpwire.CodeAuthority || r.Reason != "authority_hop" {
		t.Errorf("a boolean hop = %d %+v, want %d authority_hop", code, r, mcpwire.CodeAuthority)
	}
	if n := e.pay.refunds.Load(); n != 1 {
		t.Errorf("refund handler ran %d times, want 1", n)
	}
}

// A protected tool that asks the client for input (a multi round-trip result) is refused
// not_executed: its answer would come back as a new call, decided again, so the tool must finish
// in one call. The effect key stays free.
func TestToolAskingForInputNotExecuted(t *testing.T) {
	t.Parallel()
	g := openGuard(t, testPolicy+"  mcp.pay.ask:\n    effect: \"ask:{id}\"\n    decision: allow\n")
	mw, err := mcpgo.New(&mcpgo.Config{Guard: g, Principal: latch.Principal{Agent: "support-bot"}, All: true, Prefix: "mcp.pay."})
	if err != nil {
		t.Fatal(err)
	}
	s := server.NewMCPServer("asker", "1", server.WithToolHandlerMiddleware(mw.Middleware()))
	var asked atomic.Int64
	s.AddTool(mcp.NewTool("ask", mcp.WithString("id")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		asked.Add(1)
		return &mcp.CallToolResult{Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired},
			MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: mcp.InputRequests{
				"confirm": mcp.NewElicitationInputRequest(mcp.ElicitationParams{Message: "sure?"})}, RequestState: "s1"}}, nil
	})
	c, _ := serve(t, s)
	for i := range 2 {
		code, r := refusalOf(t, func() (*mcp.CallToolResult, error) {
			return call(t.Context(), c, "ask", map[string]any{"id": "a1"}, nil)
		})
		if code != mcpwire.CodeNotExecuted || !strings.Contains(r.Detail, "asked the client for input") {
			t.Errorf("call %d of a tool asking for input = %d %+v, want %d not_executed", i+1, code, r, mcpwire.CodeNotExecuted)
		}
	}
	if asked.Load() != 2 {
		t.Errorf("the tool ran %d times, want 2 (the key stays free)", asked.Load())
	}
}
