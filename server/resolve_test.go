package server_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch/store"
)

// TestResolveResultAndNote: POST /v1/effects/{key}/resolve takes a result and a note, as
// `latch resolve` does: the result reaches later duplicates, the note the record and its event.
// A result with failed, a result that is not canonical-able and a bad note are refused naming
// the field, with nothing written.
func TestResolveResultAndNote(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			for _, inv := range []string{"inv_1", "inv_2"} {
				r := s.do("POST", "/v1/actions", s.alice, charge(inv, 100))
				s.do("POST", "/v1/actions/"+r.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "unknown"})
			}
			before := s.footprint()
			for _, c := range []struct {
				body  any
				field string
			}{
				{map[string]any{"to": "failed", "result": map[string]any{"charge": "ch_1"}}, "result"},
				{`{"to":"committed","result":{"amount":1.5}}`, "result"},
				{map[string]any{"to": "committed", "note": "line\x00break"}, "note"},
				{map[string]any{"to": "committed", "note": strings.Repeat("x", 2001)}, "note"},
			} {
				p := wantProblem(t, "resolve", s.do("POST", "/v1/effects/charge:inv_1/resolve", s.approver, c.body), 400, "invalid_field")
				if p["field"] != c.field {
					t.Errorf("resolve %v: field %v, want %s", c.body, p["field"], c.field)
				}
			}
			if after := s.footprint(); after != before {
				t.Errorf("refused resolutions wrote: %+v → %+v", before, after)
			}

			r := s.do("POST", "/v1/effects/charge:inv_1/resolve", s.approver,
				map[string]any{"to": "committed", "result": map[string]any{"charge": "ch_1"}, "note": "seen in the dashboard"})
			if r.status != 200 || r.body["state"] != "committed" || r.body["note"] != "seen in the dashboard" || r.body["resolved_by"] != "http:carol" {
				t.Fatalf("resolve = %d %s", r.status, r.raw)
			}
			if d := cmp.Diff(map[string]any{"charge": "ch_1"}, r.body["result"]); d != "" {
				t.Errorf("resolved result (-want +got):\n%s", d)
			}
			dup := wantProblem(t, "duplicate after resolve", s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100)), 409, "committed")
			if d := cmp.Diff(map[string]any{"charge": "ch_1"}, dup["result"]); d != "" {
				t.Errorf("a later duplicate's result (-want +got):\n%s", d)
			}
			evs, err := s.g.Store().Events(t.Context(), store.EventFilter{EffectKey: "charge:inv_1"})
			if err != nil {
				t.Fatal(err)
			}
			last := evs[len(evs)-1]
			for _, e := range evs {
				if e.Kind == store.EventEffectResolved {
					last = e
				}
			}
			if last.Kind != store.EventEffectResolved || !strings.Contains(string(last.Payload), `"note":"seen in the dashboard"`) {
				t.Errorf("resolution event = %s %s", last.Kind, last.Payload)
			}
			// Without result or note, as before.
			if r := s.do("POST", "/v1/effects/charge:inv_2/resolve", s.approver, map[string]any{"to": "failed"}); r.status != 200 || r.body["note"] != nil {
				t.Errorf("plain resolve = %d %s", r.status, r.raw)
			}
		})
	}
}
