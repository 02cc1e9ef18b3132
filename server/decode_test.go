package server_test

import (
	"net/http"
	"testing"
)

// TestDecodeRefusesDuplicateAndCaseVariantMembers: encoding/json matches member names to fields
// case-insensitively and lets the last of two members of one name win, so a body could say one
// thing to this server and another to a log, a proxy or a person. Every route that reads a body
// refuses a member name given twice (at any depth, arguments and results included) and a member
// named otherwise than exactly a field, names its JSON pointer, and writes nothing.
func TestDecodeRefusesDuplicateAndCaseVariantMembers(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			// A reserved action (outcome, lease), a pending approval (approve, deny) and an
			// ambiguous effect (resolve): were a body accepted, the route would act on it.
			r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			if r.status != 200 {
				t.Fatalf("POST /v1/actions = %d %s", r.status, r.raw)
			}
			reserved := r.body["action_id"].(string)
			r = s.do("POST", "/v1/actions", s.alice, charge("inv_2", 90000))
			if r.status != 202 {
				t.Fatalf("POST /v1/actions (approval) = %d %s", r.status, r.raw)
			}
			pending := r.body["approval_id"].(string)
			r = s.do("POST", "/v1/actions", s.alice, charge("inv_3", 100))
			if o := s.do("POST", "/v1/actions/"+r.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "unknown"}); o.status != 200 {
				t.Fatalf("POST outcome unknown = %d %s", o.status, o.raw)
			}

			outcome := "/v1/actions/" + reserved + "/outcome"
			cases := []struct {
				name, path, token, body string
				reason, field, pointer  string
			}{
				{"propose: upper-case action overrides", "/v1/actions", s.alice,
					`{"action":"payout.send","ACTION":"billing.charge","arguments":{"invoice_id":"inv_9","amount":100}}`,
					"unknown_field", "ACTION", "/ACTION"},
				{"propose: capitalised action alone", "/v1/actions", s.alice,
					`{"Action":"billing.charge","arguments":{"invoice_id":"inv_9","amount":100}}`,
					"unknown_field", "Action", "/Action"},
				{"propose: action twice", "/v1/actions", s.alice,
					`{"action":"payout.send","action":"billing.charge","arguments":{"invoice_id":"inv_9","amount":100}}`,
					"duplicate_member", "action", "/action"},
				{"propose: arguments twice", "/v1/actions", s.alice,
					`{"action":"billing.charge","arguments":{"invoice_id":"inv_9","amount":90000},"arguments":{"invoice_id":"inv_9","amount":100}}`,
					"duplicate_member", "arguments", "/arguments"},
				{"propose: an argument twice", "/v1/actions", s.alice,
					`{"action":"billing.charge","arguments":{"invoice_id":"inv_9","amount":90000,"amount":100}}`,
					"duplicate_member", "", "/arguments/amount"},
				{"propose: twice, deep in the arguments", "/v1/actions", s.alice,
					`{"action":"billing.charge","arguments":{"invoice_id":"inv_9","amount":100,"meta":{"lines":[{"sku":"a"},{"sku":"a","sku":"b"}]}}}`,
					"duplicate_member", "", "/arguments/meta/lines/1/sku"},
				{"propose: a member name that needs escaping", "/v1/actions", s.alice,
					`{"action":"billing.charge","arguments":{"invoice_id":"inv_9","amount":100,"a/b~c":1,"a/b~c":2}}`,
					"duplicate_member", "", "/arguments/a~1b~0c"},
				{"propose: wait_seconds in another case", "/v1/actions", s.alice,
					`{"action":"billing.charge","arguments":{"invoice_id":"inv_9","amount":100},"Wait_Seconds":5}`,
					"unknown_field", "Wait_Seconds", "/Wait_Seconds"},
				{"outcome: upper-case outcome overrides", outcome, s.alice,
					`{"outcome":"failed","OUTCOME":"committed"}`, "unknown_field", "OUTCOME", "/OUTCOME"},
				{"outcome: twice", outcome, s.alice,
					`{"outcome":"failed","outcome":"committed"}`, "duplicate_member", "outcome", "/outcome"},
				{"outcome: a result member twice", outcome, s.alice,
					`{"outcome":"committed","result":{"charge":"ch_1","charge":"ch_2"}}`, "duplicate_member", "", "/result/charge"},
				{"lease: seconds twice", "/v1/actions/" + reserved + "/lease", s.alice,
					`{"seconds":60,"seconds":600}`, "duplicate_member", "seconds", "/seconds"},
				{"approve: note twice", "/v1/approvals/" + pending + "/approve", s.approver,
					`{"note":"checked","note":"not checked"}`, "duplicate_member", "note", "/note"},
				{"approve: capitalised note", "/v1/approvals/" + pending + "/approve", s.approver,
					`{"Note":"checked"}`, "unknown_field", "Note", "/Note"},
				{"deny: note twice", "/v1/approvals/" + pending + "/deny", s.approver,
					`{"note":"a","note":"b"}`, "duplicate_member", "note", "/note"},
				{"resolve: upper-case target overrides", "/v1/effects/charge:inv_3/resolve", s.approver,
					`{"to":"failed","TO":"committed"}`, "unknown_field", "TO", "/TO"},
				{"resolve: target twice", "/v1/effects/charge:inv_3/resolve", s.approver,
					`{"to":"failed","to":"committed"}`, "duplicate_member", "to", "/to"},
				{"resolve: a result member twice", "/v1/effects/charge:inv_3/resolve", s.approver,
					`{"to":"committed","result":{"charge":"ch_1","charge":"ch_2"}}`, "duplicate_member", "", "/result/charge"},
			}
			for _, tc := range cases {
				before := s.footprint()
				r := s.do("POST", tc.path, tc.token, tc.body)
				p := wantProblem(t, tc.name, r, http.StatusBadRequest, tc.reason)
				if p["pointer"] != tc.pointer {
					t.Errorf("%s: pointer = %v, want %q (%s)", tc.name, p["pointer"], tc.pointer, r.raw)
				}
				if field, _ := p["field"].(string); field != tc.field {
					t.Errorf("%s: field = %q, want %q (%s)", tc.name, field, tc.field, r.raw)
				}
				if after := s.footprint(); after != before {
					t.Errorf("%s: the store changed from %+v to %+v", tc.name, before, after)
				}
			}

			// The same bodies written properly still work.
			if o := s.do("POST", outcome, s.alice, `{"outcome":"committed","result":{"charge":"ch_1"}}`); o.status != 200 {
				t.Errorf("a well-formed outcome = %d %s", o.status, o.raw)
			}
			if a := s.do("POST", "/v1/approvals/"+pending+"/approve", s.approver, `{"note":"checked"}`); a.status != 200 {
				t.Errorf("a well-formed approval = %d %s", a.status, a.raw)
			}
		})
	}
}
