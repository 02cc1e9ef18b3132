package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// taskPolicy is testPolicy with authority: refunds only for tickets FIN-…, balances for any
// task or none.
const taskPolicy = testPolicy + `authority:
  grants:
    - id: ticket-refunds
      subject: { agent: refund-bot }
      actions: [mcp.payments.refund]
      tasks: ["ticket:FIN-*"]
    - id: balances
      subject: { agent: refund-bot }
      actions: [mcp.payments.balance]
`

// headers is a transport that sets the bearer token and adds each of task as a Latch-Task
// header (none when task is empty; twice when it has two).
type headers struct {
	token string
	task  []string
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.token)
	for _, t := range h.task {
		r.Header.Add(gateway.TaskHeader, t)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestTaskFromHeaderAndMeta drives the gateway over HTTP with the real MCP SDK client: the task
// comes from the Latch-Task header or from _meta latch/task; a task-bound grant admits its task
// (the receipt records it), refuses another task or none with no_authority on tasks, and sends
// nothing upstream; a header and a _meta that differ, a header given twice, a _meta that is not
// a string and a task no call may carry are invalid_argument, and write nothing.
func TestTaskFromHeaderAndMeta(t *testing.T) {
	t.Parallel()
	e := setupWith(t, taskPolicy, latch.Principal{})
	ts := e.guard.Store().(store.TokenStore)
	ctx := t.Context()
	token, _, err := auth.CreateToken(ctx, ts, &auth.NewToken{Kind: store.TokenAgent, Agent: "refund-bot"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.gw.Handler(&auth.Authenticator{Tokens: ts}))
	t.Cleanup(srv.Close)
	connect := func(task ...string) *mcp.ClientSession {
		t.Helper()
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: headers{token, task}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, tr, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	call := func(cs *mcp.ClientSession, order string, meta any) error {
		p := &mcp.CallToolParams{Name: "payments.refund", Arguments: map[string]any{"order_id": order, "amount": 100}}
		if meta != nil {
			p.Meta = mcp.Meta{gateway.MetaTask: meta}
		}
		_, err := cs.CallTool(ctx, p)
		return err
	}
	receiptTask := func(key string) (string, bool) {
		t.Helper()
		for r, err := range e.guard.Store().Receipts(ctx, store.ReceiptFilter{EffectKey: key}) {
			if err != nil {
				t.Fatal(err)
			}
			var doc struct{ Task *string }
			if err := json.Unmarshal(r.Doc, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Task == nil {
				return "", true
			}
			return *doc.Task, true
		}
		return "", false
	}

	fin1, none := connect("ticket:FIN-1"), connect()
	allowed := []struct {
		name, order string
		cs          *mcp.ClientSession
		meta        any
		task        string
	}{
		{"header", "ord_h", fin1, nil, "ticket:FIN-1"},
		{"_meta", "ord_m", none, "ticket:FIN-2", "ticket:FIN-2"},
		{"header and the same _meta", "ord_hm", fin1, "ticket:FIN-1", "ticket:FIN-1"},
	}
	for _, tt := range allowed {
		if err := call(tt.cs, tt.order, tt.meta); err != nil {
			t.Errorf("%s: refund = %v, want it to run", tt.name, err)
			continue
		}
		if task, ok := receiptTask("refund:" + tt.order); !ok || task != tt.task {
			t.Errorf("%s: receipt task = %q (found %v), want %q", tt.name, task, ok, tt.task)
		}
	}
	sent := len(e.ledgerLines(t))
	if sent != len(allowed) {
		t.Fatalf("upstream refunds = %d, want %d", sent, len(allowed))
	}

	ops := connect("ticket:OPS-1")
	refused := []struct {
		name string
		cs   *mcp.ClientSession
		meta any
	}{
		{"another task in the header", ops, nil},
		{"another task in _meta", none, "ticket:OPS-2"},
		{"no task", none, nil},
	}
	for _, tt := range refused {
		code, r := refusalOf(t, call(tt.cs, "ord_x", tt.meta))
		if code != gateway.CodeAuthority || r.Reason != "no_authority" || r.Kind != "authority" || r.Dimension != "tasks" {
			t.Errorf("%s: %d %+v, want %d no_authority, kind authority, dimension tasks", tt.name, code, r, gateway.CodeAuthority)
		}
	}

	before := writes(t, e.guard)
	invalid := []struct {
		name string
		cs   *mcp.ClientSession
		meta any
		want string
	}{
		{"header and _meta differ", fin1, "ticket:FIN-9", `the Latch-Task header "ticket:FIN-1" and _meta latch/task "ticket:FIN-9" differ`},
		{"header twice", connect("ticket:FIN-1", "ticket:FIN-2"), nil, "the Latch-Task header is given 2 times"},
		{"_meta not a string", none, 7, "_meta latch/task is float64, not a string"},
		{"a bidi override", none, "ticket:FIN-\u202e1", "invisible format character"},
	}
	for _, tt := range invalid {
		code, r := refusalOf(t, call(tt.cs, "ord_y", tt.meta))
		if code != gateway.CodeDenied || r.Reason != "invalid_argument" || r.Kind != "invalid_argument" || !strings.Contains(r.Detail, tt.want) {
			t.Errorf("%s: %d %+v, want %d invalid_argument …%s…", tt.name, code, r, gateway.CodeDenied, tt.want)
		}
	}
	if after := writes(t, e.guard); after != before {
		t.Errorf("write transactions %d, then %d: a task that cannot be read writes nothing", before, after)
	}
	if lines := e.ledgerLines(t); len(lines) != sent {
		t.Errorf("upstream refunds = %d after the refusals, want still %d", len(lines), sent)
	}
	// A grant that names no tasks admits a call with a task.
	if _, err := ops.CallTool(ctx, &mcp.CallToolParams{Name: "payments.balance", Arguments: map[string]any{"account": "acc_1"}}); err != nil {
		t.Errorf("balance with task ticket:OPS-1 = %v, want it to run", err)
	}
}

// TestTaskFromMetaOverStdio: without HTTP (an in-process transport, as stdio), the task comes
// from _meta.
func TestTaskFromMetaOverStdio(t *testing.T) {
	t.Parallel()
	e := setupWith(t, taskPolicy, latch.Principal{Agent: "refund-bot"})
	ctx := t.Context()
	_, err := e.agent.CallTool(ctx, &mcp.CallToolParams{Name: "payments.refund", Meta: mcp.Meta{gateway.MetaTask: "ticket:FIN-5"},
		Arguments: map[string]any{"order_id": "ord_s", "amount": 100}})
	if err != nil {
		t.Fatalf("refund with _meta task = %v", err)
	}
	code, r := refusalOf(t, func() error { _, err := refund(ctx, e.agent, "ord_t", 100); return err }())
	if code != gateway.CodeAuthority || r.Dimension != "tasks" {
		t.Errorf("refund with no task = %d %+v, want %d on dimension tasks", code, r, gateway.CodeAuthority)
	}
}

func writes(t *testing.T, g *latch.Guard) int64 {
	t.Helper()
	return g.Store().(store.WriteCounter).WriteTransactions()
}
