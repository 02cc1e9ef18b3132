package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch/gateway"
)

// TestGatewayHoldsCallForApproval: an agent whose go-sdk client takes elicitation calls an
// approval-required refund through `latch gateway --stdio --console-url …` (a process); it is
// shown the request with its console link and accepts, and its call stays open while
// `latch approve … --as alice` (another process) grants it; the call answers with the refund's
// result and the upstream ran once. With --approval-wait 0 the same client is refused
// approval_required at once, as without elicitation.
func TestGatewayHoldsCallForApproval(t *testing.T) {
	t.Parallel()
	bin := payments(t)
	e := newMCPEnv(t, "")
	if err := os.WriteFile(e.policy, []byte(gatewayPolicy(commandUpstream(bin, e.ledger))), 0o600); err != nil {
		t.Fatal(err)
	}
	asks := make(chan *mcp.ElicitRequest, 2)
	connect := func(args ...string) *mcp.ClientSession {
		cmd := e.command(args...)
		cmd.Stderr = io.Discard
		client := mcp.NewClient(&mcp.Implementation{Name: "agent"}, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asks <- req
				return &mcp.ElicitResult{Action: "accept"}, nil
			}})
		cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect to latch %v: %v", args, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}

	off := connect("gateway", "--stdio", "--agent", "support-bot", "--approval-wait", "0")
	_, err := callRefund(t, off, "ord_off", 90000)
	if code, r := refusalOf(t, err); code != gateway.CodeApprovalRequired {
		t.Fatalf("refund with --approval-wait 0 = %d %+v, want approval_required", code, r)
	}
	select {
	case <-asks:
		t.Fatal("an elicitation was sent with --approval-wait 0")
	default:
	}

	agent := connect("gateway", "--stdio", "--agent", "support-bot", "--console-url", "https://latch.example.com")
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := callRefund(t, agent, "ord_held", 90000)
		done <- answer{res, err}
	}()
	var ask gateway.ApprovalAsk
	select {
	case req := <-asks:
		b, _ := json.Marshal(req.Params.Meta[gateway.MetaApproval])
		if err := json.Unmarshal(b, &ask); err != nil {
			t.Fatalf("%s = %s: %v", gateway.MetaApproval, b, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no elicitation reached the agent's client")
	}
	id := ask.Approval.ApprovalID
	if ask.AnswerURL != "https://latch.example.com/approvals/"+id {
		t.Errorf("answer_url = %q, want the console page of %s", ask.AnswerURL, id)
	}
	select {
	case a := <-done:
		t.Fatalf("the call answered before any approver did: %+v, %v", a.res, a.err)
	case <-time.After(500 * time.Millisecond):
	}
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Fatalf("ledger = %q before the approval", lines)
	}
	out := e.run(t, "approve", id, "--as", "alice")
	if !strings.Contains(out, id) {
		t.Errorf("latch approve printed %q", out)
	}
	select {
	case a := <-done:
		if a.err != nil || a.res == nil || a.res.IsError {
			t.Fatalf("the held call answered %+v, %v; want the refund's result", a.res, a.err)
		}
		var text bytes.Buffer
		for _, c := range a.res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if !strings.Contains(text.String(), "ord_held") {
			t.Errorf("the result reads %q, want the refund of ord_held", text.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the held call did not answer after latch approve")
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want exactly one refund", lines)
	}
}
