package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// TestSuspendResumeOverHTTP: a remote executor begins a charge, suspends it (the effect stays
// executing, a duplicate is refused in_progress), resumes it once with its exact token and the
// arguments in another key order, and reports the outcome: one receipt. A second suspension
// while one is open, a wrong token, a spent token, other arguments and another agent are refused
// with their words; a resume after the lease lapsed is 409 ambiguous and the effect is then
// ambiguous. Both stores.
func TestSuspendResumeOverHTTP(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			begun := s.do("POST", "/v1/actions", s.alice, charge("inv_s1", 300))
			id, _ := begun.body["action_id"].(string)
			if begun.status != 200 || id == "" {
				t.Fatalf("begin = %d %s", begun.status, begun.raw)
			}
			r := s.do("POST", "/v1/actions/"+id+"/suspend", s.alice, map[string]any{"request": map[string]any{"message": "confirm 3 EUR?"}})
			token, _ := r.body["token"].(string)
			if r.status != 200 || !strings.HasPrefix(token, "lrt_") || r.body["round"] != float64(1) || r.body["effect_key"] != "charge:inv_s1" ||
				r.body["request"].(map[string]any)["message"] != "confirm 3 EUR?" {
				t.Fatalf("suspend = %d %s", r.status, r.raw)
			}
			wantProblem(t, "suspend again", s.do("POST", "/v1/actions/"+id+"/suspend", s.alice, nil), 409, "suspension_open")
			wantProblem(t, "a duplicate while suspended", s.do("POST", "/v1/actions", s.alice, charge("inv_s1", 300)), 409, "in_progress")
			args := map[string]any{"amount": 300, "invoice_id": "inv_s1"}
			// The wrong token differs in its last character (which is "A" for one token in 16:
			// then it is made "B").
			wrong := token[:len(token)-1] + "A"
			if wrong == token {
				wrong = token[:len(token)-1] + "B"
			}
			wantProblem(t, "resume with a wrong token", s.do("POST", "/v1/actions/"+id+"/resume", s.alice,
				map[string]any{"token": wrong, "arguments": args}), 409, "suspension_token")
			wantProblem(t, "resume with other arguments", s.do("POST", "/v1/actions/"+id+"/resume", s.alice,
				map[string]any{"token": token, "arguments": map[string]any{"amount": 3000, "invoice_id": "inv_s1"}}), 409, "suspension_arguments")
			wantProblem(t, "resume by another agent", s.do("POST", "/v1/actions/"+id+"/resume", s.bob,
				map[string]any{"token": token, "arguments": args}), 403, "not_holder")
			r = s.do("POST", "/v1/actions/"+id+"/resume", s.alice, map[string]any{"token": token, "arguments": args, "input": map[string]any{"confirm": true}})
			if r.status != 200 || r.body["round"] != float64(1) || r.body["request"].(map[string]any)["message"] != "confirm 3 EUR?" {
				t.Fatalf("resume = %d %s", r.status, r.raw)
			}
			wantProblem(t, "resume again", s.do("POST", "/v1/actions/"+id+"/resume", s.alice,
				map[string]any{"token": token, "arguments": args}), 409, "suspension_resumed")
			r = s.do("POST", "/v1/actions/"+id+"/outcome", s.alice, map[string]any{"outcome": "committed", "result": map[string]any{"charge": "ch_1"}})
			if r.status != 200 || r.body["result"] != "committed" {
				t.Fatalf("outcome = %d %s", r.status, r.raw)
			}
			n := 0
			for _, err := range s.g.Store().Receipts(t.Context(), store.ReceiptFilter{ActionID: id}) {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			if n != 1 {
				t.Errorf("%d receipts of the suspended action, want 1", n)
			}

			// A suspension whose lease lapses.
			late := s.do("POST", "/v1/actions", s.alice, charge("inv_s2", 10)).body["action_id"].(string)
			r = s.do("POST", "/v1/actions/"+late+"/suspend", s.alice, nil)
			token, _ = r.body["token"].(string)
			if r.status != 200 {
				t.Fatalf("suspend = %d %s", r.status, r.raw)
			}
			s.clock.Add(10 * time.Minute)
			p := wantProblem(t, "resume after the lease", s.do("POST", "/v1/actions/"+late+"/resume", s.alice,
				map[string]any{"token": token, "arguments": map[string]any{"invoice_id": "inv_s2", "amount": 10}}), 409, "ambiguous")
			if p["state"] != "ambiguous" || p["kind"] != "ambiguous" {
				t.Errorf("problem = %v, want state and kind ambiguous", p)
			}
			if eff, err := s.g.Store().Effect(t.Context(), "charge:inv_s2"); err != nil || eff.State != store.Ambiguous {
				t.Errorf("effect = %+v, %v; want ambiguous", eff, err)
			}
		})
	}
}
