package server_test

import (
	"github.com/latchkit/latch/auth"
	"testing"

	"github.com/latchkit/latch/store"
)

const approversPolicy = `
schema: latch.policy/v1
approvers:
  roles:
    payments-leads: [carol, dave, billing-worker]
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: approve
    approvers: { roles: [payments-leads], required: 2, verified: true }
`

// TestApproversOverHTTP: approver tokens answer as verified people of the policy's roles; a
// request needing two grants shows 1 of 2 after the first, refuses a second answer by the same
// person under another token, an approver outside the roles and the requester, and runs once
// granted. A refused answer writes nothing.
func TestApproversOverHTTP(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := startWith(t, backend, approversPolicy, nil)
			mk := func(name string) string {
				secret, _, err := auth.CreateToken(t.Context(), s.g.Store().(store.TokenStore),
					&auth.NewToken{Kind: store.TokenApprover, Approver: name}, s.clock.Now())
				if err != nil {
					t.Fatal(err)
				}
				return secret
			}
			dave, carol2, erin, self := mk("dave"), mk("CAROL"), mk("erin"), mk("Billing-Worker")
			r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			if r.status != 202 {
				t.Fatalf("charge = %d %s", r.status, r.raw)
			}
			apr := r.body["approval_id"].(string)
			path := "/v1/approvals/" + apr

			wantProblem(t, "an approver outside the roles", s.do("POST", path+"/approve", erin, nil), 403, "approver_not_entitled")
			wantProblem(t, "the requester, in another spelling", s.do("POST", path+"/approve", self, nil), 403, "self_approval")
			if g := s.do("GET", path, s.approver, nil); g.body["grants"] != float64(0) || g.body["required"] != float64(2) || len(g.body["answers"].([]any)) != 0 {
				t.Errorf("after refused answers = %s, want 0 of 2 and no answers", g.raw)
			}

			a := s.do("POST", path+"/approve", s.approver, map[string]any{"note": "ticket 42"})
			if a.status != 200 || a.body["status"] != "pending" || a.body["grants"] != float64(1) || a.body["required"] != float64(2) {
				t.Fatalf("first grant = %d %s, want pending 1 of 2", a.status, a.raw)
			}
			ans := a.body["answers"].([]any)[0].(map[string]any)
			if ans["approver"] != "carol" || ans["method"] != "token" || ans["verified"] != true || ans["grant"] != true || ans["note"] != "ticket 42" {
				t.Errorf("carol's answer = %v, want carol, token, verified, grant, the note", ans)
			}
			wantProblem(t, "present 1 of 2", s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge",
				"arguments": map[string]any{"invoice_id": "inv_1", "amount": 100}, "approval_id": apr}), 403, "approval_pending")
			wantProblem(t, "carol again with another token", s.do("POST", path+"/deny", carol2, nil), 409, "already_answered")

			b := s.do("POST", path+"/approve", dave, nil)
			if b.status != 200 || b.body["status"] != "granted" || b.body["grants"] != float64(2) || len(b.body["answers"].([]any)) != 2 {
				t.Fatalf("second grant = %d %s, want granted 2 of 2", b.status, b.raw)
			}
			ok := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge",
				"arguments": map[string]any{"invoice_id": "inv_1", "amount": 100}, "approval_id": apr})
			if ok.status != 200 || ok.body["status"] != "reserved" {
				t.Fatalf("with 2 of 2 = %d %s", ok.status, ok.raw)
			}
		})
	}
}
