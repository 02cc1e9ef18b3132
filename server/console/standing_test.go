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

// TestGrantStandingForm: the request page of an action whose policy allows standing approvals
// offers the form with the policy's bounds; the form's terms reach Guard.Answer as the API's do
// (the standing approval has exactly them); a form without the session's token, terms wider
// than the policy allows, or a form that cannot be read writes nothing and says why; an action
// without a standing entry offers no form and refuses one sent anyway.
func TestGrantStandingForm(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: standingConsolePolicy + `  refund.small:
    effect: "small:{order_id}"
    arguments:
      order_id: { type: string }
    decision: approve
    approvers:
      roles: [leads]
`})
	s.AddAccount(t, "alice", pw, "leads")
	bot := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
	ask := func(action, args string) string {
		t.Helper()
		_, err := s.Guard.Execute(bot, &latch.Call{Action: action, Arguments: json.RawMessage(args)},
			func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
		var ar *latch.ApprovalRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("%s: %v, want approval required", action, err)
		}
		return ar.ApprovalID
	}
	id := ask("refund.issue", `{"order_id":"o-1","amount":300}`)
	c, csrf := login(t, s, "alice")
	page := consoletest.Get(t, c, s.URL+"/approvals/"+id)
	for _, want := range []string{`<fieldset class="standing">`, "at most 5 uses for at most 2h", `name="standing.uses"`, `max="5"`,
		`name="standing.arg.amount"`, `name="standing.max.amount"`, `name="standing.arg.order_id"`, `value="standing"`} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("GET /approvals/%s lacks %q", id, want)
		}
	}
	if strings.Contains(page.Body, `name="standing.max.order_id"`) {
		t.Errorf("the form offers a ceiling for order_id, a string")
	}
	form := url.Values{"decision": {"standing"}, "standing.uses": {"3"}, "standing.for": {"1h"},
		"standing.arg.amount": {"max"}, "standing.max.amount": {"500"}, "standing.arg.order_id": {"vary"},
		"standing.total": {"amount"}, "standing.total_limit": {"1000"}}
	none := func(what string) {
		t.Helper()
		list, err := s.Guard.Standings(t.Context(), store.StandingFilter{})
		if err != nil || len(list) != 0 {
			t.Errorf("after %s: standing approvals %v, %v; want none", what, list, err)
		}
		if a, err := s.Guard.Store().Approval(t.Context(), id); err != nil || a.Status != store.Pending {
			t.Errorf("after %s: the request is %v, %v; want pending", what, a, err)
		}
	}
	if r := consoletest.Post(t, c, s.URL+"/approvals/"+id+"/answer", form); r.Status != http.StatusForbidden || !strings.Contains(r.Body, "security token") {
		t.Errorf("a form without the CSRF token = %d, want 403 naming the security token", r.Status)
	}
	none("a form without the token")
	form.Set("csrf", csrf)
	for _, tc := range []struct {
		field, value string
		status       int
		want         string
	}{
		{"standing.uses", "6", http.StatusForbidden, "Refused (standing_too_wide): uses is 6, the policy allows at most 5"},
		{"standing.for", "3h", http.StatusForbidden, "Refused (standing_too_wide): for is 3h0m0s, the policy allows at most 2h0m0s"},
		{"standing.uses", "", http.StatusUnprocessableEntity, "Say how many calls the standing approval admits"},
		{"standing.for", "soon", http.StatusUnprocessableEntity, "Say how long the standing approval lasts"},
		{"standing.max.amount", "", http.StatusUnprocessableEntity, "Say the most amount may be"},
		{"standing.arg.amount", "all", http.StatusUnprocessableEntity, "The bound of amount is not one the form offers"},
		{"standing.total", "currency", http.StatusBadRequest, "Refused (invalid_standing): total names argument"},
	} {
		bad := url.Values{}
		for k, v := range form {
			bad[k] = v
		}
		bad.Set(tc.field, tc.value)
		r := consoletest.Post(t, c, s.URL+"/approvals/"+id+"/answer", bad)
		if r.Status != tc.status || !strings.Contains(r.Body, tc.want) || !strings.Contains(r.Body, "Nothing was changed") {
			t.Errorf("%s=%q: %d, want %d saying %q and that nothing was changed", tc.field, tc.value, r.Status, tc.status, tc.want)
		}
		none(tc.field + "=" + tc.value)
	}
	r := consoletest.Post(t, c, s.URL+"/approvals/"+id+"/answer", form)
	if r.Status != http.StatusSeeOther {
		t.Fatalf("the standing grant = %d: %s", r.Status, r.Body)
	}
	list, err := s.Guard.Standings(t.Context(), store.StandingFilter{})
	if err != nil || len(list) != 1 {
		t.Fatalf("standing approvals after the grant: %v, %v", list, err)
	}
	st := list[0]
	want := store.StandingTerms{Uses: 3, For: store.Duration(time.Hour), Max: map[string]int64{"amount": 500}, Vary: []string{"order_id"},
		Total: &store.StandingTotal{Argument: "amount", Limit: 1000}}
	if got, _ := json.Marshal(st.Terms); string(got) != string(must(json.Marshal(want))) || st.From != id || len(st.GrantedBy) != 1 || st.GrantedBy[0] != "alice" {
		t.Errorf("the standing approval: terms %s from %s by %v; want %s from %s by alice", got, st.From, st.GrantedBy, must(json.Marshal(want)), id)
	}
	if page := consoletest.Get(t, c, s.URL+"/approvals"); !strings.Contains(page.Body, "Granted standing approval "+st.ID+": up to 3 calls of refund.issue") ||
		!strings.Contains(page.Body, "amount ≤ 500, order_id any, total amount ≤ 1000") {
		t.Errorf("the flash after the grant does not name %s and its bounds", st.ID)
	}
	if page := consoletest.Get(t, c, s.URL+"/approvals/"+id); !strings.Contains(page.Body, "granted <a href=\"/standing?state=all\"><code>"+st.ID+"</code></a> with it: up to 3 further calls") {
		t.Errorf("the request's page does not name the standing approval granted from it")
	}
	if err := func() error {
		_, err := s.Guard.Execute(latch.WithApproval(bot, st.ID), &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"order_id":"o-9","amount":450}`)},
			func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
		return err
	}(); err != nil {
		t.Errorf("a call within the form's bounds presenting %s: %v", st.ID, err)
	}

	small := ask("refund.small", `{"order_id":"o-2"}`)
	page = consoletest.Get(t, c, s.URL+"/approvals/"+small)
	if !strings.Contains(page.Body, `value="grant"`) || strings.Contains(page.Body, `<fieldset class="standing">`) {
		t.Errorf("an action without a standing entry: the answer form is missing, or offers a standing grant")
	}
	r = consoletest.Post(t, c, s.URL+"/approvals/"+small+"/answer", url.Values{"csrf": {csrf}, "decision": {"standing"}, "standing.uses": {"1"}, "standing.for": {"1h"}})
	if r.Status != http.StatusForbidden || !strings.Contains(r.Body, "standing_not_allowed") {
		t.Errorf("a standing form for refund.small = %d, want 403 standing_not_allowed: %s", r.Status, r.Body)
	}
	if a, err := s.Guard.Store().Approval(t.Context(), small); err != nil || a.Status != store.Pending {
		t.Errorf("refund.small after the refused form: %v, %v; want pending", a, err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestGrantStandingFormSecondApprover: with required: 2, the second approver's form is filled
// with the terms the first grant stated (every grant counted must state the same), and sending
// it as filled creates the standing approval both granted.
func TestGrantStandingFormSecondApprover(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: strings.Replace(standingConsolePolicy, "      roles: [leads]\n", "      roles: [leads]\n      required: 2\n", 1)})
	s.AddAccount(t, "alice", pw, "leads")
	s.AddAccount(t, "bob", pw, "leads")
	_, err := s.Guard.Execute(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"}),
		&latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"order_id":"o-1","amount":300}`)},
		func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("first call: %v", err)
	}
	terms := &store.StandingTerms{Uses: 3, For: store.Duration(90 * time.Minute), Max: map[string]int64{"amount": 500},
		Total: &store.StandingTotal{Argument: "amount", Limit: 900}}
	if _, err := s.Guard.Answer(t.Context(), &store.AnswerRequest{ID: ar.ApprovalID, Grant: true, Approver: "alice",
		Method: store.MethodSession, Verified: true, Standing: terms}); err != nil {
		t.Fatal(err)
	}
	c, csrf := login(t, s, "bob")
	page := consoletest.Get(t, c, s.URL+"/approvals/"+ar.ApprovalID).Body
	for _, want := range []string{"alice granted it with these terms", `name="standing.uses" type="number" step="1" min="1" max="5" value="3"`,
		`name="standing.for" type="text" inputmode="text" autocomplete="off" value="1h30m"`, `<option value="max" selected>`,
		`name="standing.max.amount" type="number" step="1" min="0" value="500"`, `<option value="amount" selected>amount</option>`,
		`name="standing.total_limit" type="number" step="1" min="1" value="900"`} {
		if !strings.Contains(page, want) {
			t.Errorf("bob's form lacks %q", want)
		}
	}
	form := url.Values{"csrf": {csrf}, "decision": {"standing"}, "standing.uses": {"3"}, "standing.for": {"1h30m"},
		"standing.arg.amount": {"max"}, "standing.max.amount": {"500"}, "standing.arg.order_id": {"same"},
		"standing.total": {"amount"}, "standing.total_limit": {"900"}}
	if r := consoletest.Post(t, c, s.URL+"/approvals/"+ar.ApprovalID+"/answer", form); r.Status != http.StatusSeeOther {
		t.Fatalf("bob's grant = %d: %s", r.Status, r.Body)
	}
	list, err := s.Guard.Standings(t.Context(), store.StandingFilter{})
	if err != nil || len(list) != 1 || strings.Join(list[0].GrantedBy, ",") != "alice,bob" || list[0].Terms.Uses != 3 {
		t.Fatalf("after both grants: %+v, %v", list, err)
	}
}
