package latch_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

const handoffPolicy = `
schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    decision: allow
authority:
  grants:
    - id: planner-refunds
      subject: { agent: planner }
      actions: [payments.refund]
      constraints: { amount_lte: 100000 }
      delegable: true
      expires_at: 2099-01-01T00:00:00Z
    - id: billing-own
      subject: { agent: billing }
      actions: [payments.refund]
`

// The planner hands the billing agent refunds of at most 500 (a hop). Billing, which holds a
// wider grant of its own, is held to the hop on every call that presents it.
func ExampleGuard_Hop() {
	g, done := exampleGuard(handoffPolicy)
	defer done()
	ctx := context.Background()
	planner, billing := latch.Principal{Agent: "planner"}, latch.Principal{Agent: "billing"}

	_, err := g.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500000}\n"), billing, planner)
	var ae *latch.AuthorityError
	if errors.As(err, &ae) {
		fmt.Println("wider than the parent:", ae.Reason, "on", ae.Dimension)
	}
	hop, err := g.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500}\nexpires_at: 2098-01-01T00:00:00Z\n"), billing, planner)
	if err != nil {
		panic(err)
	}

	refund := func(id string, amount int) (*latch.Receipt, error) {
		args, _ := json.Marshal(map[string]any{"refund_id": id, "amount": amount})
		return g.Execute(latch.WithPrincipal(ctx, billing), &latch.Call{Action: "payments.refund", Arguments: args, Options: &latch.Options{Hop: hop.ID}},
			func(context.Context, json.RawMessage) (any, error) { return "refunded", nil })
	}
	rc, err := refund("rf_1", 400)
	fmt.Println("within the hop:", rc.Result, rc.Authority.DelegationID == hop.ID, err)
	_, err = refund("rf_2", 800)
	if errors.As(err, &ae) {
		fmt.Println("beyond the hop:", ae.Reason, "on", ae.Dimension)
	}
	// Output:
	// wider than the parent: authority_escalation on constraints.amount_lte
	// within the hop: committed true <nil>
	// beyond the hop: authority_constraint on constraints.amount_lte
}

// A hop token carries the hop to a receiver that checks it before reading the store: here the
// sender's guard signs it, and the receiver's guard, on the same store, trusts the sender's
// public key only.
func ExampleGuard_HopToken() {
	dir, _ := os.MkdirTemp("", "latch-example-")
	defer os.RemoveAll(dir)
	p, _ := policy.Parse("latch.yaml", []byte(handoffPolicy))
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	url := "sqlite:" + filepath.Join(dir, "state.db")
	ctx := context.Background()
	sender, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: url, HopKey: key})
	if err != nil {
		panic(err)
	}
	defer sender.Close()
	receiver, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: url, HopVerifyKeys: []ed25519.PublicKey{pub}})
	if err != nil {
		panic(err)
	}
	defer receiver.Close()

	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	hop, err := sender.Hop(ctx, "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500}\nexpires_at: "+until+"\n"),
		latch.Principal{Agent: "billing"}, latch.Principal{Agent: "planner"})
	if err != nil {
		panic(err)
	}
	tok, err := sender.HopToken(hop)
	if err != nil {
		panic(err)
	}

	refundAs := func(agent string) (*latch.Receipt, error) {
		return receiver.Execute(latch.WithPrincipal(ctx, latch.Principal{Agent: agent}),
			&latch.Call{Action: "payments.refund", Arguments: []byte(`{"refund_id":"rf_1","amount":400}`), Options: &latch.Options{Hop: tok}},
			func(context.Context, json.RawMessage) (any, error) { return "refunded", nil })
	}
	_, err = refundAs("planner") // not the token's audience
	fmt.Println("presented by another agent:", latch.RefusalOf(err).Reason)
	rc, err := refundAs("billing")
	fmt.Println("presented by billing:", rc.Result, rc.Authority.DelegationID == hop.ID, err)
	// Output:
	// presented by another agent: authority_hop
	// presented by billing: committed true <nil>
}
