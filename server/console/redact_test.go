package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/cli"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/mcpop"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/store"
)

// redactPolicy charges a card whose number people see by its last four only; alice may lower
// the amount.
const redactPolicy = `schema: latch.policy/v1
approvers:
  roles:
    payments-leads: [alice]
actions:
  billing.charge:
    effect: "charge:{order_id}"
    arguments:
      order_id: { type: string }
      card_number: { type: string, redact: last4, display: { label: Card } }
      amount: { type: integer, min: 1, editable: { decrease: true } }
    approvers: { roles: [payments-leads] }
    decision: approve
`

const fullCard = "4242424242424242"

// TestRedactedEverywhere: a policy redacting card_number shows ••••4242 — and never the full
// number — on every surface a person reads a call on: the console's pages, the HTTP listings
// and events, the CLI's listings, inspections and receipts, the operator MCP's tools, the JSON
// and Slack notifications, and the receipts. The approval still binds the full number, and the
// chain verifies.
func TestRedactedEverywhere(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: redactPolicy})
	s.AddAccount(t, "alice", pw)
	ctx := t.Context()

	// Notifications, JSON and Slack, to a receiver that keeps what it is sent.
	var mu sync.Mutex
	var posted []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posted = append(posted, string(b))
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	var notifiers []*notify.Notifier
	for _, format := range []string{notify.FormatJSON, notify.FormatSlack} {
		n, err := notify.New(&notify.Config{URLs: []string{recv.URL}, Format: format, SlackButtons: format == notify.FormatSlack, Secret: []byte("s3cret")})
		if err != nil {
			t.Fatal(err)
		}
		n.UseGuard(s.Guard)
		t.Cleanup(func() { n.Close() })
		notifiers = append(notifiers, n)
	}

	const asked = `{"amount":50000,"card_number":"` + fullCard + `","order_id":"ord_1"}`
	const approved = `{"amount":40000,"card_number":"` + fullCard + `","order_id":"ord_1"}`
	agent := latch.WithPrincipal(ctx, latch.Principal{Agent: "shop-bot"})
	run := func(c context.Context, args string) (*latch.Receipt, error) {
		return s.Guard.Execute(c, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(args)},
			func(context.Context, json.RawMessage) (any, error) { return "charged", nil })
	}
	_, err := run(agent, asked)
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("Execute = %v, want approval required", err)
	}
	evs, err := s.Guard.Store().Events(ctx, store.EventFilter{ApprovalID: ar.ApprovalID})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		for _, n := range notifiers {
			if err := n.Event(ctx, *e); err != nil {
				t.Fatal(err)
			}
		}
	}

	// What each surface shows; every one is searched for the number at the end.
	seen := map[string]string{}
	httpGet := func(path, token string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		r := consoletest.Do(t, consoletest.Client(t, ""), req)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, r.Status, r.Body)
		}
		return r.Body
	}
	c, _ := login(t, s, "alice")
	page := func(path string) string {
		t.Helper()
		p := consoletest.Get(t, c, s.URL+path)
		if p.Status != http.StatusOK {
			t.Fatalf("GET %s = %d", path, p.Status)
		}
		return p.Body
	}
	polPath := filepath.Join(t.TempDir(), "latch.yaml")
	if err := os.WriteFile(polPath, []byte(redactPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	latchCLI := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := cli.Main(ctx, append([]string{"--policy", polPath, "--store", s.StoreURL}, args...), &stdout, &stderr,
			func(string) string { return "" }); code != 0 {
			t.Fatalf("latch %s = exit %d\n%s", strings.Join(args, " "), code, stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	op, err := mcpop.New(&mcpop.Config{Guard: s.Guard})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := op.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "operator"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	tool := func(name string, args map[string]any) string {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || r.IsError {
			t.Fatalf("%s = %v, %v", name, r, err)
		}
		b, _ := json.Marshal(r)
		return string(b)
	}

	// Pending.
	seen["console approvals"] = page("/approvals")
	seen["console request"] = page("/approvals/" + ar.ApprovalID)
	seen["http approvals"] = httpGet("/v1/approvals?status=pending", s.Approver)
	seen["http approval"] = httpGet("/v1/approvals/"+ar.ApprovalID, s.Approver)
	seen["cli approvals"] = latchCLI("approvals")
	seen["cli approvals --json"] = latchCLI("approvals", "--json")
	seen["cli inspect approval"] = latchCLI("inspect", ar.ApprovalID)
	seen["mcp list_approvals"] = tool("list_approvals", map[string]any{})
	seen["mcp show_approval"] = tool("show_approval", map[string]any{"approval_id": ar.ApprovalID})

	// alice lowers the amount and grants; the agent presents the edited call, which runs. The
	// same last four on another card do not pass: the approval binds the full number.
	if _, err := s.Guard.Answer(ctx, &store.AnswerRequest{ID: ar.ApprovalID, Grant: true, Approver: "alice",
		Method: store.MethodSession, Verified: true, Set: json.RawMessage(`{"amount":40000}`)}); err != nil {
		t.Fatalf("grant with an edit: %v", err)
	}
	withApproval := latch.WithApproval(agent, ar.ApprovalID)
	if _, err := run(withApproval, `{"amount":40000,"card_number":"4000056655664242","order_id":"ord_1"}`); !errors.Is(err, latch.ErrApprovalMismatch) {
		t.Fatalf("another card with the same last four = %v, want approval_mismatch", err)
	}
	rc, err := run(withApproval, approved)
	if err != nil || rc.Result != "committed" {
		t.Fatalf("the approved call = %v, %v", rc, err)
	}

	// Answered and run.
	seen["console request, edited"] = page("/approvals/" + ar.ApprovalID)
	seen["console receipts"] = page("/receipts")
	seen["console receipt"] = page("/receipts/" + jsonSeq(rc.Seq))
	seen["http approval, edited"] = httpGet("/v1/approvals/"+ar.ApprovalID, s.Approver)
	seen["http receipts"] = httpGet("/v1/receipts", s.Approver)
	seen["http events"] = eventStream(t, s.URL+"/v1/events?after=0", s.Approver)
	if !strings.Contains(seen["http events"], `"requested_arguments"`) {
		t.Errorf("the event stream has no edit with the requested arguments:\n%s", seen["http events"])
	}
	seen["cli approvals consumed"] = latchCLI("approvals", "--status", "consumed")
	seen["cli inspect approval, edited"] = latchCLI("inspect", ar.ApprovalID)
	seen["cli inspect action"] = latchCLI("inspect", rc.ActionID)
	seen["cli inspect action --json"] = latchCLI("inspect", rc.ActionID, "--json")
	seen["cli receipts"] = latchCLI("receipts", "--json")
	seen["mcp show_approval, edited"] = tool("show_approval", map[string]any{"approval_id": ar.ApprovalID})
	seen["mcp inspect"] = tool("inspect", map[string]any{"id": ar.ApprovalID})
	seen["mcp list_receipts"] = tool("list_receipts", map[string]any{})
	seen["receipt"] = string(rc.Doc)

	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(posted)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	for i, p := range posted {
		seen["notification "+jsonSeq(int64(i))] = p
	}
	slack := ""
	for _, p := range posted {
		if strings.Contains(p, `"blocks"`) {
			slack = p
		}
	}
	mu.Unlock()
	if slack == "" {
		t.Errorf("no Slack message was posted: %q", posted)
	}

	for where, out := range seen {
		if strings.Contains(out, fullCard) {
			t.Errorf("%s shows the full card number:\n%s", where, out)
		}
	}
	// The masked form is what people are shown where arguments are listed.
	for _, where := range []string{"console request", "http approvals", "http approval", "cli approvals", "cli inspect approval",
		"mcp show_approval", "receipt", "console receipt"} {
		if !strings.Contains(seen[where], "••••4242") {
			t.Errorf("%s does not show ••••4242:\n%s", where, seen[where])
		}
	}
	if !strings.Contains(slack, "••••4242") {
		t.Errorf("the Slack message does not show ••••4242:\n%s", slack)
	}
	if rep, err := store.VerifyChain(ctx, s.Guard.Store()); err != nil || !rep.OK {
		t.Errorf("the chain does not verify: %+v, %v", rep, err)
	}
}

// eventStream is what the event stream at u sends in its first second.
func eventStream(t *testing.T, u, token string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body) // ends with the context
	return string(b)
}

func jsonSeq(n int64) string { b, _ := json.Marshal(n); return string(b) }
