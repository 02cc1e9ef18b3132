package server_test

import (
	"github.com/latchkit/latch/auth"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch/internal/consoletest"
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

// resolveRolesPolicy gives billing.refund approver roles; billing.charge has none.
const resolveRolesPolicy = `
schema: latch.policy/v1
approvers:
  roles:
    payments-leads: [carol]
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
  billing.refund:
    effect: "refund:{invoice_id}"
    decision: allow
    approvers: { roles: [payments-leads] }
`

// TestResolveRules: nobody resolves their own attempt, and an action's approver roles decide who
// resolves its effects. An agent token is refused; a person whose name is the attempt's agent,
// or the user it acted for, in any spelling, is refused self_resolution; a person outside the
// roles of the action is refused approver_not_entitled. Each refusal writes nothing, and the
// effect stays ambiguous — no retry runs — until someone else resolves it.
func TestResolveRules(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := startWith(t, backend, resolveRolesPolicy, nil)
			ts := s.g.Store().(store.TokenStore)
			mk := func(req *auth.NewToken) string {
				t.Helper()
				secret, _, err := auth.CreateToken(t.Context(), ts, req, s.clock.Now())
				if err != nil {
					t.Fatal(err)
				}
				return secret
			}
			forDan := mk(&auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker", User: "dan"})
			selfAgent := mk(&auth.NewToken{Kind: store.TokenApprover, Approver: "Billing-Worker"})
			dan := mk(&auth.NewToken{Kind: store.TokenApprover, Approver: "DAN"})
			erin := mk(&auth.NewToken{Kind: store.TokenApprover, Approver: "erin"})
			ambiguous := func(agent, action, invoice string) {
				t.Helper()
				r := s.do("POST", "/v1/actions", agent, map[string]any{"action": action, "arguments": map[string]any{"invoice_id": invoice}})
				if r.status != 200 {
					t.Fatalf("%s %s = %d %s", action, invoice, r.status, r.raw)
				}
				if o := s.do("POST", "/v1/actions/"+r.body["action_id"].(string)+"/outcome", agent, map[string]any{"outcome": "unknown"}); o.body["result"] != "ambiguous" {
					t.Fatalf("outcome = %d %s", o.status, o.raw)
				}
			}
			ambiguous(forDan, "billing.charge", "inv_1")
			ambiguous(forDan, "billing.refund", "inv_2")

			before := s.footprint()
			for _, c := range []struct {
				what, token, key string
				status           int
				reason           string
			}{
				{"the agent's token", forDan, "charge:inv_1", 403, "forbidden"},
				{"the agent's name, as a person", selfAgent, "charge:inv_1", 403, "self_resolution"},
				{"the user it acted for", dan, "charge:inv_1", 403, "self_resolution"},
				{"the user it acted for, with roles", dan, "refund:inv_2", 403, "self_resolution"},
				{"a person outside the action's roles", erin, "refund:inv_2", 403, "approver_not_entitled"},
			} {
				for _, to := range []string{"failed", "committed"} {
					p := wantProblem(t, c.what+" resolving "+c.key+" "+to, s.do("POST", "/v1/effects/"+c.key+"/resolve", c.token, map[string]any{"to": to}), c.status, c.reason)
					if c.reason != "forbidden" && p["effect_key"] != c.key {
						t.Errorf("%s: effect_key %v, want %s", c.what, p["effect_key"], c.key)
					}
				}
			}
			if after := s.footprint(); after != before {
				t.Errorf("refused resolutions wrote: %+v → %+v", before, after)
			}
			wantProblem(t, "a retry", s.do("POST", "/v1/actions", forDan, map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": "inv_1"}}), 409, "ambiguous")

			// Anyone else may resolve an action without roles; only a member resolves one with them.
			if r := s.do("POST", "/v1/effects/charge:inv_1/resolve", erin, map[string]any{"to": "failed"}); r.status != 200 || r.body["resolved_by"] != "http:erin" {
				t.Errorf("erin resolves charge:inv_1 = %d %s", r.status, r.raw)
			}
			if r := s.do("POST", "/v1/effects/refund:inv_2/resolve", s.approver, map[string]any{"to": "committed"}); r.status != 200 || r.body["resolved_by"] != "http:carol" {
				t.Errorf("carol resolves refund:inv_2 = %d %s", r.status, r.raw)
			}
		})
	}
}

// TestConsoleSelfResolution: the console resolves through the same check as every surface. A
// person logged in under the attempt's agent name is not offered the resolve form of their own
// attempt (the card says why), and the form sent anyway is refused 403 self_resolution: nothing
// is written, and the effect stays ambiguous until someone else resolves it.
func TestConsoleSelfResolution(t *testing.T) {
	t.Parallel()
	const pw = "correct horse battery staple"
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			cs := consoletest.Start(t, &consoletest.Options{Backend: backend})
			cs.AddAccount(t, "Billing-Worker", pw)
			cs.AddAccount(t, "alice", pw)
			key := cs.Ambiguous(t, 7, "connection reset")
			attention := func(name string) (*http.Client, string) {
				t.Helper()
				c := consoletest.Client(t, "")
				if p := consoletest.Login(t, c, cs.URL, name, pw); p.Status != http.StatusSeeOther {
					t.Fatalf("login as %s = %d %s", name, p.Status, p.Body)
				}
				return c, consoletest.Get(t, c, cs.URL+"/attention").Body
			}
			own, ownPage := attention("billing-worker")
			if action, _ := consoletest.ResolveForm(ownPage, key); action != "" || !strings.Contains(ownPage, "someone else must say what happened") {
				t.Errorf("the agent's own person is offered the resolve form of its attempt (or not told why not)")
			}
			alice, alicePage := attention("alice")
			action, seen := consoletest.ResolveForm(alicePage, key)
			if action == "" {
				t.Fatalf("no resolve form for %s on alice's page", key)
			}
			ev, rc := cs.Written(t)
			p := consoletest.Post(t, own, cs.URL+action, url.Values{"csrf": {consoletest.CSRF(ownPage)}, "seen": {seen}, "to": {"failed"}})
			if p.Status != http.StatusForbidden || !strings.Contains(p.Body, "self_resolution") {
				t.Errorf("the agent's own person resolving = %d %q, want 403 self_resolution", p.Status, p.Body)
			}
			if e, r := cs.Written(t); e != ev || r != rc {
				t.Errorf("a refused resolution wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
			}
			if e, err := cs.Guard.Store().Effect(t.Context(), key); err != nil || e.State != store.Ambiguous {
				t.Fatalf("%s = %+v, %v; want still ambiguous", key, e, err)
			}
			if p := consoletest.Post(t, alice, cs.URL+action, url.Values{"csrf": {consoletest.CSRF(alicePage)}, "seen": {seen}, "to": {"failed"}}); p.Status != http.StatusSeeOther {
				t.Errorf("alice resolving = %d %q, want a redirect", p.Status, p.Body)
			}
			if e, err := cs.Guard.Store().Effect(t.Context(), key); err != nil || e.State != store.Failed || e.ResolvedBy != "console:alice" {
				t.Errorf("%s = %+v, %v; want failed by console:alice", key, e, err)
			}
		})
	}
}
