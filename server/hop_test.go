package server_test

import (
	"errors"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/client"
	"github.com/latchkit/latch/store"
)

// hopPolicy: other-worker (the sender) may charge up to 100 and hand it on; billing-worker (the
// receiver) holds a wider grant of its own.
const hopPolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
authority:
  grants:
    - id: sender
      subject: { agent: other-worker }
      actions: [billing.charge]
      constraints: { amount_lte: 100 }
      delegable: true
      expires_at: 2099-01-01T00:00:00Z
    - id: own
      subject: { agent: billing-worker }
      actions: [billing.charge]
`

// TestBeginHop: POST /v1/actions takes the hop the call acts under, and the client sends
// latch.WithHop's: the call is decided by the hop alone (a charge its own grant would allow is
// refused 403 authority_constraint), a hop addressed to another agent is 403 authority_hop, and
// the receipt names the hop. Both stores.
func TestBeginHop(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := startWith(t, backend, hopPolicy, nil)
			hop, err := s.g.Hop(t.Context(), "sender", []byte("actions: [billing.charge]\nconstraints: {amount_lte: 50}\nexpires_at: 2098-01-01T00:00:00Z\n"),
				latch.Principal{Agent: "billing-worker"}, latch.Principal{Agent: "other-worker"})
			if err != nil {
				t.Fatalf("Hop: %v", err)
			}
			charge := func(id string, amount int, hop string) map[string]any {
				return map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": id, "amount": amount}, "hop": hop}
			}
			r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 40, hop.ID))
			if r.status != 200 || r.body["status"] != "reserved" {
				t.Fatalf("begin within the hop = %d %s, want 200 reserved", r.status, r.raw)
			}
			out := s.do("POST", "/v1/actions/"+r.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "committed"})
			rc, _ := out.body["receipt"].(map[string]any)
			if au, _ := rc["authority"].(map[string]any); out.status != 200 || au["delegation_id"] != hop.ID || au["grant_id"] != "sender" {
				t.Errorf("outcome = %d %s, want a receipt naming delegation %s beneath sender", out.status, out.raw, hop.ID)
			}
			if p := wantProblem(t, "beyond the hop", s.do("POST", "/v1/actions", s.alice, charge("inv_2", 80, hop.ID)), 403, "authority_constraint"); p["kind"] != "authority" {
				t.Errorf("beyond the hop = %v, want kind authority", p)
			}
			if p := wantProblem(t, "misaddressed hop", s.do("POST", "/v1/actions", s.bob, charge("inv_3", 10, hop.ID)), 403, "authority_hop"); p["kind"] != "authority" || p["dimension"] != "hop" {
				t.Errorf("misaddressed hop = %v, want kind authority on hop", p)
			}

			c := client.New(s.url, s.alice)
			var ae *latch.AuthorityError
			if _, err := c.Begin(latch.WithHop(t.Context(), hop.ID), "billing.charge", []byte(`{"invoice_id":"inv_4","amount":80}`), "", 0); !errors.As(err, &ae) || ae.Reason != "authority_constraint" {
				t.Errorf("client Begin beyond the hop err = %v, want authority_constraint", err)
			}
			if _, err := c.Begin(t.Context(), "billing.charge", []byte(`{"invoice_id":"inv_5","amount":80}`), "", 0); err != nil {
				t.Errorf("client Begin without the hop (its own grant): %v", err)
			}
			if _, err := c.Begin(latch.WithHop(t.Context(), "dlg_nosuch"), "billing.charge", []byte(`{"invoice_id":"inv_6","amount":1}`), "", 0); !errors.As(err, &ae) || ae.Reason != "authority_hop" {
				t.Errorf("client Begin with a missing hop err = %v, want authority_hop", err)
			}
		})
	}
}

// TestPostHop: POST /v1/hops lets the calling agent (the sender) hand on part of a grant it
// holds: 200 with the hop (via hop, created by the sender, addressed to the receiver), which the
// receiver then acts under; a widening hop is 403 authority_escalation naming the dimension, a
// sender not holding the parent 403 no_authority, a person's credential 403 forbidden, a missing
// receiver 400 missing_field — and none of these stores a delegation. Both stores.
func TestPostHop(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := startWith(t, backend, hopPolicy, nil)
			body := func(grant string) map[string]any {
				return map[string]any{"parent": "sender", "to": map[string]any{"agent": "billing-worker"}, "grant": grant}
			}
			narrow := "actions: [billing.charge]\nconstraints: {amount_lte: 50}\nexpires_at: 2098-01-01T00:00:00Z\n"
			wantProblem(t, "a widening hop", s.do("POST", "/v1/hops", s.bob, body("actions: [billing.charge]\nconstraints: {amount_lte: 500}\nexpires_at: 2098-01-01T00:00:00Z\n")), 403, "authority_escalation")
			wantProblem(t, "a sender not holding the parent", s.do("POST", "/v1/hops", s.alice, body(narrow)), 403, "no_authority")
			wantProblem(t, "a person's credential", s.do("POST", "/v1/hops", s.approver, body(narrow)), 403, "forbidden")
			if p := wantProblem(t, "no receiver", s.do("POST", "/v1/hops", s.bob, map[string]any{"parent": "sender", "grant": narrow}), 400, "missing_field"); p["field"] != "to" {
				t.Errorf("no receiver = %v, want field to", p)
			}
			plain := start(t, backend, nil) // a policy without an authority section
			wantProblem(t, "no authority section", plain.do("POST", "/v1/hops", plain.bob, body(narrow)), 403, "no_authority")
			if ds, err := s.g.Store().(store.DelegationStore).Delegations(t.Context()); err != nil || len(ds) != 0 {
				t.Fatalf("delegations after the refusals = %d (%v), want none", len(ds), err)
			}
			r := s.do("POST", "/v1/hops", s.bob, body(narrow))
			if r.status != 200 || r.body["via"] != "hop" || r.body["created_by"] != "other-worker" || r.body["parent"] != "sender" {
				t.Fatalf("POST /v1/hops = %d %s, want 200 a hop beneath sender by other-worker", r.status, r.raw)
			}
			hop := r.body["delegation_id"].(string)
			if sub, _ := r.body["subject"].(map[string]any); sub["agent"] != "billing-worker" {
				t.Errorf("hop subject = %v, want billing-worker", r.body["subject"])
			}
			charge := func(amount int) map[string]any {
				return map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": "inv", "amount": amount}, "hop": hop}
			}
			wantProblem(t, "beyond the hop", s.do("POST", "/v1/actions", s.alice, charge(80)), 403, "authority_constraint")
			if b := s.do("POST", "/v1/actions", s.alice, charge(40)); b.status != 200 {
				t.Errorf("begin within the hop = %d %s, want 200", b.status, b.raw)
			}
		})
	}
}
