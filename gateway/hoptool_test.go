package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hopPolicy: the planner may refund up to 1000 and hand that on; billing holds a wider grant of
// its own.
const hopPolicy = testPolicy + `authority:
  grants:
    - id: planner-refunds
      subject: { agent: planner }
      actions: [mcp.payments.refund]
      constraints: { amount_lte: 1000 }
      delegable: true
      expires_at: 2099-01-01T00:00:00Z
    - id: billing-own
      subject: { agent: billing }
      actions: ["mcp.payments.*"]
`

// connectAs serves a second gateway over e's guard (its own upstream process, the same ledger)
// to an agent whose session carries principal p, and returns that agent's session.
func connectAs(t *testing.T, e *env, p latch.Principal) *mcp.ClientSession {
	t.Helper()
	ctx := t.Context()
	gw, err := gateway.New(ctx, &gateway.Config{Guard: e.guard, Principal: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	st, ct := mcp.NewInMemoryTransports()
	ss, err := gw.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: p.Agent}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestHopTool: an agent behind the gateway creates a hop with the reserved tool latch.hop (as
// the session's principal); a widening hop and unreadable arguments are refused in the one
// vocabulary, storing nothing; the receiver presents the hop in _meta latch/hop and is decided
// by it alone (its own wider grant is not used), the upstream called only for the call within
// the hop, whose receipt names the hop; a hop presented wrongly is refused authority_hop.
func TestHopTool(t *testing.T) {
	t.Parallel()
	e := setupWith(t, hopPolicy, latch.Principal{Agent: "planner"})
	ctx := t.Context()
	billing := connectAs(t, e, latch.Principal{Agent: "billing"})

	listed := false
	for tool, err := range e.agent.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == "latch.hop" {
			listed = tool.InputSchema != nil
		}
	}
	if !listed {
		t.Fatal("the reserved tool latch.hop is not listed (with an input schema)")
	}

	hopCall := func(args map[string]any) (*mcp.CallToolResult, error) {
		return e.agent.CallTool(ctx, &mcp.CallToolParams{Name: "latch.hop", Arguments: args})
	}
	delegations := func() int {
		all, err := e.guard.Store().(store.DelegationStore).Delegations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(all)
	}
	// Refused: wider than the parent; arguments that cannot be read.
	for _, tc := range []struct {
		name          string
		args          map[string]any
		code          int64
		reason, where string
	}{
		{"widening", map[string]any{"parent": "planner-refunds", "to": map[string]any{"agent": "billing"},
			"grant": map[string]any{"actions": []string{"mcp.payments.refund"}, "constraints": map[string]any{"amount_lte": 5000}}},
			gateway.CodeAuthority, "authority_escalation", "constraints.amount_lte"},
		{"no parent", map[string]any{"to": map[string]any{"agent": "billing"}, "grant": map[string]any{"actions": []string{"mcp.payments.refund"}}},
			gateway.CodeDenied, "invalid_argument", ""},
		{"grant does not parse", map[string]any{"parent": "planner-refunds", "to": map[string]any{"agent": "billing"}, "grant": map[string]any{"actoins": []string{"x"}}},
			gateway.CodeDenied, "invalid_argument", ""},
		{"a parent that is not delegable, as YAML text", map[string]any{"parent": "billing-own", "to": map[string]any{"agent": "billing"}, "grant": "actions: [mcp.payments.refund]\n"},
			gateway.CodeAuthority, "authority_escalation", "delegable"},
	} {
		_, err := hopCall(tc.args)
		code, r := refusalOf(t, err)
		if code != tc.code || r.Reason != tc.reason || r.Dimension != tc.where || r.Action != "latch.hop" {
			t.Errorf("%s: code %d, refusal %+v; want %d %s on %q", tc.name, code, r, tc.code, tc.reason, tc.where)
		}
	}
	if n := delegations(); n != 0 {
		t.Fatalf("%d delegations stored after refused hops, want 0", n)
	}

	res, err := hopCall(map[string]any{"parent": "planner-refunds", "to": map[string]any{"agent": "billing"},
		"grant": map[string]any{"actions": []string{"mcp.payments.refund"}, "constraints": map[string]any{"amount_lte": 500}, "expires_at": "2098-01-01T00:00:00Z"}})
	if err != nil || res.IsError {
		t.Fatalf("latch.hop: %v %+v", err, res)
	}
	var hop struct {
		ID        string `json:"delegation_id"`
		Parent    string `json:"parent"`
		Via       string `json:"via"`
		CreatedBy string `json:"created_by"`
		Subject   struct {
			Agent string `json:"agent"`
		} `json:"subject"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &hop); err != nil || hop.Via != "hop" || hop.Parent != "planner-refunds" || hop.CreatedBy != "planner" || hop.Subject.Agent != "billing" {
		t.Fatalf("hop = %s (%v), want a hop by planner to billing beneath planner-refunds", raw, err)
	}

	refundVia := func(order string, amount int, meta map[string]any) (*mcp.CallToolResult, error) {
		return billing.CallTool(ctx, &mcp.CallToolParams{Name: "payments.refund", Meta: meta,
			Arguments: map[string]any{"order_id": order, "amount": amount}})
	}
	within := map[string]any{gateway.MetaHop: hop.ID}
	if res, err := refundVia("ord_1", 400, within); err != nil || res.IsError {
		t.Fatalf("a refund within the hop: %v %+v", err, res)
	}
	_, err = refundVia("ord_2", 800, within)
	if code, r := refusalOf(t, err); code != gateway.CodeAuthority || r.Reason != "authority_constraint" {
		t.Errorf("a refund beyond the hop: code %d, %+v; want authority_constraint (billing's own grant is not used)", code, r)
	}
	for name, meta := range map[string]map[string]any{"unknown hop": {gateway.MetaHop: "dlg_nosuch"}, "not a string": {gateway.MetaHop: 7}} {
		_, err := refundVia("ord_3", 10, meta)
		if code, r := refusalOf(t, err); code != gateway.CodeAuthority || r.Reason != "authority_hop" {
			t.Errorf("%s: code %d, %+v; want authority_hop", name, code, r)
		}
	}
	// The planner presenting billing's hop: misaddressed.
	_, err = e.agent.CallTool(ctx, &mcp.CallToolParams{Name: "payments.refund", Meta: within, Arguments: map[string]any{"order_id": "ord_4", "amount": 10}})
	if code, r := refusalOf(t, err); code != gateway.CodeAuthority || r.Reason != "authority_hop" {
		t.Errorf("the planner presenting billing's hop: code %d, %+v; want authority_hop", code, r)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("upstream refunds = %q, want only ord_1", lines)
	}
	// Without the hop, billing's own grant decides the same refund.
	if res, err := refundVia("ord_2", 800, nil); err != nil || res.IsError {
		t.Fatalf("the refund without the hop: %v %+v", err, res)
	}

	var named int
	for r, err := range e.guard.Store().Receipts(ctx, store.ReceiptFilter{EffectKey: "refund:ord_1"}) {
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Authority struct {
				DelegationID string `json:"delegation_id"`
			} `json:"authority"`
		}
		if json.Unmarshal(r.Doc, &doc) == nil && doc.Authority.DelegationID == hop.ID {
			named++
		}
	}
	if named != 1 {
		t.Errorf("receipts of ord_1 naming the hop: %d, want 1", named)
	}
}

// TestNoHopToolWithoutAuthority: a policy with no authority section has nothing to hand on, and
// the gateway offers no hop tool.
func TestNoHopToolWithoutAuthority(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for tool, err := range e.agent.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == "latch.hop" {
			t.Errorf("latch.hop is listed for a policy without an authority section")
		}
	}
}
