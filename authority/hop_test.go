package authority

import (
	"slices"
	"testing"
	"time"
)

// TestEvaluateHop: a request presenting a hop is decided by the hop's chain alone, its Chain is
// the hop and every grant above it (so a budget on any of them is charged), a hop is never
// used unless presented, and an unusable hop is authority_hop with only the presented id.
func TestEvaluateHop(t *testing.T) {
	a := mustAuthority(t, 3, `    - id: root
      subject: {agent: planner}
      actions: [payments.refund]
      constraints: {amount_lte: 1000}
      delegable: true
      expires_at: 2099-01-01T00:00:00Z
    - id: own
      subject: {agent: billing}
      actions: [payments.*]
`)
	mid := mustGrant(t, "subject: {agent: planner}\nactions: [payments.refund]\nconstraints: {amount_lte: 800}\ndelegable: true\nexpires_at: 2099-01-01T00:00:00Z\n")
	setBudget(t, mid, "calls", 5, "P1D")
	hop := mustGrant(t, "subject: {agent: billing}\nactions: [payments.refund]\nconstraints: {amount_lte: 500}\nexpires_at: 2099-01-01T00:00:00Z\n")
	setBudget(t, hop, "calls", 2, "P1D")
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ds := []Delegation{
		{ID: "dlg_mid", Parent: "root", Grant: *mid, CreatedBy: "planner", CreatedAt: now},
		{ID: "dlg_hop", Parent: "dlg_mid", Grant: *hop, CreatedBy: "planner", CreatedAt: now, Via: ViaHop},
	}
	req := func(agent, hop string, amount int64, action string) Request {
		return Request{Agent: agent, Action: action, Args: map[string]any{"amount": amount}, Now: now, Hop: hop}
	}
	d := Evaluate(a, ds, req("billing", "dlg_hop", 400, "payments.refund"))
	var ids []string
	for _, l := range d.Chain {
		ids = append(ids, l.ID)
	}
	if !d.Allowed || d.DelegationID != "dlg_hop" || d.GrantID != "root" || !slices.Equal(ids, []string{"dlg_hop", "dlg_mid", "root"}) ||
		len(d.Chain[0].Budgets) != 1 || len(d.Chain[1].Budgets) != 1 {
		t.Fatalf("within the hop = %+v (chain %v), want allowed by dlg_hop beneath root, chain hop, mid, root with their budgets", d, ids)
	}
	// Beyond the hop: its own grant "own" would allow both, and is not consulted.
	if d := Evaluate(a, ds, req("billing", "dlg_hop", 600, "payments.refund")); d.Allowed || d.Reason != ReasonConstraint {
		t.Errorf("beyond the hop's constraint = %+v, want authority_constraint", d)
	}
	if d := Evaluate(a, ds, req("billing", "dlg_hop", 1, "payments.capture")); d.Allowed || d.Reason != ReasonNoAuthority || d.Dimension != DimActions {
		t.Errorf("an action the hop does not name = %+v, want no_authority on actions", d)
	}
	// Not presented: the hop is not one of billing's grants (its own grant decides).
	if d := Evaluate(a, ds, req("billing", "", 600, "payments.refund")); !d.Allowed || d.GrantID != "own" {
		t.Errorf("without the hop = %+v, want allowed by own", d)
	}
	onlyRoot := mustAuthority(t, 3, `    - id: root
      subject: {agent: planner}
      actions: [payments.refund]
      constraints: {amount_lte: 1000}
      delegable: true
      expires_at: 2099-01-01T00:00:00Z
`)
	if d := Evaluate(onlyRoot, ds, req("billing", "", 1, "payments.refund")); d.Allowed || d.Reason != ReasonNoAuthority {
		t.Errorf("the receiver, not presenting the hop and holding nothing else = %+v, want no_authority", d)
	}
	for name, r := range map[string]Request{
		"missing":       req("billing", "dlg_none", 1, "payments.refund"),
		"not a hop":     req("billing", "dlg_mid", 1, "payments.refund"),
		"misaddressed":  req("planner", "dlg_hop", 1, "payments.refund"),
		"expired chain": {Agent: "billing", Action: "payments.refund", Args: map[string]any{"amount": 1}, Now: time.Date(2099, 6, 1, 0, 0, 0, 0, time.UTC), Hop: "dlg_hop"},
	} {
		if d := Evaluate(a, ds, r); d.Allowed || d.Reason != ReasonHop || d.Dimension != DimHop || d.DelegationID != r.Hop {
			t.Errorf("%s: %+v, want authority_hop naming %s", name, d, r.Hop)
		}
	}
	revoked := slices.Clone(ds)
	revoked[0].Revoked = true // revoking an ancestor cuts the hop
	if d := Evaluate(a, revoked, req("billing", "dlg_hop", 1, "payments.refund")); d.Reason != ReasonHop {
		t.Errorf("a hop beneath a revoked delegation = %+v, want authority_hop", d)
	}
}
