package server_test

import (
	"slices"
	"testing"

	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// breakGlassPolicy gives billing-worker nothing but the incident envelope, which carol (on
// call) may open.
const breakGlassPolicy = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
approvers:
  roles:
    oncall: [carol]
authority:
  grants: []
  break_glass:
    - id: incident
      subject: {agent: billing-worker}
      actions: [billing.charge]
      constraints: {amount_lte: 1000}
      max_ttl: 1h
      openers: [oncall]
`

func openBody(reason string, ttl int) map[string]any {
	return map[string]any{"envelope": "incident", "reason": reason, "ttl_seconds": ttl}
}

// TestBreakGlassHTTP: through a real server on both stores, an agent's credential — token or
// JWT — never opens a break-glass grant and writes nothing; a person who is not an opener, a
// TTL beyond max_ttl, a bad body and an unknown envelope are refused and open nothing; carol's
// person JWT opens one, and the agent's charge under it commits with the envelope in its
// receipt.
func TestBreakGlassHTTP(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t)
	marks := func(c *identity.Config) { c.ApproverClaim, c.ApproverValue = "latch_role", "approver" }
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := startWith(t, backend, breakGlassPolicy, &server.Config{Identity: iss.verifier(marks)})
			carol, dave := iss.sign("carol", approverRole), iss.sign("dave", approverRole)
			agentJWT := iss.sign("billing-worker", nil)

			wantProblem(t, "a charge before any opening", s.do("POST", "/v1/actions", s.alice, charge("inv_0", 100)), 403, "no_authority")
			before := s.footprint()
			wantProblem(t, "an agent token", s.do("POST", "/v1/break-glass", s.alice, openBody("INC-1", 600)), 403, "forbidden")
			wantProblem(t, "an agent JWT", s.do("POST", "/v1/break-glass", agentJWT, openBody("INC-1", 600)), 403, "forbidden")
			wantProblem(t, "no credential", s.do("POST", "/v1/break-glass", "", openBody("INC-1", 600)), 401, "unauthenticated")
			if after := s.footprint(); after != before {
				t.Errorf("an agent's opening wrote: %+v → %+v", before, after)
			}
			p := wantProblem(t, "a person who is not an opener", s.do("POST", "/v1/break-glass", dave, openBody("INC-1", 600)), 403, "no_authority")
			if p["dimension"] != "opener" {
				t.Errorf("not an opener: dimension %v, want opener", p["dimension"])
			}
			p = wantProblem(t, "longer than max_ttl", s.do("POST", "/v1/break-glass", carol, openBody("INC-1", 7200)), 403, "authority_escalation")
			if p["dimension"] != "expires_at" {
				t.Errorf("longer than max_ttl: dimension %v, want expires_at", p["dimension"])
			}
			wantProblem(t, "no reason", s.do("POST", "/v1/break-glass", carol, openBody("", 600)), 400, "invalid_grant")
			wantProblem(t, "an unknown member", s.do("POST", "/v1/break-glass", carol, `{"envelope":"incident","reason":"x","ttl":600}`), 400, "unknown_field")
			wantProblem(t, "a negative TTL", s.do("POST", "/v1/break-glass", carol, openBody("INC-1", -1)), 400, "invalid_field")
			wantProblem(t, "a grant that is not one", s.do("POST", "/v1/break-glass", carol,
				map[string]any{"envelope": "incident", "reason": "x", "grant": "actions: [billing.charge]\n"}), 400, "invalid_grant")
			wantProblem(t, "an unknown envelope", s.do("POST", "/v1/break-glass", carol, map[string]any{"envelope": "nope", "reason": "x"}), 404, "envelope_not_found")
			if ds, _ := s.g.Store().(store.DelegationStore).Delegations(t.Context()); len(ds) != 0 {
				t.Fatalf("refused openings stored %d delegations", len(ds))
			}

			r := s.do("POST", "/v1/break-glass", carol, openBody("INC-1: charges stuck", 600))
			if r.status != 200 || r.body["via"] != "break-glass" || r.body["parent"] != "incident" || r.body["reason"] != "INC-1: charges stuck" ||
				r.body["created_by"] != "jwt:carol" || r.body["subject"].(map[string]any)["agent"] != "billing-worker" || r.body["delegable"] != false {
				t.Fatalf("carol's opening = %d %s", r.status, r.raw)
			}
			id := r.body["delegation_id"].(string)

			b := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			if b.status != 200 {
				t.Fatalf("a charge under the opened grant = %d %s", b.status, b.raw)
			}
			o := s.do("POST", "/v1/actions/"+b.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "committed"})
			auth, _ := o.body["receipt"].(map[string]any)["authority"].(map[string]any)
			if o.status != 200 || auth["break_glass"] != "incident" || auth["delegation_id"] != id {
				t.Errorf("outcome = %d, receipt authority %v; want committed under break-glass incident via %s", o.status, auth, id)
			}
			wantProblem(t, "a charge beyond the envelope", s.do("POST", "/v1/actions", s.alice, charge("inv_2", 5000)), 403, "authority_constraint")
		})
	}
}

// TestBreakGlassHTTPApproverToken: an approver token is a person's credential too.
func TestBreakGlassHTTPApproverToken(t *testing.T) {
	t.Parallel()
	s := startWith(t, "sqlite", breakGlassPolicy, nil)
	r := s.do("POST", "/v1/break-glass", s.approver, openBody("INC-2", 0))
	if r.status != 200 || r.body["created_by"] != "token:carol" || r.body["via"] != "break-glass" {
		t.Fatalf("carol's token opening = %d %s", r.status, r.raw)
	}
	// The answer has exactly the fields the OpenAPI document names (jsonview.Delegation, the
	// shape latch delegations --json prints).
	doc := s.do("GET", "/v1/openapi.json", "", nil).body
	schema := doc["components"].(map[string]any)["schemas"].(map[string]any)["Delegation"].(map[string]any)
	if got, want := sortedNames(r.body), sortedNames(schema["properties"].(map[string]any)); !slices.Equal(got, want) {
		t.Errorf("answer fields %v, OpenAPI Delegation names %v", got, want)
	}
}
