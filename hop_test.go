package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// hopDoc: the planner may refund up to 1000 and hop it on; the billing agent holds a wider
// grant of its own (up to 100000).
const hopDoc = `schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    decision: allow
authority:
  grants:
    - id: planner-refunds
      subject: {agent: planner}
      actions: [payments.refund]
      constraints: {amount_lte: 1000}
      delegable: true
      expires_at: 2099-01-01T00:00:00Z
    - id: billing-own
      subject: {agent: billing}
      actions: [payments.refund]
      constraints: {amount_lte: 100000}
`

func hopEnv(t *testing.T, backend string) (*latch.Guard, *clock) {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(hopDoc))
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, backend, "latch_hop"), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, c
}

func refundAs(t *testing.T, g *latch.Guard, agent, hop, id string, amount int64) (*latch.Receipt, error) {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"refund_id": id, "amount": amount})
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: agent})
	return g.Execute(ctx, &latch.Call{Action: "payments.refund", Arguments: args, Options: &latch.Options{Hop: hop}},
		func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
}

// TestHop: on both stores, a call presenting a hop is decided by the hop's chain alone (the
// receiver's own wider grant is not used); a widening hop is refused at creation naming the
// dimension; a missing, misaddressed, revoked or expired hop is refused authority_hop; the
// receiver's receipt names the hop as its delegation and the creation event names it too.
func TestHop(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			g, c := hopEnv(t, backend)
			ctx := t.Context()
			planner, billing := latch.Principal{Agent: "planner"}, latch.Principal{Agent: "billing"}
			var ae *latch.AuthorityError

			// Widening: the planner may not hand on more than it holds.
			_, err := g.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 5000}\nexpires_at: 2098-01-01T00:00:00Z\n"), billing, planner)
			if !errors.As(err, &ae) || ae.Reason != "authority_escalation" || ae.Dimension != "constraints.amount_lte" {
				t.Fatalf("a widening hop err = %v, want authority_escalation on constraints.amount_lte", err)
			}
			if _, err := g.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500}\n"), billing, latch.Principal{Agent: "intruder"}); !errors.As(err, &ae) || ae.Reason != "no_authority" {
				t.Fatalf("a hop by a sender not holding the parent err = %v, want no_authority", err)
			}
			if _, err := g.Hop(ctx, "planner-refunds", []byte("subject: {agent: other}\nactions: [payments.refund]\nconstraints: {amount_lte: 500}\n"), billing, planner); !errors.As(err, &ae) || ae.Dimension != "subject" {
				t.Fatalf("a hop whose subject is not its receiver err = %v, want refused on subject", err)
			}

			hop, err := g.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500}\nexpires_at: "+c.Now().Add(time.Hour).UTC().Format(time.RFC3339)+"\n"), billing, planner)
			if err != nil {
				t.Fatalf("Hop: %v", err)
			}
			if hop.Via != store.ViaHop || hop.Parent != "planner-refunds" || hop.CreatedBy != "planner" {
				t.Errorf("hop = %+v, want via hop beneath planner-refunds by planner", hop)
			}
			if gr, err := policy.ParseGrant("stored", hop.Grant); err != nil || gr.Subject.Agent != "billing" || gr.Subject.User != "" {
				t.Fatalf("stored hop grant = %+v, %v; want addressed to billing", gr, err)
			}

			// Within the hop: allowed, and the receipt names the hop.
			rc, err := refundAs(t, g, "billing", hop.ID, "rf_1", 400)
			if err != nil {
				t.Fatalf("a call within the hop: %v", err)
			}
			if rc.Authority == nil || rc.Authority.DelegationID != hop.ID || rc.Authority.GrantID != "planner-refunds" {
				t.Errorf("receipt authority = %+v, want delegation %s beneath planner-refunds", rc.Authority, hop.ID)
			}
			if doc := lastReceipt(t, g); doc["authority"].(map[string]any)["delegation_id"] != hop.ID {
				t.Errorf("stored receipt authority = %v, want delegation_id %s", doc["authority"], hop.ID)
			}
			// Beyond the hop: refused, although billing's own grant would allow it.
			if _, err := refundAs(t, g, "billing", hop.ID, "rf_2", 800); !errors.As(err, &ae) || ae.Reason != "authority_constraint" {
				t.Fatalf("a call beyond the hop err = %v, want authority_constraint", err)
			}
			if rc, err := refundAs(t, g, "billing", "", "rf_3", 800); err != nil || rc.Authority.GrantID != "billing-own" {
				t.Fatalf("the same call without the hop = %+v, %v; want allowed by billing-own", rc, err)
			}
			// The hop is for billing alone, and only when presented.
			if _, err := refundAs(t, g, "planner", hop.ID, "rf_4", 10); !errors.As(err, &ae) || ae.Reason != "authority_hop" {
				t.Fatalf("a misaddressed hop err = %v, want authority_hop", err)
			}
			if got := latch.RefusalOf(ae); got.Reason != latch.ReasonAuthorityHop || got.Kind != latch.KindAuthority {
				t.Errorf("RefusalOf = %+v, want authority_hop of kind authority", got)
			}
			if _, err := refundAs(t, g, "billing", "dlg_nosuch", "rf_5", 10); !errors.As(err, &ae) || ae.Reason != "authority_hop" {
				t.Fatalf("a missing hop err = %v, want authority_hop", err)
			}
			// WithHop on the context presents it too; a differing one is refused.
			args, _ := json.Marshal(map[string]any{"refund_id": "rf_6", "amount": 10})
			hctx := latch.WithHop(latch.WithPrincipal(ctx, billing), hop.ID)
			if _, err := g.Execute(hctx, &latch.Call{Action: "payments.refund", Arguments: args}, func(context.Context, json.RawMessage) (any, error) { return "ok", nil }); err != nil {
				t.Fatalf("a call presenting the hop through WithHop: %v", err)
			}
			if _, err := g.Execute(latch.WithHop(latch.WithPrincipal(ctx, billing), "dlg_other"), &latch.Call{Action: "payments.refund", Arguments: args, Options: &latch.Options{Hop: hop.ID}},
				func(context.Context, json.RawMessage) (any, error) { return "ok", nil }); !errors.As(err, &ae) || ae.Reason != "authority_hop" {
				t.Fatalf("differing hops in options and context err = %v, want authority_hop", err)
			}

			// Expired: valid up to and including its expires_at.
			c.Add(time.Hour + time.Second)
			if _, err := refundAs(t, g, "billing", hop.ID, "rf_7", 10); !errors.As(err, &ae) || ae.Reason != "authority_hop" {
				t.Fatalf("an expired hop err = %v, want authority_hop", err)
			}

			// Revoked.
			hop2, err := g.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500}\nexpires_at: 2098-01-01T00:00:00Z\n"), billing, planner)
			if err != nil {
				t.Fatalf("Hop: %v", err)
			}
			if _, err := refundAs(t, g, "billing", hop2.ID, "rf_8", 10); err != nil {
				t.Fatalf("a call under the second hop: %v", err)
			}
			if _, err := g.Revoke(ctx, hop2.ID, "planner"); err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			if _, err := refundAs(t, g, "billing", hop2.ID, "rf_9", 10); !errors.As(err, &ae) || ae.Reason != "authority_hop" {
				t.Fatalf("a revoked hop err = %v, want authority_hop", err)
			}
		})
	}
}
