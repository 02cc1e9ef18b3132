package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/store"
)

const standingConsolePolicy = `schema: latch.policy/v1
approvers:
  roles:
    leads: []
actions:
  refund.issue:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer }
    decision: approve
    approvers:
      roles: [leads]
      standing: { max_uses: 5, max_for: 2h }
`

// TestStandingPage: the Standing page lists the active standing approvals with what each admits
// and a CSRF-protected revoke form; a form without the session's token, or from a person the
// action's approvers do not entitle, revokes nothing; an entitled person's form revokes it, and
// a call presenting it afterwards is refused approval_revoked.
func TestStandingPage(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: standingConsolePolicy})
	s.AddAccount(t, "alice", pw, "leads")
	s.AddAccount(t, "dave", pw)
	bot := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
	run := func(ctx context.Context, order string) error {
		_, err := s.Guard.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"order_id":"` + order + `","amount":300}`)},
			func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
		return err
	}
	var ar *latch.ApprovalRequiredError
	if err := run(bot, "o-1"); !errors.As(err, &ar) {
		t.Fatalf("first call: %v", err)
	}
	req := &store.AnswerRequest{ID: ar.ApprovalID, Grant: true, Approver: "alice", Method: store.MethodSession, Verified: true,
		Standing: &store.StandingTerms{Uses: 3, For: store.Duration(time.Hour), Max: map[string]int64{"amount": 500}, Vary: []string{"order_id"}}}
	if _, err := s.Guard.Answer(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	sta := req.StandingID

	c, csrf := login(t, s, "alice")
	page := consoletest.Get(t, c, s.URL+"/standing")
	for _, want := range []string{`<a href="/standing" aria-current="page">Standing</a>`, sta, "refund.issue", "</code> for bot", "amount ≤ 500, order_id any",
		"0 of 3", `action="/standing/` + sta + `/revoke"`, `name="csrf" value="` + csrf + `"`, ar.ApprovalID} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("GET /standing lacks %q", want)
		}
	}
	form := url.Values{"note": {"enough"}}
	if r := consoletest.Post(t, c, s.URL+"/standing/"+sta+"/revoke", form); r.Status != http.StatusForbidden || !strings.Contains(r.Body, "security token") {
		t.Errorf("a form without the CSRF token = %d, want 403 naming the security token", r.Status)
	}
	dc, dcsrf := login(t, s, "dave")
	form.Set("csrf", dcsrf)
	if r := consoletest.Post(t, dc, s.URL+"/standing/"+sta+"/revoke", form); r.Status != http.StatusForbidden || !strings.Contains(r.Body, "approver_not_entitled") {
		t.Errorf("dave's form = %d, want 403 approver_not_entitled: %s", r.Status, r.Body)
	}
	if err := run(latch.WithApproval(bot, sta), "o-2"); err != nil {
		t.Fatalf("a call presenting %s after refused revocations: %v", sta, err)
	}
	form.Set("csrf", csrf)
	r := consoletest.Post(t, c, s.URL+"/standing/"+sta+"/revoke", form)
	if r.Status != http.StatusSeeOther || r.Location != "/standing" {
		t.Fatalf("alice's form = %d %q, want 303 to /standing: %s", r.Status, r.Location, r.Body)
	}
	if page := consoletest.Get(t, c, s.URL+"/standing"); !strings.Contains(page.Body, "Revoked "+sta) || strings.Contains(page.Body, `action="/standing/`+sta+`/revoke"`) {
		t.Errorf("after the revocation the page does not say so, or still offers the form")
	}
	if page := consoletest.Get(t, c, s.URL+"/standing?state=revoked"); !strings.Contains(page.Body, sta) || !strings.Contains(page.Body, "enough") {
		t.Errorf("GET /standing?state=revoked lacks %s with its note", sta)
	}
	if err := run(latch.WithApproval(bot, sta), "o-3"); latch.RefusalOf(err) == nil || latch.RefusalOf(err).Reason != latch.ReasonApprovalRevoked {
		t.Errorf("a call after the revocation: %v, want approval_revoked", err)
	}
	if page := consoletest.Get(t, c, s.URL+"/standing?state=spent"); page.Status != http.StatusBadRequest {
		t.Errorf("GET /standing?state=spent = %d, want 400", page.Status)
	}
}
