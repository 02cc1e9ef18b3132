package mcpsdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/integrations/mcpsdk"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/mcpwire"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// payments is an MCP server written with the go-sdk: refund counts its runs, wipe and balance
// would answer if they ran.
type payments struct {
	refunds atomic.Int64
	wipes   atomic.Int64
}

func (p *payments) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1"}, nil)
	obj := &mcp.Tool{InputSchema: map[string]any{"type": "object"}}
	refund := *obj
	refund.Name = "refund"
	s.AddTool(&refund, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			OrderID string `json:"order_id"`
			Amount  int    `json:"amount"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
			return nil, err
		}
		n := p.refunds.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refunded %d on %s", a.Amount, a.OrderID)}},
			StructuredContent: map[string]any{"refund_id": fmt.Sprintf("rf_%s_%d", a.OrderID, n), "amount": a.Amount}}, nil
	})
	wipe := *obj
	wipe.Name = "wipe"
	s.AddTool(&wipe, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p.wipes.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wiped"}}}, nil
	})
	return s
}

type env struct {
	guard *latch.Guard
	pay   *payments
	cs    *mcp.ClientSession
}

// openGuard opens a guard on a real SQLite file with the policy doc.
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
	g, err := latch.Open(t.Context(), &latch.Config{Policy: pol, StoreURL: testdb.URL(t, backend, "mcpsdk")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// setup serves the payments server, every tool protected as mcp.pay.<tool>, to a go-sdk client
// over the SDK's in-memory transport, as agent support-bot.
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
	ctx := t.Context()
	g := openGuardOn(t, backend, testPolicy)
	mw, err := mcpsdk.New(&mcpsdk.Config{Guard: g, Principal: latch.Principal{Agent: "support-bot"}, All: true, Prefix: "mcp.pay.",
		ApprovalWait: wait, Interrupter: interrupterOf(g, itr)})
	if err != nil {
		t.Fatal(err)
	}
	pay := &payments{}
	srv := pay.server()
	srv.AddReceivingMiddleware(mw.Middleware())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &env{guard: g, pay: pay, cs: cs}
}

func refund(ctx context.Context, cs *mcp.ClientSession, order string, amount int, meta mcp.Meta) (*mcp.CallToolResult, error) {
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": order, "amount": amount}, Meta: meta})
}

// refusalOf is the JSON-RPC code and data of err, which must be a JSON-RPC error.
func refusalOf(t *testing.T, err error) (int64, mcpwire.Refusal) {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a JSON-RPC error", err, err)
	}
	var r mcpwire.Refusal
	if err := json.Unmarshal(we.Data, &r); err != nil {
		t.Fatalf("error data %s: %v", we.Data, err)
	}
	if we.Message != r.Detail {
		t.Errorf("error message %q, want the data's detail %q", we.Message, r.Detail)
	}
	return we.Code, r
}

// A duplicate of a committed refund (same effect key) is refused -31004 with the first call's
// stored result, and the handler ran once.
func TestDuplicateRefusedWithStoredResult(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := setupOn(t, backend, 0)
			first, err := refund(t.Context(), e.cs, "ord_1", 700, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = refund(t.Context(), e.cs, "ord_1", 700, nil)
			code, r := refusalOf(t, err)
			if code != mcpwire.CodeDuplicate || r.Reason != "committed" || r.EffectKey != "refund:ord_1" || r.EffectState != "committed" {
				t.Fatalf("second refund = %d %+v, want %d committed on refund:ord_1", code, r, mcpwire.CodeDuplicate)
			}
			if !strings.HasPrefix(r.ReceiptID, "rcp_") || !strings.HasPrefix(r.ActionID, "act_") {
				t.Errorf("receipt_id %q action_id %q, want rcp_… and act_…", r.ReceiptID, r.ActionID)
			}
			var stored mcp.CallToolResult
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

// A call carrying _meta latch/request_key retried under the same key is decided as a duplicate:
// the handler runs once; a malformed key is refused invalid_argument before anything runs.
func TestRequestKey(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := setupOn(t, backend, 0)
			key := mcp.Meta{mcpwire.MetaRequestKey: "6f1c2d0e-8b7a-4c53"}
			if _, err := refund(t.Context(), e.cs, "ord_k", 300, key); err != nil {
				t.Fatal(err)
			}
			_, err := refund(t.Context(), e.cs, "ord_k", 300, key)
			if code, r := refusalOf(t, err); code != mcpwire.CodeDuplicate || r.Reason != "committed" || len(r.Result) == 0 {
				t.Errorf("retry under the key = %d %+v, want committed with the stored result", code, r)
			}
			_, err = refund(t.Context(), e.cs, "ord_bad", 300, mcp.Meta{mcpwire.MetaRequestKey: 42})
			if code, r := refusalOf(t, err); code != mcpwire.CodeDenied || r.Reason != "invalid_argument" {
				t.Errorf("a numeric request key = %d %+v, want %d invalid_argument", code, r, mcpwire.CodeDenied)
			}
			if n := e.pay.refunds.Load(); n != 1 {
				t.Errorf("refund handler ran %d times, want 1", n)
			}
		})
	}
}

// An approval-required refund is refused -31002 with its request's id; another amount after the
// grant is another action and refused; the granted call re-sent runs once, and a third send is
// refused without running.
func TestApprovalRefusedThenResent(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := setupOn(t, backend, 0)
			ctx := t.Context()
			_, err := refund(ctx, e.cs, "ord_9", 5000, nil)
			code, r := refusalOf(t, err)
			if code != mcpwire.CodeApprovalRequired || r.Reason != "approval_required" || !strings.HasPrefix(r.ApprovalID, "apr_") || r.ActionHash == "" {
				t.Fatalf("refund of 5000 = %d %+v, want %d approval_required with an approval id", code, r, mcpwire.CodeApprovalRequired)
			}
			if _, err := e.guard.Approve(ctx, r.ApprovalID, "alice"); err != nil {
				t.Fatal(err)
			}
			_, err = refund(ctx, e.cs, "ord_9", 6000, nil)
			code, r2 := refusalOf(t, err)
			if code != mcpwire.CodeApprovalRequired || r2.ApprovalID == r.ApprovalID || r2.ActionHash == r.ActionHash {
				t.Fatalf("refund of another amount after the grant = %d %+v, want a new approval_required", code, r2)
			}
			if n := e.pay.refunds.Load(); n != 0 {
				t.Fatalf("refund handler ran %d times before the granted call was re-sent, want 0", n)
			}
			res, err := refund(ctx, e.cs, "ord_9", 5000, nil)
			if err != nil {
				t.Fatalf("re-sent granted refund: %v", err)
			}
			if res.IsError {
				t.Fatalf("re-sent granted refund = %+v, want its result", res)
			}
			a, err := e.guard.Store().Approval(ctx, r.ApprovalID)
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != store.Consumed {
				t.Errorf("approval %s = %s, want consumed", a.ID, a.Status)
			}
			_, err = refund(ctx, e.cs, "ord_9", 5000, nil)
			if code, r3 := refusalOf(t, err); code != mcpwire.CodeDuplicate && code != mcpwire.CodeApprovalRequired {
				t.Errorf("third refund = %d %+v, want a refusal", code, r3)
			}
			if n := e.pay.refunds.Load(); n != 1 {
				t.Errorf("refund handler ran %d times, want 1", n)
			}
		})
	}
}

// With Config.ApprovalWait, an approval-required call is held open until a person grants its
// request, then runs once; the grant is spent.
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
				res, err := refund(ctx, e.cs, "ord_h", 4000, nil)
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
			if n := e.pay.refunds.Load(); n != 0 {
				t.Fatalf("refund handler ran %d times before the grant, want 0", n)
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
			a, err := e.guard.Store().Approval(ctx, pending.ID)
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != store.Consumed {
				t.Errorf("approval %s = %s, want consumed", a.ID, a.Status)
			}
		})
	}
}

// A held call whose wait ends before an answer is refused approval_required with the request's
// id, as without a wait.
func TestApprovalWaitEnds(t *testing.T) {
	t.Parallel()
	e := setup(t, 150*time.Millisecond)
	_, err := refund(t.Context(), e.cs, "ord_w", 4000, nil)
	if code, r := refusalOf(t, err); code != mcpwire.CodeApprovalRequired || r.ApprovalID == "" {
		t.Fatalf("refund = %d %+v, want approval_required with its request's id", code, r)
	}
	if n := e.pay.refunds.Load(); n != 0 {
		t.Errorf("refund handler ran %d times, want 0", n)
	}
}

// A denied tool is refused with the data the MCP gateway sends for the same call under the same
// policy: the payments server is served, unprotected, over streamable HTTP as the gateway's
// upstream pay, and the same call is made through the gateway and through the middleware.
func TestDeniedMatchesGateway(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	upstream := &payments{}
	plain := upstream.server()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plain }, nil))
	t.Cleanup(hs.Close)
	doc := testPolicy + fmt.Sprintf("gateway:\n  upstreams:\n    pay:\n      url: %s\n", hs.URL)
	gg := openGuard(t, doc)
	gw, err := gateway.New(ctx, &gateway.Config{Guard: gg, Principal: latch.Principal{Agent: "support-bot"}, ListDenied: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	gst, gct := mcp.NewInMemoryTransports()
	gss, err := gw.Server().Connect(ctx, gst, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gss.Close() })
	gcs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, gct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gcs.Close() })

	e := setup(t, 0)
	args := map[string]any{"all": true}
	_, gerr := gcs.CallTool(ctx, &mcp.CallToolParams{Name: "pay.wipe", Arguments: args})
	_, merr := e.cs.CallTool(ctx, &mcp.CallToolParams{Name: "wipe", Arguments: args})
	gcode, gr := refusalOf(t, gerr)
	mcode, mr := refusalOf(t, merr)
	if gcode != mcpwire.CodeDenied || gr.Reason != "denied" {
		t.Fatalf("gateway's wipe = %d %+v, want %d denied", gcode, gr, mcpwire.CodeDenied)
	}
	if !strings.HasPrefix(mr.ReceiptID, "rcp_") || !strings.HasPrefix(mr.ActionID, "act_") {
		t.Errorf("middleware's refusal receipt_id %q action_id %q, want rcp_… and act_…", mr.ReceiptID, mr.ActionID)
	}
	// Receipts are each store's own; everything else is the same answer.
	gr.ReceiptID, gr.ActionID, mr.ReceiptID, mr.ActionID = "", "", "", ""
	gj, _ := json.Marshal(gr)
	mj, _ := json.Marshal(mr)
	if mcode != gcode || string(mj) != string(gj) {
		t.Errorf("middleware's wipe = %d %s\ngateway's wipe    = %d %s", mcode, mj, gcode, gj)
	}
	if upstream.wipes.Load() != 0 || e.pay.wipes.Load() != 0 {
		t.Errorf("wipe ran %d times behind the gateway and %d behind the middleware, want 0", upstream.wipes.Load(), e.pay.wipes.Load())
	}
}

// Only the selected tools are protected: another passes through untouched. A protected tool
// called on a session without a principal is refused unauthenticated and does not run.
func TestUnprotectedToolPassesAndNoPrincipalRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := openGuard(t, testPolicy)
	mw, err := mcpsdk.New(&mcpsdk.Config{Guard: g, Tools: map[string]mcpsdk.Tool{"refund": {Action: "mcp.pay.refund"}}})
	if err != nil {
		t.Fatal(err)
	}
	pay := &payments{}
	srv := pay.server()
	srv.AddReceivingMiddleware(mw.Middleware())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	// wipe is not among the selected tools: the middleware lets it through untouched.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wipe", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("unprotected wipe: %v", err)
	}
	if pay.wipes.Load() != 1 {
		t.Errorf("unprotected wipe ran %d times, want 1", pay.wipes.Load())
	}
	_, err = refund(ctx, cs, "ord_p", 10, nil)
	if code, r := refusalOf(t, err); code != mcpwire.CodeUnauthenticated || r.Reason != "unauthenticated" {
		t.Errorf("refund without a principal = %d %+v, want %d unauthenticated", code, r, mcpwire.CodeUnauthenticated)
	}
	if pay.refunds.Load() != 0 {
		t.Errorf("refund ran %d times without a principal, want 0", pay.refunds.Load())
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := mcpsdk.New(nil); err == nil || !strings.Contains(err.Error(), "Config.Guard") {
		t.Errorf("New(nil) = %v, want an error naming Config.Guard", err)
	}
	g := openGuard(t, testPolicy)
	_, err := mcpsdk.New(&mcpsdk.Config{Guard: g, Tools: map[string]mcpsdk.Tool{"refund": {ErrorsMean: "maybe"}}})
	if err == nil || !strings.Contains(err.Error(), `Config.Tools["refund"].ErrorsMean "maybe"`) {
		t.Errorf("New with ErrorsMean maybe = %v, want an error naming the field", err)
	}
}

// A tool the server does not have, protected by All and allowed by the policy, did not run: the
// call failed, and the effect key is free for the next attempt rather than ambiguous.
func TestUnknownToolNotExecuted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := openGuard(t, testPolicy+"  mcp.pay.ghost:\n    effect: \"ghost:{id}\"\n    decision: allow\n")
	mw, err := mcpsdk.New(&mcpsdk.Config{Guard: g, Principal: latch.Principal{Agent: "support-bot"}, All: true, Prefix: "mcp.pay."})
	if err != nil {
		t.Fatal(err)
	}
	srv := (&payments{}).server()
	srv.AddReceivingMiddleware(mw.Middleware())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	for i := range 2 {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ghost", Arguments: map[string]any{"id": "g1"}})
		if code, r := refusalOf(t, err); code != mcpwire.CodeNotExecuted || r.EffectState != "failed" {
			t.Errorf("call %d of a missing tool = %d %+v, want %d not_executed (failed)", i+1, code, r, mcpwire.CodeNotExecuted)
		}
	}
}

// A held call whose request is denied is refused -31003 approval_denied, and nothing runs.
func TestApprovalHeldThenDenied(t *testing.T) {
	t.Parallel()
	e := setup(t, time.Minute)
	ctx := t.Context()
	done := make(chan error, 1)
	go func() {
		_, err := refund(ctx, e.cs, "ord_d", 4000, nil)
		done <- err
	}()
	var id string
	for deadline := time.Now().Add(20 * time.Second); id == ""; time.Sleep(20 * time.Millisecond) {
		as, err := e.guard.Store().Approvals(ctx, store.ApprovalFilter{Status: store.Pending})
		if err != nil {
			t.Fatal(err)
		}
		if len(as) > 0 {
			id = as[0].ID
		}
		if id == "" && time.Now().After(deadline) {
			t.Fatal("no approval request was made for the held call")
		}
	}
	if _, err := e.guard.Deny(ctx, id, "alice"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if code, r := refusalOf(t, err); code != mcpwire.CodeApprovalRefused || r.Reason != "approval_denied" || r.ApprovalID != id {
			t.Errorf("held refund after the denial = %d %+v, want %d approval_denied of %s", code, r, mcpwire.CodeApprovalRefused, id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the held call did not answer after its request was denied")
	}
	if n := e.pay.refunds.Load(); n != 0 {
		t.Errorf("refund handler ran %d times, want 0", n)
	}
}

// A held call that carries a progress token is sent progress notifications naming its request
// while it waits; the principal is the one Config.PrincipalOf gives the call.
func TestHeldCallProgressAndPrincipalOf(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := openGuard(t, testPolicy)
	mw, err := mcpsdk.New(&mcpsdk.Config{Guard: g, All: true, Prefix: "mcp.pay.", ApprovalWait: time.Minute,
		PrincipalOf: func(_ context.Context, req *mcp.CallToolRequest) (latch.Principal, bool) {
			agent, ok := req.Params.Meta["agent"].(string) // a test stand-in for a session's credential
			return latch.Principal{Agent: agent}, ok
		}})
	if err != nil {
		t.Fatal(err)
	}
	pay := &payments{}
	srv := pay.server()
	srv.AddReceivingMiddleware(mw.Middleware())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	progress := make(chan string, 16)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params.Message:
			default:
			}
		}}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	done := make(chan error, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "ord_pg", "amount": 4000},
			Meta: mcp.Meta{"agent": "billing-bot"}}
		params.SetProgressToken("tok-1")
		_, err := cs.CallTool(ctx, params)
		done <- err
	}()
	var msg string
	select {
	case msg = <-progress:
	case <-time.After(20 * time.Second):
		t.Fatal("no progress notification while the call was held")
	}
	as, err := g.Store().Approvals(ctx, store.ApprovalFilter{Status: store.Pending})
	if err != nil || len(as) != 1 {
		t.Fatalf("pending approvals = %v, %v; want one", as, err)
	}
	if !strings.Contains(msg, as[0].ID) {
		t.Errorf("progress message %q does not name request %s", msg, as[0].ID)
	}
	if as[0].Agent != "billing-bot" {
		t.Errorf("request made by agent %q, want billing-bot (Config.PrincipalOf's)", as[0].Agent)
	}
	if _, err := g.Approve(ctx, as[0].ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("held refund after the grant: %v", err)
	}
	if n := pay.refunds.Load(); n != 1 {
		t.Errorf("refund handler ran %d times, want 1", n)
	}
}

// A call's _meta latch/task is recorded on its receipt; a task or a hop that cannot be read is
// refused as the gateway refuses it, before anything runs.
func TestTaskAndHopFromMeta(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	ctx := t.Context()
	if _, err := refund(ctx, e.cs, "ord_t", 10, mcp.Meta{mcpwire.MetaTask: "ticket-42"}); err != nil {
		t.Fatal(err)
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
	_, err := refund(ctx, e.cs, "ord_t2", 10, mcp.Meta{mcpwire.MetaTask: 42})
	if code, r := refusalOf(t, err); code != mcpwire.CodeDenied || r.Reason != "invalid_argument" {
		t.Errorf("a numeric task = %d %+v, want %d invalid_argument", code, r, mcpwire.CodeDenied)
	}
	_, err = refund(ctx, e.cs, "ord_t3", 10, mcp.Meta{mcpwire.MetaHop: true})
	if code, r := refusalOf(t, err); code != mcpwire.CodeAuthority || r.Reason != "authority_hop" {
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
	ctx := t.Context()
	g := openGuard(t, testPolicy+"  mcp.pay.ask:\n    effect: \"ask:{id}\"\n    decision: allow\n")
	mw, err := mcpsdk.New(&mcpsdk.Config{Guard: g, Principal: latch.Principal{Agent: "support-bot"}, All: true, Prefix: "mcp.pay."})
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker"}, nil)
	var asked atomic.Int64
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		asked.Add(1)
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Mode: "form", Message: "sure?",
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`)}}, RequestState: "s1"}, nil
	})
	srv.AddReceivingMiddleware(mw.Middleware())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	for i := range 2 {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"id": "a1"}})
		if code, r := refusalOf(t, err); code != mcpwire.CodeNotExecuted || !strings.Contains(r.Detail, "asked the client for input") {
			t.Errorf("call %d of a tool asking for input = %d %+v, want %d not_executed", i+1, code, r, mcpwire.CodeNotExecuted)
		}
	}
	if asked.Load() != 2 {
		t.Errorf("the tool ran %d times, want 2 (the key stays free)", asked.Load())
	}
}
