package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

const nestedPolicy = `
schema: latch.policy/v1
actions:
  payout.send:
    effect: "payout:{id}"
    decision: approve
  audit.write:
    effect: "audit:{id}"
    decision: allow
  refund.issue:
    effect: "refund:{id}"
    decision: approve
`

// approved asks for an approval of call, grants it as alice, and returns its id.
func approved(t *testing.T, e *env, ctx context.Context, call *latch.Call) string {
	t.Helper()
	_, err := e.g.Execute(ctx, call, func(context.Context, json.RawMessage) (any, error) {
		t.Fatalf("%s ran before it was approved", call.Action)
		return nil, nil
	})
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) {
		t.Fatalf("Execute(%s) = %v, want ApprovalRequiredError", call.Action, err)
	}
	if _, err := e.g.Approve(t.Context(), req.ApprovalID, "alice"); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	return req.ApprovalID
}

func countEvents(t *testing.T, g *latch.Guard, f store.EventFilter, kind string) int {
	t.Helper()
	evs, err := g.Store().Events(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// TestApprovalDoesNotLeakIntoNestedCalls: the context an approved call's executor gets does not
// present the caller's approval, so nested protected calls are decided on their own.
func TestApprovalDoesNotLeakIntoNestedCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nestedPolicy)
	ctx := agent(t.Context())
	outer := &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"po_1"}`)}
	id := approved(t, e, ctx, outer)

	var auditErr, refundErr error
	var audited, refunded int
	rc, err := e.g.Execute(latch.WithApproval(ctx, id), outer, func(ctx context.Context, _ json.RawMessage) (any, error) {
		_, auditErr = e.g.Execute(ctx, &latch.Call{Action: "audit.write", Arguments: json.RawMessage(`{"id":"a_1"}`)},
			func(context.Context, json.RawMessage) (any, error) { audited++; return "logged", nil })
		_, refundErr = e.g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"id":"rf_1"}`)},
			func(context.Context, json.RawMessage) (any, error) { refunded++; return "refunded", nil })
		return "paid", nil
	})
	if err != nil {
		t.Fatalf("outer approved call: %v", err)
	}
	if rc.Result != "committed" || rc.ApprovalID != id {
		t.Errorf("outer receipt: result %s approval %s, want committed with %s", rc.Result, rc.ApprovalID, id)
	}
	// The allowed nested call runs as if called alone.
	if auditErr != nil || audited != 1 {
		t.Errorf("nested allowed call: err %v, ran %d times; want it to run once", auditErr, audited)
	}
	// The gated nested call asks for its own approval, as if called alone.
	var req *latch.ApprovalRequiredError
	if !errors.As(refundErr, &req) || req.ApprovalID == id || refunded != 0 {
		t.Errorf("nested gated call: err %v, ran %d times; want a new approval request and no run", refundErr, refunded)
	}
	a, err := e.g.Store().Approval(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != store.Consumed || a.ConsumedBy != rc.ActionID {
		t.Errorf("outer approval: %s by %s, want consumed by the outer call %s", a.Status, a.ConsumedBy, rc.ActionID)
	}
	if n := countEvents(t, e.g, store.EventFilter{ApprovalID: id}, store.EventApprovalConsumed); n != 1 {
		t.Errorf("approval_consumed events for the outer approval: %d, want 1", n)
	}
	for r, err := range e.g.Store().Receipts(t.Context(), store.ReceiptFilter{ApprovalID: id}) {
		if err != nil {
			t.Fatal(err)
		}
		doc, err := receipt.Parse(r.Doc)
		if err != nil {
			t.Fatal(err)
		}
		if receipt.IsCall(doc.Kind) && r.Seq != rc.Seq {
			t.Errorf("receipt seq %d names the outer approval; only the outer call's (seq %d) should", r.Seq, rc.Seq)
		}
	}
}

// TestApproverNames: approver names are normalized and stored normalized, a principal cannot
// approve its own request by respelling its name, and a name that is not valid UTF-8 is refused
// before anything runs — never accepted, to break the receipt of an executed effect later.
func TestApproverNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nestedPolicy)
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "carol"})
	call := &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"po_1"}`)}
	_, err := e.g.Execute(ctx, call, nil)
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) {
		t.Fatalf("err = %v, want approval required", err)
	}
	for _, name := range []string{"Carol", "carol ", "CAROL", "ｃａｒｏｌ", "car\u200bol", "\u202ealice", "al\xffice", "alice\nbob"} {
		_, err := e.g.Approve(t.Context(), req.ApprovalID, name)
		var ae *store.AnswerError
		if !errors.As(err, &ae) || (ae.Reason != "self_approval" && ae.Reason != "invalid_approver") {
			t.Errorf("Approve as %q = %v, want refused (self_approval or invalid_approver)", name, err)
		}
	}
	if a, _ := e.g.Store().Approval(t.Context(), req.ApprovalID); a.Status != store.Pending {
		t.Fatalf("approval after refused answers: %s, want pending", a.Status)
	}
	a, err := e.g.Approve(t.Context(), req.ApprovalID, "  Alice ")
	if err != nil || a.Approver != "Alice" {
		t.Fatalf("Approve as %q = %+v, %v; want granted, stored as \"Alice\"", "  Alice ", a, err)
	}
	ran := 0
	rc, err := e.g.Execute(latch.WithApproval(ctx, req.ApprovalID), call, func(context.Context, json.RawMessage) (any, error) { ran++; return "paid", nil })
	if err != nil || ran != 1 || rc.Approver != "Alice" {
		t.Fatalf("approved call: ran %d, receipt %+v, err %v; want one run and approver Alice", ran, rc, err)
	}
	verifyChain(t, e.g)
}

// TestInvalidUTF8ApproverRefused: on the old code an approver name that is not valid UTF-8 was
// stored; the approved call then executed and its receipt could not be hashed, so the effect ran
// with no outcome and no receipt. The name is refused when the answer is given.
func TestInvalidUTF8ApproverRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nestedPolicy)
	ctx := agent(t.Context())
	call := &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"po_utf8"}`)}
	_, err := e.g.Execute(ctx, call, nil)
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) {
		t.Fatalf("err = %v, want approval required", err)
	}
	_, err = e.g.Approve(t.Context(), req.ApprovalID, "al\xffice")
	var ae *store.AnswerError
	if !errors.As(err, &ae) || ae.Reason != "invalid_approver" {
		t.Errorf("Approve as invalid UTF-8 = %v, want invalid_approver", err)
	}
	ran := 0
	rc, err := e.g.Execute(latch.WithApproval(ctx, req.ApprovalID), call, func(context.Context, json.RawMessage) (any, error) { ran++; return "paid", nil })
	if ran != 0 {
		// Whatever happened, an executed effect must have its receipt.
		t.Errorf("executor ran on an approval answered by an invalid name (receipt %v, err %v)", rc, err)
	}
	if rc == nil {
		t.Errorf("the refused call left no receipt (err %v)", err)
	}
}

// waitPending returns the id of the one pending request, once it appears.
func waitPending(t *testing.T, g *latch.Guard) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		as, err := g.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Pending})
		if err != nil {
			t.Fatal(err)
		}
		if len(as) == 1 {
			return as[0].ID
		}
	}
	t.Fatal("no pending approval appeared")
	return ""
}

// TestWaitEndsInReceiptOrTypedError: a waited-on request that is denied or expires goes on to the
// reservation, which refuses it with a blocked receipt (writing expired); a context that ends
// first returns an error that is both ErrApprovalRequired, carrying the request, and the
// context's error.
func TestWaitEndsInReceiptOrTypedError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		answer func(e *env, id string)
		reason string
		status store.ApprovalStatus
	}{
		{"denied", func(e *env, id string) {
			if _, err := e.g.Deny(t.Context(), id, "alice"); err != nil {
				t.Error(err)
			}
		}, "denied", store.Denied},
		{"expired", func(e *env, id string) { e.clock.Add(latch.DefaultApprovalTTL) }, "expired", store.Expired},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nestedPolicy)
			type result struct {
				rc  *latch.Receipt
				err error
			}
			done := make(chan result, 1)
			ran := 0
			go func() {
				rc, err := e.g.Execute(agent(t.Context()), &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"po_w"}`),
					Options: &latch.Options{Wait: true}}, func(context.Context, json.RawMessage) (any, error) { ran++; return nil, nil })
				done <- result{rc, err}
			}()
			id := waitPending(t, e.g)
			c.answer(e, id)
			r := <-done
			var mm *latch.ApprovalMismatchError
			if !errors.As(r.err, &mm) || mm.Reason != c.reason || ran != 0 {
				t.Fatalf("waited call: %v (ran %d), want refused %s", r.err, ran, c.reason)
			}
			if r.rc == nil || r.rc.Result != "blocked" || r.rc.ApprovalID != id {
				t.Errorf("waited call's receipt = %+v, want blocked, naming %s", r.rc, id)
			}
			if a, _ := e.g.Store().Approval(t.Context(), id); a.Status != c.status {
				t.Errorf("request = %s, want %s", a.Status, c.status)
			}
		})
	}
	t.Run("context", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, nestedPolicy)
		ctx, cancel := context.WithCancel(agent(t.Context()))
		done := make(chan error, 1)
		go func() {
			_, err := e.g.Execute(ctx, &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"po_c"}`),
				Options: &latch.Options{Wait: true}}, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
			done <- err
		}()
		id := waitPending(t, e.g)
		cancel()
		err := <-done
		var req *latch.ApprovalRequiredError
		if !errors.Is(err, latch.ErrApprovalRequired) || !errors.Is(err, context.Canceled) || !errors.As(err, &req) {
			t.Fatalf("cancelled wait: %v, want ErrApprovalRequired and context.Canceled", err)
		}
		if req.ApprovalID != id || req.ActionHash == "" {
			t.Errorf("ApprovalRequiredError = %+v, want request %s with its hash", req, id)
		}
		// The program resumes with the request once it is granted.
		if _, err := e.g.Approve(t.Context(), id, "alice"); err != nil {
			t.Fatal(err)
		}
		rc, err := e.g.Execute(latch.WithApproval(agent(t.Context()), id), &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"po_c"}`)},
			func(context.Context, json.RawMessage) (any, error) { return "paid", nil })
		if err != nil || rc.Result != "committed" {
			t.Errorf("resumed call: %+v, %v; want committed", rc, err)
		}
	})
}
