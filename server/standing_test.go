package server_test

import (
	"strings"
	"testing"

	"github.com/latchkit/latch/server"
)

// standingPolicy lets approvers grant standing approvals of refunds by other-worker.
const standingPolicy = `
schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{order_id}"
    arguments:
      order_id: {type: string}
      amount: {type: integer}
    decision: approve
    approvers:
      standing: {max_uses: 3, max_for: 1h}
`

func refund(order string, amount int, approval string) map[string]any {
	b := map[string]any{"action": "refund.issue", "arguments": map[string]any{"order_id": order, "amount": amount}}
	if approval != "" {
		b["approval_id"] = approval
	}
	return b
}

// TestStandingHTTP: an approver grants a request with standing terms over HTTP; the answer
// names the standing approval; the agent's begin presenting it is admitted within its bounds
// and refused outside them; GET /v1/standing lists it; a revocation ends it, and a begin
// presenting it after is refused 403 approval_revoked.
func TestStandingHTTP(t *testing.T) {
	t.Parallel()
	s := observedServer(t, &observed{seen: map[string]bool{}}, standingPolicy)
	r := s.do("POST", "/v1/actions", s.bob, refund("o-1", 100, ""))
	if r.status != 202 {
		t.Fatalf("first begin: %d %s", r.status, r.raw)
	}
	apr := r.body["approval_id"].(string)
	terms := map[string]any{"uses": 2, "for": "1h", "max": map[string]any{"amount": 500}, "vary": []string{"order_id"}}

	r = s.do("POST", "/v1/approvals/"+apr+"/approve", s.approver, map[string]any{"standing": map[string]any{"uses": 4, "for": "1h"}})
	if r.status != 403 || r.body["reason"] != "standing_too_wide" {
		t.Errorf("a grant wider than the policy: %d %s, want 403 standing_too_wide", r.status, r.raw)
	}
	r = s.do("POST", "/v1/approvals/"+apr+"/deny", s.approver, map[string]any{"standing": terms})
	if r.status != 400 || r.body["field"] != "standing" {
		t.Errorf("a deny with standing terms: %d %s, want 400 naming field standing", r.status, r.raw)
	}
	r = s.do("POST", "/v1/approvals/"+apr+"/approve", s.approver, map[string]any{"standing": terms})
	sta := r.header.Get(server.StandingIDHeader)
	if r.status != 200 || r.body["status"] != "granted" || !strings.HasPrefix(sta, "sta_") {
		t.Fatalf("grant with standing terms: %d %s, %s %q", r.status, r.raw, server.StandingIDHeader, sta)
	}

	if r = s.do("POST", "/v1/actions", s.bob, refund("o-2", 400, sta)); r.status != 200 || r.body["status"] != "reserved" {
		t.Errorf("a begin within the bounds: %d %s, want 200 reserved", r.status, r.raw)
	}
	if r = s.do("POST", "/v1/actions", s.bob, refund("o-3", 900, sta)); r.status != 403 || r.body["reason"] != "approval_mismatch" {
		t.Errorf("a begin outside the bounds: %d %s, want 403 approval_mismatch", r.status, r.raw)
	}

	r = s.do("GET", "/v1/standing?state=active", s.approver, nil)
	list, _ := r.body["standing"].([]any)
	if r.status != 200 || len(list) != 1 {
		t.Fatalf("GET /v1/standing?state=active: %d %s", r.status, r.raw)
	}
	if v := list[0].(map[string]any); v["standing_id"] != sta || v["uses"] != float64(1) || v["from"] != apr {
		t.Errorf("listed %v, want %s from %s with 1 use", v, sta, apr)
	}
	if r = s.do("GET", "/v1/standing/"+sta, s.bob, nil); r.status != 200 || r.body["state"] != "active" {
		t.Errorf("the principal it admits reads it: %d %s", r.status, r.raw)
	}

	if r = s.do("POST", "/v1/standing/"+sta+"/revoke", s.approver, map[string]any{"note": "done"}); r.status != 200 || r.body["state"] != "revoked" || r.body["revoked_by"] == nil {
		t.Errorf("revoke: %d %s", r.status, r.raw)
	}
	if r = s.do("POST", "/v1/standing/"+sta+"/revoke", s.approver, nil); r.status != 409 || r.body["reason"] != "revoked" {
		t.Errorf("revoke twice: %d %s, want 409 revoked", r.status, r.raw)
	}
	if r = s.do("POST", "/v1/actions", s.bob, refund("o-4", 10, sta)); r.status != 403 || r.body["reason"] != "approval_revoked" {
		t.Errorf("a begin after the revocation: %d %s, want 403 approval_revoked", r.status, r.raw)
	}
}
