package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// editDoc lets an approver lower a refund's amount, not below 100, and change nothing else.
const editDoc = `
schema: latch.policy/v1
approvers:
  roles:
    payments-leads: [alice, bob]
actions:
  billing.refund:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, min: 1, editable: { decrease: true, min: 100 } }
      destination: { type: string }
    approvers: { roles: [payments-leads] }
    decision: approve
  billing.refund2:
    effect: "refund2:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, min: 1, editable: { decrease: true } }
    approvers: { roles: [payments-leads], required: 2 }
    decision: approve
`

func editEnv(t *testing.T, backend string) *latch.Guard {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(editDoc))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, backend, "latch_edit")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// editedCall runs billing.refund (or another action) with args as the agent refund-bot for the
// user uma, presenting approval when it is not empty; ran counts the executions.
func editedCall(t *testing.T, g *latch.Guard, action, args, approval string, ran *atomic.Int64) (*latch.Receipt, error) {
	t.Helper()
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "refund-bot", User: "uma"})
	if approval != "" {
		ctx = latch.WithApproval(ctx, approval)
	}
	return g.Execute(ctx, &latch.Call{Action: action, Arguments: json.RawMessage(args)},
		func(_ context.Context, got json.RawMessage) (any, error) {
			ran.Add(1)
			return map[string]any{"refunded": string(got)}, nil
		})
}

// TestApproveWithEdits: an approver lowers a refund's amount when granting it; the request
// then binds the edited arguments, the agent presenting them runs once, the requested amount is
// refused (with the approved arguments on the error), the receipt names both amounts and the
// editor, and a widening edit — or one of an argument not editable — is refused and writes
// nothing.
func TestApproveWithEdits(t *testing.T) {
	t.Parallel()
	const asked = `{"amount":50000,"destination":"acct_1","order_id":"ord_1"}`
	const approved = `{"amount":40000,"destination":"acct_1","order_id":"ord_1"}`
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			g := editEnv(t, backend)
			var ran atomic.Int64
			_, err := editedCall(t, g, "billing.refund", asked, "", &ran)
			var req *latch.ApprovalRequiredError
			if !errors.As(err, &req) {
				t.Fatalf("Execute = %v, want approval required", err)
			}
			id := req.ApprovalID
			answer := func(who, set string) (*store.Approval, error) {
				return g.Answer(t.Context(), &store.AnswerRequest{ID: id, Grant: true, Approver: who, Method: store.MethodSession,
					Verified: true, Set: json.RawMessage(set)})
			}

			// Refused edits write nothing: the request stays pending with no answer.
			for _, c := range []struct{ set, reason, says string }{
				{`{"amount":60000}`, policy.ReasonEditWidens, "may only decrease"},
				{`{"amount":99}`, policy.ReasonEditWidens, "below 100"},
				{`{"destination":"acct_evil"}`, policy.ReasonEditNotEditable, "destination"},
				{`{"amount":"400"}`, policy.ReasonEditInvalid, "integer"},
				{`{"amount":50000}`, policy.ReasonEditInvalid, "changes nothing"},
				{`[1]`, policy.ReasonEditInvalid, "JSON object"},
			} {
				_, err := answer("alice", c.set)
				var ae *store.AnswerError
				if !errors.As(err, &ae) || ae.Reason != c.reason || !strings.Contains(err.Error(), c.says) {
					t.Errorf("edit %s = %v, want refused %s saying %q", c.set, err, c.reason, c.says)
				}
			}
			if a, err := g.Store().Approval(t.Context(), id); err != nil || a.Status != store.Pending || len(a.Answers) != 0 || a.ActionHash != req.ActionHash {
				t.Fatalf("after refused edits: %+v, %v; want pending, unanswered, bound to the request", a, err)
			}
			// Someone outside the action's roles may not edit, nor may the requester; a deny
			// carries no edit.
			_, err = answer("mallory", `{"amount":40000}`)
			wantReason(t, "edit by a person outside the roles", err, store.ReasonNotEntitled)
			_, err = g.Store().AnswerApproval(t.Context(), &store.AnswerRequest{ID: id, Grant: true, Approver: "uma", Set: json.RawMessage(`{"amount":40000}`),
				Edit: &store.Edit{From: req.ActionHash, Action: json.RawMessage(`{}`), Hash: "sha256:00"}})
			wantReason(t, "edit by the requester", err, store.ReasonSelfApproval)
			_, err = g.Answer(t.Context(), &store.AnswerRequest{ID: id, Grant: false, Approver: "bob", Set: json.RawMessage(`{"amount":40000}`)})
			wantReason(t, "deny with an edit", err, policy.ReasonEditInvalid)

			// alice lowers the amount and grants.
			a, err := answer("alice", `{"amount":40000}`)
			if err != nil {
				t.Fatalf("edit by alice: %v", err)
			}
			if a.Status != store.Granted || a.ActionHash == req.ActionHash {
				t.Fatalf("after the edit: %s bound to %s; want granted, bound to a new hash", a.Status, a.ActionHash)
			}
			ap, err := g.Approved(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if string(ap.Arguments) != approved || string(ap.Requested) != asked || ap.RequestedHash != req.ActionHash ||
				ap.ActionHash != a.ActionHash || len(ap.Edits) != 1 || ap.Edits[0].By != "alice" || ap.Edits[0].Method != store.MethodSession ||
				len(ap.Edits[0].Changes) != 1 || string(ap.Edits[0].Changes[0].From) != "50000" || string(ap.Edits[0].Changes[0].To) != "40000" {
				t.Fatalf("Approved = %+v", ap)
			}

			// The requested amount is refused, and the error carries the approved arguments.
			_, err = editedCall(t, g, "billing.refund", asked, id, &ran)
			var me *latch.ApprovalMismatchError
			if !errors.As(err, &me) || me.Reason != "mismatch" || string(me.Arguments) != approved || ran.Load() != 0 {
				t.Fatalf("presenting the requested amount = %v (ran %d), want approval_mismatch with the approved arguments", err, ran.Load())
			}
			if r := latch.RefusalOf(err); r.Reason != latch.ReasonApprovalMismatch {
				t.Errorf("RefusalOf = %s, want approval_mismatch", r.Reason)
			}
			// A wider one than the approved: refused as well.
			if _, err := editedCall(t, g, "billing.refund", `{"amount":45000,"destination":"acct_1","order_id":"ord_1"}`, id, &ran); !errors.Is(err, latch.ErrApprovalMismatch) {
				t.Errorf("presenting 45000 = %v, want approval_mismatch", err)
			}

			// The edited arguments, presented with the same approval, run once.
			rc, err := editedCall(t, g, "billing.refund", string(me.Arguments), id, &ran)
			if err != nil || ran.Load() != 1 {
				t.Fatalf("presenting the approved arguments = %v (ran %d), want it run once", err, ran.Load())
			}
			if rc.Result != receipt.Committed || string(rc.Arguments) != approved || rc.ActionHash != a.ActionHash {
				t.Errorf("receipt: %s, %s, %s; want committed with the approved arguments and hash", rc.Result, rc.Arguments, rc.ActionHash)
			}
			e := rc.ApprovalEdit
			if e == nil || string(e.RequestedArguments) != asked || e.RequestedActionHash != req.ActionHash ||
				len(e.EditedBy) != 1 || e.EditedBy[0] != "session:alice" {
				t.Fatalf("receipt approval_edit = %+v, want the requested arguments and session:alice", e)
			}
			for _, want := range []string{`"approval_edit":{"edited_by":["session:alice"]`, `"requested_arguments":{"amount":50000`,
				`"arguments":{"amount":40000`, `"schema":"latch.receipt/v4"`} {
				if !strings.Contains(string(rc.Doc), want) {
					t.Errorf("receipt document lacks %s:\n%s", want, rc.Doc)
				}
			}
			// Spent: neither the edited nor the requested arguments run again.
			for _, args := range []string{approved, asked} {
				if _, err := editedCall(t, g, "billing.refund", args, id, &ran); !errors.Is(err, latch.ErrApprovalMismatch) || ran.Load() != 1 {
					t.Errorf("presenting %s again = %v (ran %d), want refused", args, err, ran.Load())
				}
			}
			if rep := verifyChain(t, g); !rep.OK {
				t.Errorf("the chain does not verify: %+v", rep)
			}
		})
	}
}

// TestApproveWithEditsTwoOfN: with two grants required, a first approver's edit binds the
// request at once; a second approver grants what it binds (and may narrow it further); an edit
// made against what the request bound before another edit is refused edit_stale.
func TestApproveWithEditsTwoOfN(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			g := editEnv(t, backend)
			var ran atomic.Int64
			_, err := editedCall(t, g, "billing.refund2", `{"amount":900,"order_id":"o2"}`, "", &ran)
			var req *latch.ApprovalRequiredError
			if !errors.As(err, &req) {
				t.Fatalf("Execute = %v, want approval required", err)
			}
			a, err := g.Answer(t.Context(), &store.AnswerRequest{ID: req.ApprovalID, Grant: true, Approver: "alice", Set: json.RawMessage(`{"amount":800}`)})
			if err != nil || a.Status != store.Pending {
				t.Fatalf("alice's edit = %v, %v; want pending, 1 of 2", a, err)
			}
			// bob's edit as he read the request before alice's: stale.
			_, err = g.Store().AnswerApproval(t.Context(), &store.AnswerRequest{ID: req.ApprovalID, Grant: true, Approver: "bob", Required: 2,
				Edit: &store.Edit{From: req.ActionHash, Action: json.RawMessage(`{}`), Hash: "sha256:00"}})
			wantReason(t, "bob's stale edit", err, store.ReasonEditStale)
			a, err = g.Answer(t.Context(), &store.AnswerRequest{ID: req.ApprovalID, Grant: true, Approver: "bob", Set: json.RawMessage(`{"amount":700}`)})
			if err != nil || a.Status != store.Granted {
				t.Fatalf("bob's edit = %v, %v; want granted", a, err)
			}
			ap, err := g.Approved(t.Context(), req.ApprovalID)
			if err != nil || string(ap.Arguments) != `{"amount":700,"order_id":"o2"}` || string(ap.Requested) != `{"amount":900,"order_id":"o2"}` || len(ap.Edits) != 2 {
				t.Fatalf("Approved = %+v, %v", ap, err)
			}
			rc, err := editedCall(t, g, "billing.refund2", string(ap.Arguments), req.ApprovalID, &ran)
			if err != nil || ran.Load() != 1 || rc.ApprovalEdit == nil || strings.Join(rc.ApprovalEdit.EditedBy, ",") != "cli:alice,cli:bob" {
				t.Fatalf("presenting the approved arguments = %v, ran %d, receipt %+v", err, ran.Load(), rc)
			}
		})
	}
}
