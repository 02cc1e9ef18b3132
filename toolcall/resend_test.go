package toolcall_test

import (
	"encoding/json"
	"testing"

	"github.com/latchkit/latch/internal/toolcalltest"
	"github.com/latchkit/latch/toolcall"
)

// TestModelResendsAfterApproval: the model is told approval_required, a person approves, and
// the model calls the tool again with the same arguments under a new call id, presenting
// nothing: the guard finds the granted approval, the refund runs once, and a further re-send is
// a duplicate.
func TestModelResendsAfterApproval(t *testing.T) {
	t.Parallel()
	e := toolcalltest.New(t)
	args := json.RawMessage(`{"order_id":"m-1","amount":5000}`)
	first := e.Reg.Dispatch(t.Context(), toolcall.Call{ID: "call_1", Name: "refund", Arguments: args})
	if first.Status != toolcall.StatusPending {
		t.Fatalf("first call: %s %q", first.Status, first.Content)
	}
	if _, err := e.G.Approve(t.Context(), first.Refusal.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	again := e.Reg.Dispatch(t.Context(), toolcall.Call{ID: "call_2", Name: "refund", Arguments: args})
	if again.Status != toolcall.StatusOK || again.CallID != "call_2" {
		t.Errorf("re-sent after approval: %s %q, want ok", again.Status, again.Content)
	}
	third := e.Reg.Dispatch(t.Context(), toolcall.Call{ID: "call_3", Name: "refund", Arguments: args})
	if third.Status != toolcall.StatusDuplicate {
		t.Errorf("re-sent once more: %s %q, want duplicate", third.Status, third.Content)
	}
	if n := e.Runs("refund:m-1"); n != 1 {
		t.Errorf("the refund ran %d times, want 1", n)
	}
}
