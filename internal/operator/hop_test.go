package operator_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
)

const hopPolicy = `schema: latch.policy/v1
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
`

// TestHopTree: on both stores, Hop gathers what ran under a hop: the hop as stored and its
// state, its creation and revocation records, and each call decided under it (a committed one
// with its effect record, a refused one with none), grouped by action id; a call the receiver
// made without presenting the hop is not in it, and neither is another hop's. An id nothing
// names is ErrNothingRecorded.
func TestHopTree(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			p, err := policy.Parse("latch.yaml", []byte(hopPolicy))
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
			g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: testdb.URL(t, backend, "hoptree"), Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			planner, billing := latch.Principal{Agent: "planner"}, latch.Principal{Agent: "billing"}
			grant := []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500}\nexpires_at: 2026-11-29T11:00:00Z\n")
			hop, err := g.Hop(ctx, "planner-refunds", grant, billing, planner)
			if err != nil {
				t.Fatal(err)
			}
			other, err := g.Hop(ctx, "planner-refunds", grant, billing, planner)
			if err != nil {
				t.Fatal(err)
			}
			refund := func(hopID, id string, amount int) {
				args, _ := json.Marshal(map[string]any{"refund_id": id, "amount": amount})
				_, _ = g.Execute(latch.WithPrincipal(ctx, billing), &latch.Call{Action: "payments.refund", Arguments: args, Options: &latch.Options{Hop: hopID}},
					func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
			}
			refund(hop.ID, "rf_1", 400)   // within: committed
			refund(hop.ID, "rf_2", 800)   // beyond: denied authority_constraint
			refund("", "rf_3", 800)       // billing's own grant: not under the hop
			refund(other.ID, "rf_4", 100) // another hop
			if _, err := g.Revoke(ctx, hop.ID, "planner"); err != nil {
				t.Fatal(err)
			}

			o, err := operator.New(&operator.Config{Store: g.Store(), Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			tree, err := o.Hop(ctx, hop.ID)
			if err != nil {
				t.Fatalf("Hop: %v", err)
			}
			if tree.Delegation == nil || tree.Delegation.DelegationID != hop.ID || tree.State != operator.HopRevoked {
				t.Errorf("hop = %+v, state %q; want %s, revoked", tree.Delegation, tree.State, hop.ID)
			}
			if len(tree.Records) != 2 || recordKind(t, tree.Records[0].Receipt) != receipt.KindDelegation || recordKind(t, tree.Records[1].Receipt) != receipt.KindRevocation {
				t.Errorf("records = %d, want its creation and its revocation", len(tree.Records))
			}
			if len(tree.Calls) != 2 {
				t.Fatalf("calls = %+v, want the two decided under the hop", tree.Calls)
			}
			in, out := tree.Calls[0], tree.Calls[1]
			if in.Result != receipt.Committed || in.EffectKey == nil || *in.EffectKey != "refund:rf_1" || in.Effect == nil || in.Effect.State != "committed" || len(in.Receipts) != 1 {
				t.Errorf("the call within the hop = %+v", in)
			}
			if out.Result != receipt.Denied || out.Reason == nil || *out.Reason != "authority_constraint" || out.Effect != nil {
				t.Errorf("the call beyond the hop = %+v", out)
			}
			if *in.Principal.Agent != "billing" || in.Action != "payments.refund" {
				t.Errorf("call principal/action = %v %s", *in.Principal.Agent, in.Action)
			}
			if len(tree.Receipts) != 4 {
				t.Errorf("receipts naming the hop = %d, want 4 (creation, two calls, revocation)", len(tree.Receipts))
			}

			if live, err := o.Hop(ctx, other.ID); err != nil || live.State != operator.HopLive || len(live.Calls) != 1 {
				t.Errorf("the other hop = %+v, %v; want live with one call", live, err)
			}
			later, err := operator.New(&operator.Config{Store: g.Store(), Now: func() time.Time { return now.Add(2 * time.Hour) }})
			if err != nil {
				t.Fatal(err)
			}
			if exp, err := later.Hop(ctx, other.ID); err != nil || exp.State != operator.HopExpired {
				t.Errorf("the other hop past its expires_at = %+v, %v; want expired", exp, err)
			}
			if _, err := o.Hop(ctx, "dlg_nosuch"); !errors.Is(err, operator.ErrNothingRecorded) {
				t.Errorf("Hop(dlg_nosuch) = %v, want ErrNothingRecorded", err)
			}
		})
	}
}

func recordKind(t *testing.T, doc json.RawMessage) string {
	t.Helper()
	var d struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	return d.Kind
}
