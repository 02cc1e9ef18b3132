package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/mcpop"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// holdPolicy asks a person before every refund, and reads its amount as money.
const holdPolicy = `schema: latch.policy/v1
gateway:
  upstreams:
    payments:
      command: [%q, -ledger, %q]
actions:
  mcp.payments.refund:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, editable: { decrease: true }, display: { label: Refund, money: { minor_units: 2, currency: EUR } } }
    decision: approve
`

// shifted is real time moved by an offset a test sets: the guard's and the gateway's clock.
type shifted struct{ off atomic.Int64 }

func (c *shifted) now() time.Time                      { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *shifted) add(d time.Duration)                 { c.off.Add(int64(d)) }
func (e *holdEnv) elicited() <-chan *mcp.ElicitRequest { return e.asks }

// holdEnv is a gateway in front of the payments upstream (a real process) on a real SQLite
// store, with its clock.
type holdEnv struct {
	*env
	clock *shifted
	asks  chan *mcp.ElicitRequest
}

// holdSetup starts the gateway with cfg adjusting its configuration. answer, when set, is the
// agent's client's elicitation handler (the client then declares elicitation); every request
// it receives is also sent on the env's asks channel first.
func holdSetup(t *testing.T, cfg func(*gateway.Config), answer func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error),
	progress func(*mcp.ProgressNotificationClientRequest)) *holdEnv {
	t.Helper()
	return holdSetupVersion(t, cfg, answer, progress, nil)
}

// holdSetupVersion is holdSetup with the client's session options (its protocol version).
func holdSetupVersion(t *testing.T, cfg func(*gateway.Config), answer func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error),
	progress func(*mcp.ProgressNotificationClientRequest), sessionOpts *mcp.ClientSessionOptions) *holdEnv {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	pol, err := policy.Parse("latch.yaml", fmt.Appendf(nil, holdPolicy, paymentsBin, ledger))
	if err != nil {
		t.Fatal(err)
	}
	clk := &shifted{}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(dir, "state.db"), Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	c := &gateway.Config{Guard: g, Principal: latch.Principal{Agent: "support-bot"}, Now: clk.now}
	if cfg != nil {
		cfg(c)
	}
	gw, err := gateway.New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	e := &holdEnv{env: &env{guard: g, gw: gw, ledger: ledger}, clock: clk, asks: make(chan *mcp.ElicitRequest, 4)}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := gw.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	e.agent = connectHeldAgent(t, ct, e.asks, answer, progress, sessionOpts)
	return e
}

// connectHeldAgent connects a go-sdk client over t; with answer it declares elicitation.
func connectHeldAgent(t *testing.T, tr mcp.Transport, asks chan<- *mcp.ElicitRequest,
	answer func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error), progress func(*mcp.ProgressNotificationClientRequest),
	sessionOpts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if answer != nil {
		opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asks <- req
			return answer(ctx, req)
		}
	}
	if progress != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress(req) }
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, opts).Connect(t.Context(), tr, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// accept is a client whose user accepts every elicitation at once, sending content that claims
// an approval — which must approve nothing.
func accept(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approved": true, "approver": "alice"}}, nil
}

type callResult struct {
	res *mcp.CallToolResult
	err error
}

// callAsync sends a refund and returns where its answer arrives.
func callAsync(ctx context.Context, cs *mcp.ClientSession, p *mcp.CallToolParams) <-chan callResult {
	out := make(chan callResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, p)
		out <- callResult{res, err}
	}()
	return out
}

func refundParams(order string, amount int) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "payments.refund", Arguments: map[string]any{"order_id": order, "amount": amount}}
}

// askOf waits for the elicitation of a held call and reads its request.
func askOf(t *testing.T, e *holdEnv) (*mcp.ElicitRequest, gateway.ApprovalAsk) {
	t.Helper()
	select {
	case req := <-e.elicited():
		b, err := json.Marshal(req.Params.Meta[gateway.MetaApproval])
		if err != nil {
			t.Fatal(err)
		}
		var ask gateway.ApprovalAsk
		if err := json.Unmarshal(b, &ask); err != nil {
			t.Fatalf("_meta %s = %s: %v", gateway.MetaApproval, b, err)
		}
		return req, ask
	case <-time.After(30 * time.Second):
		t.Fatal("no elicitation reached the agent's client")
		return nil, gateway.ApprovalAsk{}
	}
}

// stillOpen fails the test if the call answered within d.
func stillOpen(t *testing.T, done <-chan callResult, d time.Duration) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("the held call answered before any approver did: %+v, %v", r.res, r.err)
	case <-time.After(d):
	}
}

func answerOf(t *testing.T, done <-chan callResult) callResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("the held call did not answer")
		return callResult{}
	}
}

// An agent whose client declares elicitation is shown the request — the exact arguments, their
// display form, who may approve, the expiry, where to answer — and its call stays open. Its own
// "accept" approves nothing. A person approves; the tool runs once and the result is the call's
// answer, in the same call; the request is spent.
//
// A client of the current protocol revision answers the elicitation as an input request of the
// call and sends the call again; one of an older revision is sent elicitation/create. Both wait
// in the same call.
func TestHeldCallRunsOnceApproved(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("protocol="+version, func(t *testing.T) {
			t.Parallel()
			testHeldCallRunsOnceApproved(t, version)
		})
	}
}

func testHeldCallRunsOnceApproved(t *testing.T, version string) {
	var progressed atomic.Int32
	e := holdSetupVersion(t, func(c *gateway.Config) {
		c.ConsoleURL = "https://latch.example.com/"
		c.ProgressEvery = 50 * time.Millisecond
	}, accept, func(*mcp.ProgressNotificationClientRequest) { progressed.Add(1) }, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if got := e.agent.InitializeResult().ProtocolVersion; version != "" && got != version {
		t.Fatalf("negotiated protocol %s, want %s", got, version)
	}
	ctx := t.Context()
	p := refundParams("ord_1", 2500)
	p.SetProgressToken("refund-1")
	done := callAsync(ctx, e.agent, p)
	req, ask := askOf(t, e)
	id := ask.Approval.ApprovalID
	if !strings.HasPrefix(id, "apr_") || ask.Approval.Status != "pending" || ask.Approval.Action != "mcp.payments.refund" ||
		string(ask.Approval.Arguments) != `{"amount":2500,"order_id":"ord_1"}` {
		t.Fatalf("the elicitation's request = %+v, want the pending refund with its exact arguments", ask.Approval)
	}
	if ask.AnswerURL != "https://latch.example.com/approvals/"+id || ask.WaitsUntil == "" {
		t.Errorf("answer_url %q, waits_until %q; want the console page of %s and a time", ask.AnswerURL, ask.WaitsUntil, id)
	}
	msg := req.Params.Message
	for _, want := range []string{id, "mcp.payments.refund", `{"amount":2500,"order_id":"ord_1"}`, "Refund: €25.00 (2500 minor units)",
		"anyone but the requester; 1 grant(s) needed", "expires at", ask.AnswerURL, "not an approval", "agent support-bot"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the elicitation's message lacks %q:\n%s", want, msg)
		}
	}
	// The client accepted at once; the call still waits, and nothing ran.
	stillOpen(t, done, 400*time.Millisecond)
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Fatalf("ledger = %q before any approval, want nothing run", lines)
	}
	if a, err := e.guard.Store().Approval(ctx, id); err != nil || a.Status != store.Pending {
		t.Fatalf("approval %s after the client accepted = %+v, %v; want pending", id, a, err)
	}
	if progressed.Load() == 0 {
		t.Error("no progress notification reached the client while the call was held")
	}
	if _, err := e.guard.Approve(ctx, id, "alice"); err != nil {
		t.Fatal(err)
	}
	r := answerOf(t, done)
	if r.err != nil || r.res == nil || r.res.IsError {
		t.Fatalf("the held call answered %+v, %v; want the tool's result", r.res, r.err)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 || !strings.Contains(lines[0], "refund ord_1 2500") {
		t.Errorf("ledger = %q, want exactly one refund of ord_1", lines)
	}
	a, err := e.guard.Store().Approval(ctx, id)
	if err != nil || a.Status != store.Consumed {
		t.Errorf("approval %s = %+v, %v; want consumed", id, a, err)
	}
	// Sent again, the call is a duplicate: still one refund.
	if _, err := e.agent.CallTool(ctx, refundParams("ord_1", 2500)); err == nil {
		t.Error("the refund sent again succeeded, want a refusal")
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q after a re-send, want one refund", lines)
	}
}

// The approver answers through the operator MCP server (a go-sdk client of its own) while the
// agent's call is held: the call answers with the result.
func TestHeldCallApprovedThroughOperatorMCP(t *testing.T) {
	t.Parallel()
	e := holdSetup(t, nil, accept, nil)
	ctx := t.Context()
	op, err := mcpop.New(&mcpop.Config{Guard: e.guard, Approver: "alice", Now: e.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := op.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	opc, err := mcp.NewClient(&mcp.Implementation{Name: "approver"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = opc.Close() })
	done := callAsync(ctx, e.agent, refundParams("ord_10", 3100))
	_, ask := askOf(t, e)
	stillOpen(t, done, 300*time.Millisecond)
	res, err := opc.CallTool(ctx, &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"approval_id": ask.Approval.ApprovalID}})
	if err != nil || res.IsError {
		t.Fatalf("approve through the operator MCP: %+v, %v", res, err)
	}
	if r := answerOf(t, done); r.err != nil || r.res == nil || r.res.IsError {
		t.Fatalf("the held call answered %+v, %v; want the result", r.res, r.err)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want one refund", lines)
	}
}

// Two identical calls held at once (an agent that retried while waiting), one of them carrying a
// request key: every request they made is granted, and the tool still runs once — the other
// call is refused as a duplicate of the committed effect, or its grant as spent.
func TestHeldCallsRunOnce(t *testing.T) {
	t.Parallel()
	e := holdSetup(t, nil, accept, nil)
	ctx := t.Context()
	keyed := refundParams("ord_11", 4100)
	keyed.Meta = mcp.Meta{gateway.MetaRequestKey: "retry-of-ord-11"}
	first := callAsync(ctx, e.agent, refundParams("ord_11", 4100))
	second := callAsync(ctx, e.agent, keyed)
	ids := map[string]bool{}
	for range 2 {
		_, ask := askOf(t, e)
		ids[ask.Approval.ApprovalID] = true
	}
	stillOpen(t, first, 200*time.Millisecond)
	for id := range ids {
		if _, err := e.guard.Approve(ctx, id, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	ok := 0
	for _, done := range []<-chan callResult{first, second} {
		r := answerOf(t, done)
		if r.err == nil && r.res != nil && !r.res.IsError {
			ok++
			continue
		}
		if code, ref := refusalOf(t, r.err); code != gateway.CodeDuplicate && code != gateway.CodeApprovalRefused {
			t.Errorf("the other held call = %d %+v, want a duplicate or a spent approval", code, ref)
		}
	}
	if ok != 1 {
		t.Errorf("%d held calls answered with the result, want 1", ok)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want exactly one refund", lines)
	}
}

// A client without elicitation gets today's answer: approval_required at once, the request
// stored, nothing run; a re-send after the grant runs the tool.
func TestNoElicitationAnswersAtOnce(t *testing.T) {
	t.Parallel()
	e := holdSetup(t, nil, nil, nil)
	ctx := t.Context()
	start := time.Now()
	_, err := e.agent.CallTool(ctx, refundParams("ord_2", 700))
	code, r := refusalOf(t, err)
	if code != gateway.CodeApprovalRequired || r.Reason != "approval_required" || r.ApprovalID == "" {
		t.Fatalf("refund = %d %+v, want approval_required", code, r)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the refusal took %v: the call was held", d)
	}
	if _, err := e.guard.Approve(ctx, r.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.agent.CallTool(ctx, refundParams("ord_2", 700)); err != nil {
		t.Fatalf("the re-sent refund: %v", err)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want one refund", lines)
	}
}

// Holding can be switched off: a client with elicitation is then answered as one without.
func TestHoldingOff(t *testing.T) {
	t.Parallel()
	e := holdSetup(t, func(c *gateway.Config) { c.ApprovalWait = -1 }, accept, nil)
	_, err := e.agent.CallTool(t.Context(), refundParams("ord_3", 700))
	if code, r := refusalOf(t, err); code != gateway.CodeApprovalRequired {
		t.Fatalf("refund = %d %+v, want approval_required", code, r)
	}
	select {
	case <-e.asks:
		t.Error("an elicitation was sent with holding off")
	default:
	}
}

// A person denies the held request: the call answers approval_denied (the refusal the re-sent
// call gets), and nothing runs.
func TestHeldCallDenied(t *testing.T) {
	t.Parallel()
	e := holdSetup(t, nil, accept, nil)
	ctx := t.Context()
	done := callAsync(ctx, e.agent, refundParams("ord_4", 900))
	_, ask := askOf(t, e)
	if _, err := e.guard.Deny(ctx, ask.Approval.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	r := answerOf(t, done)
	code, ref := refusalOf(t, r.err)
	if code != gateway.CodeApprovalRefused || ref.Reason != "approval_denied" || ref.ApprovalID != ask.Approval.ApprovalID {
		t.Errorf("the denied call = %d %+v, want %d approval_denied of %s", code, ref, gateway.CodeApprovalRefused, ask.Approval.ApprovalID)
	}
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Errorf("ledger = %q, want nothing run", lines)
	}
}

// The request expires while the call is held: the call answers approval_expired, nothing runs.
func TestHeldCallExpires(t *testing.T) {
	t.Parallel()
	e := holdSetup(t, func(c *gateway.Config) { c.ApprovalWait = 1000 * time.Hour }, accept, nil)
	ctx := t.Context()
	done := callAsync(ctx, e.agent, refundParams("ord_5", 900))
	_, ask := askOf(t, e)
	exp, err := time.Parse(time.RFC3339, *ask.Approval.ExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	if ask.WaitsUntil != *ask.Approval.ExpiresAt {
		t.Errorf("waits_until %s, want the request's expiry %s (sooner than the wait)", ask.WaitsUntil, *ask.Approval.ExpiresAt)
	}
	stillOpen(t, done, 200*time.Millisecond)
	e.clock.add(time.Until(exp) + time.Second)
	r := answerOf(t, done)
	code, ref := refusalOf(t, r.err)
	if code != gateway.CodeApprovalRefused || ref.Reason != "approval_expired" {
		t.Errorf("the expired call = %d %+v, want %d approval_expired", code, ref, gateway.CodeApprovalRefused)
	}
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Errorf("ledger = %q, want nothing run", lines)
	}
}

// The agent's client declines or cancels the elicitation: the wait ends with today's
// approval_required answer, the request stays pending (declining is not denying), and a re-send
// after a person's grant runs the tool once.
func TestHeldCallDeclinedOrCancelled(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"decline", "cancel"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			e := holdSetup(t, nil, func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: action}, nil
			}, nil)
			ctx := t.Context()
			_, err := e.agent.CallTool(ctx, refundParams("ord_6", 900))
			code, r := refusalOf(t, err)
			if code != gateway.CodeApprovalRequired || r.Reason != "approval_required" {
				t.Fatalf("refund after %s = %d %+v, want approval_required", action, code, r)
			}
			a, err := e.guard.Store().Approval(ctx, r.ApprovalID)
			if err != nil || a.Status != store.Pending {
				t.Fatalf("approval after %s = %+v, %v; want pending", action, a, err)
			}
			if _, err := e.guard.Approve(ctx, r.ApprovalID, "alice"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.agent.CallTool(ctx, refundParams("ord_6", 900)); err != nil {
				t.Fatalf("the re-sent refund: %v", err)
			}
			if lines := e.ledgerLines(t); len(lines) != 1 {
				t.Errorf("ledger = %q, want one refund", lines)
			}
		})
	}
}

// The wait is bounded by Config.ApprovalWait: past it the call answers approval_required and the
// request stays pending for a re-send.
func TestHeldCallWaitBounded(t *testing.T) {
	t.Parallel()
	e := holdSetup(t, func(c *gateway.Config) { c.ApprovalWait = 300 * time.Millisecond }, accept, nil)
	ctx := t.Context()
	start := time.Now()
	_, err := e.agent.CallTool(ctx, refundParams("ord_7", 900))
	code, r := refusalOf(t, err)
	if code != gateway.CodeApprovalRequired {
		t.Fatalf("refund = %d %+v, want approval_required", code, r)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("the call answered after %v, before its wait of 300ms", d)
	}
	if a, err := e.guard.Store().Approval(ctx, r.ApprovalID); err != nil || a.Status != store.Pending {
		t.Errorf("approval = %+v, %v; want pending", a, err)
	}
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Errorf("ledger = %q, want nothing run", lines)
	}
}

// Over streamable HTTP, with an agent token: the elicitation reaches the client on the call's
// own stream, and the approved call answers with the result.
func TestHeldCallOverHTTP(t *testing.T) {
	t.Parallel()
	e := holdSetup(t, nil, nil, nil)
	ctx := t.Context()
	ts := e.guard.Store().(store.TokenStore)
	agent, _, err := auth.CreateToken(ctx, ts, &auth.NewToken{Kind: store.TokenAgent, Agent: "refund-bot"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.gw.Handler(&auth.Authenticator{Tokens: ts}))
	t.Cleanup(srv.Close)
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{agent}}}
	cs := connectHeldAgent(t, tr, e.asks, accept, nil, nil)
	done := callAsync(ctx, cs, refundParams("ord_8", 1200))
	_, ask := askOf(t, e)
	if a := ask.Approval.Principal.Agent; a == nil || *a != "refund-bot" {
		t.Errorf("the request's agent = %v, want refund-bot", a)
	}
	if _, err := e.guard.Approve(ctx, ask.Approval.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	if r := answerOf(t, done); r.err != nil || r.res == nil || r.res.IsError {
		t.Fatalf("the held call over HTTP answered %+v, %v; want the result", r.res, r.err)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want one refund", lines)
	}
}

// The request state is the agent's to echo, and so to forge: a call naming a request granted for
// another action (here other arguments) is decided as a new call — it does not wait on, run
// under or spend that request.
func TestForgedRequestStateIgnored(t *testing.T) {
	t.Parallel()
	e := holdSetup(t, func(c *gateway.Config) { c.ApprovalWait = 300 * time.Millisecond }, accept, nil)
	ctx := t.Context()
	_, err := e.agent.CallTool(ctx, refundParams("ord_9", 100))
	_, r := refusalOf(t, err)
	if _, err := e.guard.Approve(ctx, r.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	p := refundParams("ord_9", 999999)
	p.RequestState = "latch-approval/v1:" + r.ApprovalID
	p.InputResponses = mcp.InputResponseMap{"latch_approval": &mcp.ElicitResult{Action: "accept"}}
	_, err = e.agent.CallTool(ctx, p)
	code, r2 := refusalOf(t, err)
	if code != gateway.CodeApprovalRequired || r2.ApprovalID == "" || r2.ApprovalID == r.ApprovalID {
		t.Errorf("the forged call = %d %+v, want approval_required of a new request (not %s), after its own wait", code, r2, r.ApprovalID)
	}
	for range 2 {
		if _, ask := askOf(t, e); ask.Approval.ApprovalID == r.ApprovalID && string(ask.Approval.Arguments) != `{"amount":100,"order_id":"ord_9"}` {
			t.Errorf("an elicitation showed %s with other arguments", r.ApprovalID)
		}
	}
	if a, err := e.guard.Store().Approval(ctx, r.ApprovalID); err != nil || a.Status != store.Granted {
		t.Errorf("the granted request after the forged call = %+v, %v; want granted, unspent", a, err)
	}
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Errorf("ledger = %q, want nothing run", lines)
	}
}

// A bad Config.ConsoleURL is refused by New, naming the field.
func TestConsoleURLChecked(t *testing.T) {
	t.Parallel()
	g, err := latch.Open(t.Context(), &latch.Config{StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "s.db"),
		Policy: mustParse(t, fmt.Sprintf(holdPolicy, paymentsBin, filepath.Join(t.TempDir(), "ledger")))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	for _, bad := range []string{"latch.example.com", "ftp://x", "https://x/?q=1", "https://"} {
		if gw, err := gateway.New(t.Context(), &gateway.Config{Guard: g, ConsoleURL: bad}); err == nil {
			_ = gw.Close()
			t.Errorf("New with ConsoleURL %q succeeded, want refused", bad)
		} else if !strings.Contains(err.Error(), "Config.ConsoleURL") {
			t.Errorf("New with ConsoleURL %q: %v, want the field named", bad, err)
		}
	}
}

func mustParse(t *testing.T, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A person approves the held call with an edit (a lower amount): the call is answered
// approval_mismatch carrying the approved arguments, nothing runs, and the agent's call with
// those arguments runs once.
//
// The edit may land while the call is held or before the client sends it back with its user's
// answer (the request then binds another hash than the call): both are held on the request.
func TestHeldCallApprovedWithEdits(t *testing.T) {
	t.Parallel()
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("edited_before_resend=%v", before), func(t *testing.T) {
			t.Parallel()
			testHeldCallApprovedWithEdits(t, before)
		})
	}
}

func testHeldCallApprovedWithEdits(t *testing.T, before bool) {
	proceed := make(chan struct{})
	answer := accept
	if before {
		answer = func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			<-proceed // the client answers its elicitation only once the approver has edited
			return accept(ctx, r)
		}
	} else {
		close(proceed)
	}
	e := holdSetup(t, nil, answer, nil)
	ctx := t.Context()
	done := callAsync(ctx, e.agent, refundParams("ord_9", 900))
	_, ask := askOf(t, e)
	if !before {
		stillOpen(t, done, 200*time.Millisecond)
	}
	if _, err := e.guard.Answer(ctx, &store.AnswerRequest{ID: ask.Approval.ApprovalID, Grant: true, Approver: "alice",
		Set: json.RawMessage(`{"amount":400}`)}); err != nil {
		t.Fatal(err)
	}
	if before {
		close(proceed)
	}
	r := answerOf(t, done)
	code, ref := refusalOf(t, r.err)
	if code != gateway.CodeApprovalRefused || ref.Reason != "approval_mismatch" || string(ref.ApprovedArguments) != `{"amount":400,"order_id":"ord_9"}` {
		t.Fatalf("the call approved with an edit = %d %+v, want approval_mismatch carrying the approved arguments", code, ref)
	}
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Fatalf("ledger = %q, want nothing run with the requested amount", lines)
	}
	res, err := e.agent.CallTool(ctx, refundParams("ord_9", 400))
	if err != nil || res.IsError {
		t.Fatalf("the call with the approved arguments = %+v, %v", res, err)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want one refund", lines)
	}
}
