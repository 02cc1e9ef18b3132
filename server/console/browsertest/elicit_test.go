package browsertest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/store"
)

// gatewayRefund is the gateway's refund tool in the console's policy: a payments lead approves
// every one.
const gatewayRefund = `  mcp.payments.refund:
    effect: "mcp-refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, display: { label: Refund, money: { minor_units: 2, currency: EUR } } }
    decision: approve
    approvers:
      roles: [payments-leads]
`

type refundIn struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

type refundOut struct {
	RefundID string `json:"refund_id"`
}

// An agent's go-sdk client that takes elicitation calls an approval-required tool through the MCP
// gateway; the client is shown the request with a link to its console page and accepts (which
// approves nothing). While that same call is open, a payments lead opens the link in the console
// and approves: the tool runs once and the client gets its result in the call it made.
func TestApproveHeldMCPCall(t *testing.T) {
	t.Parallel()
	// The upstream: a real MCP server over streamable HTTP that counts its refunds.
	var refunds atomic.Int32
	up := mcp.NewServer(&mcp.Implementation{Name: "payments"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "refund"}, func(_ context.Context, _ *mcp.CallToolRequest, in refundIn) (*mcp.CallToolResult, refundOut, error) {
		refunds.Add(1)
		return nil, refundOut{RefundID: "re_" + in.OrderID}, nil
	})
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(upstream.Close)

	pol := consoletest.Policy + gatewayRefund + "gateway:\n  upstreams:\n    payments:\n      url: " + upstream.URL + "\n"
	s := consoletest.Start(t, &consoletest.Options{Policy: pol})
	s.AddAccount(t, "alice", pw, "payments-leads")
	ctx := t.Context()
	gw, err := gateway.New(ctx, &gateway.Config{Guard: s.Guard, Now: s.Clock.Now, ConsoleURL: s.URL, ProgressEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	gwsrv := httptest.NewServer(gw.Handler(&auth.Authenticator{Tokens: s.Guard.Store().(store.TokenStore)}))
	t.Cleanup(gwsrv.Close)

	// The agent: billing-worker's token, a client that shows elicitations and accepts them.
	asks := make(chan *mcp.ElicitRequest, 1)
	var progressed atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "agent"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asks <- req
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progressed.Add(1) },
	})
	tr := &mcp.StreamableClientTransport{Endpoint: gwsrv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{s.Agent}}}
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "payments.refund", Arguments: map[string]any{"order_id": "ord_77", "amount": 4200}}
		p.SetProgressToken("refund-77")
		res, err := cs.CallTool(ctx, p)
		done <- answer{res, err}
	}()
	var ask gateway.ApprovalAsk
	select {
	case req := <-asks:
		b, _ := json.Marshal(req.Params.Meta[gateway.MetaApproval])
		if err := json.Unmarshal(b, &ask); err != nil {
			t.Fatalf("the elicitation's %s: %s: %v", gateway.MetaApproval, b, err)
		}
		if !strings.Contains(req.Params.Message, "Refund: €42.00 (4200 minor units)") || !strings.Contains(req.Params.Message, "members of payments-leads") {
			t.Errorf("the elicitation reads:\n%s", req.Params.Message)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no elicitation reached the agent's client")
	}
	id := ask.Approval.ApprovalID
	if ask.AnswerURL != s.URL+"/approvals/"+id {
		t.Fatalf("answer_url %q, want the console page of %s", ask.AnswerURL, id)
	}

	bctx := browser(t)
	login(t, bctx, s.URL, "alice", false)
	navigate(t, bctx, "open the elicitation's link", ask.AnswerURL, "#req-"+id+" button.grant")
	if got := text(t, bctx, "#req-"+id+" .args"); !strings.Contains(got, "€42.00") || !strings.Contains(got, "ord_77") {
		t.Errorf("the request's arguments read %q", got)
	}
	// The client accepted long ago: the call is still open, and nothing ran.
	select {
	case a := <-done:
		t.Fatalf("the call answered before alice did: %+v, %v", a.res, a.err)
	default:
	}
	if n := refunds.Load(); n != 0 {
		t.Fatalf("%d refunds before the approval, want 0", n)
	}
	shot(t, bctx, "held-mcp-call")
	run(t, bctx, "alice approves", chromedp.Click(chromedp.CSS("#req-"+id+" button.grant")))
	select {
	case a := <-done:
		if a.err != nil || a.res == nil || a.res.IsError {
			t.Fatalf("the held call answered %+v, %v; want the refund's result", a.res, a.err)
		}
		var out refundOut
		b, _ := json.Marshal(a.res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil || out.RefundID != "re_ord_77" {
			t.Errorf("the result = %s, want refund re_ord_77", b)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the held call did not answer after the approval")
	}
	if n := refunds.Load(); n != 1 {
		t.Errorf("%d refunds, want exactly 1", n)
	}
	a, err := s.Guard.Store().Approval(ctx, id)
	if err != nil || a.Status != store.Consumed || a.Approver != "alice" {
		t.Errorf("the request = %+v, %v; want consumed, approved by alice", a, err)
	}
	if progressed.Load() == 0 {
		t.Error("no progress notification reached the client while its call was held")
	}
	// The receipt of the call names the approval and alice.
	var found bool
	for r, err := range s.Guard.Store().Receipts(ctx, store.ReceiptFilter{EffectKey: "mcp-refund:ord_77"}) {
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Result, Approver string }
		if err := json.Unmarshal(r.Doc, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Result == "committed" && doc.Approver == "alice" {
			found = true
		}
	}
	if !found {
		t.Error("no committed receipt approved by alice for mcp-refund:ord_77")
	}
}

// bearer sends an agent token with every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
