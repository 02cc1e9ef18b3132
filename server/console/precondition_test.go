package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
)

// TestApprovalPageShowsStateCapture: a request stored on the state of its target shows the
// approver when that state was read and its fingerprint; a request without one shows neither.
func TestApprovalPageShowsStateCapture(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	read := func(context.Context, latch.PreconditionRequest) (any, error) {
		return map[string]any{"order": "ord_7", "status": "shipped"}, nil
	}
	_, err := s.Guard.Begin(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"}),
		&latch.Call{Action: "billing.refund", Arguments: json.RawMessage(`{"order_id":"ord_7","amount":250000,"currency":"EUR"}`),
			Options: &latch.Options{Precondition: read}})
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("Begin = %v; want an approval required", err)
	}
	a := approval(t, s, ar.ApprovalID)
	if a.PreconditionHash == "" || a.PreconditionAt.IsZero() {
		t.Fatalf("request = %+v; want a fingerprint and its capture time", a)
	}
	plain := pending(t, s, "ord_8")
	c, _ := login(t, s, "alice")
	page := consoletest.Get(t, c, s.URL+"/approvals/"+ar.ApprovalID)
	for _, want := range []string{"Target state", "captured at", a.PreconditionAt.UTC().Format("2006-01-02T15:04:05"), a.PreconditionHash,
		"the approval is spent only while the state is unchanged"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("GET /approvals/%s lacks %q", ar.ApprovalID, want)
		}
	}
	if strings.Contains(page.Body, "shipped") {
		t.Errorf("the page shows the state itself; want its fingerprint only")
	}
	if page := consoletest.Get(t, c, s.URL+"/approvals/"+plain.ApprovalID); strings.Contains(page.Body, "Target state") {
		t.Errorf("a request without a precondition shows a target state")
	}
}
