package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/client"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// A call over the client presenting an approval an approver edited gets the local guard's
// error: approval_mismatch with the approved arguments on it, read from the problem's
// approved_arguments; presenting them runs the call once.
func TestApprovedArgumentsOverHTTP(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse("latch.yaml", []byte(`
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: approve
    arguments:
      invoice_id: { type: string }
      amount: { type: integer, editable: { decrease: true } }
`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: storeURL(t, "sqlite")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	s, err := server.New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	tok, _, err := auth.CreateToken(t.Context(), g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := client.New("http://"+ln.Addr().String(), tok)
	runs := 0
	charge := client.Protect(c, "billing.charge", func(_ context.Context, ch Charge) (string, error) { runs++; return "ch_" + ch.InvoiceID, nil }, nil)

	_, err = charge(t.Context(), Charge{InvoiceID: "inv_e", Amount: 90000})
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) {
		t.Fatalf("charge = %v, want approval required", err)
	}
	if _, err := g.Answer(t.Context(), &store.AnswerRequest{ID: req.ApprovalID, Grant: true, Approver: "alice", Set: json.RawMessage(`{"amount":80000}`)}); err != nil {
		t.Fatal(err)
	}
	actx := latch.WithApproval(t.Context(), req.ApprovalID)
	_, err = charge(actx, Charge{InvoiceID: "inv_e", Amount: 90000})
	var me *latch.ApprovalMismatchError
	if !errors.As(err, &me) || string(me.Arguments) != `{"amount":80000,"invoice_id":"inv_e"}` || runs != 0 {
		t.Fatalf("charge with the requested amount = %v (%+v, runs %d), want approval_mismatch with the approved arguments", err, me, runs)
	}
	var approved Charge
	if err := json.Unmarshal(me.Arguments, &approved); err != nil {
		t.Fatal(err)
	}
	if id, err := charge(actx, approved); err != nil || id != "ch_inv_e" || runs != 1 {
		t.Fatalf("charge with the approved arguments = %q, %v (runs %d)", id, err, runs)
	}
}
