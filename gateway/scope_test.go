package gateway_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestScopeRefusedThroughGateway: with the policy's static scopes, an agent's tool call on a
// resource in its scope reaches the upstream; one outside it is answered with the JSON-RPC code
// of kind denied and reason out_of_scope, and the upstream never sees it (no ledger line, no
// effect record). A scope service that fails refuses it scope_unavailable, with the same code.
func TestScopeRefusedThroughGateway(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(testPolicy, `    effect: "refund:{order_id}"`+"\n", `    effect: "refund:{order_id}"`+"\n"+`    resource: "order:{order_id}"`+"\n", 1) +
		"scopes:\n  actions: [mcp.payments.refund]\n  static:\n    support-bot: [\"order:A-*\"]\n"
	e := setupWith(t, doc, latch.Principal{Agent: "support-bot"})
	if _, err := refund(t.Context(), e.agent, "A-1", 100); err != nil {
		t.Fatalf("refund in scope: %v", err)
	}
	_, err := refund(t.Context(), e.agent, "B-1", 100)
	code, r := refusalOf(t, err)
	if code != gateway.CodeDenied || r.Reason != "out_of_scope" || r.Kind != "denied" || r.Action != "mcp.payments.refund" {
		t.Errorf("refund out of scope = %d %+v, want %d out_of_scope kind denied", code, r, gateway.CodeDenied)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 || strings.Contains(lines[0], "B-1") {
		t.Errorf("ledger = %q, want the in-scope refund alone", lines)
	}
	if _, err := e.guard.Store().Effect(t.Context(), "refund:B-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("effect refund:B-1 = %v, want none", err)
	}
	// balance is outside the section's actions: it is not scoped.
	if _, err := e.agent.CallTool(t.Context(), &mcp.CallToolParams{Name: "payments.balance", Arguments: map[string]any{"account": "a"}}); err != nil {
		t.Errorf("balance, not a scoped action: %v", err)
	}

	// A scope service that fails refuses the call scope_unavailable, with the same code.
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(svc.Close)
	doc = strings.Replace(doc, "  static:\n    support-bot: [\"order:A-*\"]\n", "  url: "+strconv.Quote(svc.URL)+"\n", 1)
	e = setupWith(t, doc, latch.Principal{Agent: "support-bot"})
	_, err = refund(t.Context(), e.agent, "A-2", 100)
	code, r = refusalOf(t, err)
	if code != gateway.CodeDenied || r.Reason != "scope_unavailable" || r.Kind != "denied" {
		t.Errorf("refund, scope service down = %d %+v, want %d scope_unavailable kind denied", code, r, gateway.CodeDenied)
	}
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Errorf("ledger = %q, want nothing", lines)
	}
}
