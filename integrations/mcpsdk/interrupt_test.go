package mcpsdk_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/mcpwire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// interrupterOf is itr of g, nil when itr is.
func interrupterOf(g *latch.Guard, itr func(*latch.Guard) interrupt.Interrupter[context.Context]) interrupt.Interrupter[context.Context] {
	if itr == nil {
		return nil
	}
	return itr(g)
}

// answering is an Interrupter standing for a framework's pause in which a person answers: it
// grants (or denies) the request it is handed, then resumes with where the wait stands.
type answering struct {
	g     *latch.Guard
	deny  bool
	calls atomic.Int32
}

func (a *answering) Interrupt(ctx context.Context, r *latch.Refusal) (interrupt.Answer, error) {
	a.calls.Add(1)
	answer := a.g.Approve
	if a.deny {
		answer = a.g.Deny
	}
	if _, err := answer(ctx, r.ApprovalID, "alice"); err != nil {
		return interrupt.Answer{}, err
	}
	return interrupt.Check(ctx, a.g, r)
}

// With Config.Interrupter, a tools/call the policy sends to a person waits on it: granted inside
// the wait, the call runs again, once, and the client gets the tool's result; denied, the client
// gets -31003 approval_denied and the tool never runs.
func TestApprovalThroughInterrupter(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			var grant *answering
			e := setupWith(t, backend, 0, func(g *latch.Guard) interrupt.Interrupter[context.Context] {
				grant = &answering{g: g}
				return grant
			})
			res, err := refund(ctx, e.cs, "ord_i", 4000, nil)
			if err != nil || res.IsError {
				t.Fatalf("refund through a granting interrupter = %+v %v, want its result", res, err)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "refunded 4000 on ord_i") {
				t.Errorf("refund's result %+v, want the tool's", res.Content)
			}
			if n, c := e.pay.refunds.Load(), grant.calls.Load(); n != 1 || c != 1 {
				t.Errorf("refund ran %d times, interrupted %d times; want 1 and 1", n, c)
			}

			var deny *answering
			e = setupWith(t, backend, 0, func(g *latch.Guard) interrupt.Interrupter[context.Context] {
				deny = &answering{g: g, deny: true}
				return deny
			})
			_, err = refund(ctx, e.cs, "ord_j", 4000, nil)
			if code, r := refusalOf(t, err); code != mcpwire.CodeApprovalRefused || r.Reason != "approval_denied" || r.ApprovalID == "" || r.ReceiptID == "" {
				t.Errorf("refund through a denying interrupter = %d %+v, want %d approval_denied naming the request, with a receipt", code, r, mcpwire.CodeApprovalRefused)
			}
			if n, c := e.pay.refunds.Load(), deny.calls.Load(); n != 0 || c != 1 {
				t.Errorf("refund ran %d times after the denial, interrupted %d times; want 0 and 1", n, c)
			}
		})
	}
}
