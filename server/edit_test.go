package server_test

import (
	"encoding/json"
	"testing"
)

// editPolicy lets an approver lower a refund's amount (not below 100) and nothing else.
const editPolicy = `schema: latch.policy/v1
actions:
  billing.refund:
    effect: "refund:{order_id}"
    decision: approve
    arguments:
      order_id: { type: string }
      amount: { type: integer, min: 1, editable: { decrease: true, min: 100 } }
      destination: { type: string }
`

// TestApproveWithEditsHTTP: an approver token lowers the amount with {"set": …}; a widening
// edit is 422 edit_widens and writes nothing; the agent reads the approved arguments from its
// request, beginning with the requested ones is 403 approval_mismatch carrying them, and
// beginning with them reserves once (both stores).
func TestApproveWithEditsHTTP(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := startWith(t, backend, editPolicy, nil)
			asked := map[string]any{"order_id": "o1", "amount": 50000, "destination": "acct_1"}
			r := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.refund", "arguments": asked})
			if r.status != 202 {
				t.Fatalf("begin = %d %s", r.status, r.raw)
			}
			apr := r.body["approval_id"].(string)

			wantProblem(t, "widening edit", s.do("POST", "/v1/approvals/"+apr+"/approve", s.approver,
				map[string]any{"set": map[string]any{"amount": 60000}}), 422, "edit_widens")
			wantProblem(t, "edit of an argument not editable", s.do("POST", "/v1/approvals/"+apr+"/approve", s.approver,
				map[string]any{"set": map[string]any{"destination": "acct_evil"}}), 422, "edit_not_editable")
			if g := s.do("GET", "/v1/approvals/"+apr, s.approver, nil); g.body["status"] != "pending" || g.body["edit"] != nil ||
				len(g.body["answers"].([]any)) != 0 {
				t.Fatalf("after refused edits = %s, want pending, unanswered, unedited", g.raw)
			}

			a := s.do("POST", "/v1/approvals/"+apr+"/approve", s.approver, map[string]any{"set": map[string]any{"amount": 40000}, "note": "partial"})
			if a.status != 200 || a.body["status"] != "granted" {
				t.Fatalf("approve with an edit = %d %s", a.status, a.raw)
			}
			g := s.do("GET", "/v1/approvals/"+apr, s.alice, nil)
			var view struct {
				ActionHash string          `json:"action_hash"`
				Arguments  json.RawMessage `json:"arguments"`
				Edit       *struct {
					RequestedActionHash string          `json:"requested_action_hash"`
					RequestedArguments  json.RawMessage `json:"requested_arguments"`
					Edits               []struct {
						Approver  string `json:"approver"`
						Method    string `json:"method"`
						Arguments map[string]struct {
							From json.RawMessage `json:"from"`
							To   json.RawMessage `json:"to"`
						} `json:"arguments"`
					} `json:"edits"`
				} `json:"edit"`
			}
			if err := json.Unmarshal(g.raw, &view); err != nil {
				t.Fatal(err)
			}
			e := view.Edit
			if g.status != 200 || string(view.Arguments) != `{"amount":40000,"destination":"acct_1","order_id":"o1"}` || e == nil ||
				e.RequestedActionHash != r.body["action_hash"] || string(e.RequestedArguments) != `{"amount":50000,"destination":"acct_1","order_id":"o1"}` ||
				len(e.Edits) != 1 || e.Edits[0].Approver != "carol" || e.Edits[0].Method != "token" ||
				string(e.Edits[0].Arguments["amount"].From) != "50000" || string(e.Edits[0].Arguments["amount"].To) != "40000" {
				t.Fatalf("the agent reads its request = %d %s", g.status, g.raw)
			}

			m := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.refund", "arguments": asked, "approval_id": apr})
			wantProblem(t, "the requested amount", m, 403, "approval_mismatch")
			if got, _ := json.Marshal(m.body["approved_arguments"]); string(got) != string(view.Arguments) {
				t.Errorf("approval_mismatch approved_arguments = %s, want %s", got, view.Arguments)
			}
			ok := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.refund", "arguments": view.Arguments, "approval_id": apr})
			if ok.status != 200 || ok.body["status"] != "reserved" || ok.body["action_hash"] != view.ActionHash {
				t.Fatalf("begin with the approved arguments = %d %s", ok.status, ok.raw)
			}
			wantProblem(t, "again", s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.refund",
				"arguments": view.Arguments, "approval_id": apr}), 403, "approval_consumed")
			o := s.do("POST", "/v1/actions/"+ok.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "committed"})
			if o.status != 200 || o.body["result"] != "committed" {
				t.Fatalf("outcome = %d %s", o.status, o.raw)
			}
		})
	}
}
