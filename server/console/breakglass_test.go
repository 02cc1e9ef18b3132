package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/store"
)

const breakGlassPolicy = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
approvers:
  roles:
    oncall: []
authority:
  grants: []
  break_glass:
    - id: incident
      subject: {agent: "ops-*"}
      actions: [billing.charge]
      constraints: {amount_lte: 1000}
      max_ttl: 2h
      openers: [oncall]
`

func breakGlassGrants(t *testing.T, s *consoletest.Server) []*store.Delegation {
	t.Helper()
	ds, err := s.Guard.Store().(store.DelegationStore).Delegations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestBreakGlassForm: the page lists the policy's envelopes, each with a CSRF-protected form; a
// form without the session's token, or from a person who is not an opener, opens nothing; an
// opener's form opens the grant as the session's person, and the page lists it with its reason
// marked as every outside text is.
func TestBreakGlassForm(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: breakGlassPolicy})
	s.AddAccount(t, "alice", pw, "oncall")
	s.AddAccount(t, "dave", pw)
	c, csrf := login(t, s, "alice")
	page := consoletest.Get(t, c, s.URL+"/break-glass")
	for _, want := range []string{"incident", "ops-*", "billing.charge", "amount_lte: 1000", "2h0m0s", "members of oncall",
		`action="/break-glass/incident/open"`, `name="csrf" value="` + csrf + `"`, "No break-glass grant is open."} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("GET /break-glass lacks %q", want)
		}
	}
	form := url.Values{"agent": {"ops-bot"}, "minutes": {"30"}, "reason": {"INC-9 charges stuck\u202e"}}
	ev, _ := s.Written(t)
	if r := consoletest.Post(t, c, s.URL+"/break-glass/incident/open", form); r.Status != http.StatusForbidden || !strings.Contains(r.Body, "security token") {
		t.Errorf("a form without the CSRF token = %d, want 403 naming the security token", r.Status)
	}
	dc, dcsrf := login(t, s, "dave")
	form.Set("csrf", dcsrf)
	if r := consoletest.Post(t, dc, s.URL+"/break-glass/incident/open", form); r.Status != http.StatusForbidden || !strings.Contains(r.Body, "no_authority on opener") {
		t.Errorf("dave's form = %d, want 403 no_authority on opener: %s", r.Status, r.Body)
	}
	if ds := breakGlassGrants(t, s); len(ds) != 0 {
		t.Fatalf("refused forms opened %d grants", len(ds))
	}
	if e, _ := s.Written(t); e != ev+1 { // dave's refusal: one delegation_rejected event
		t.Errorf("refused forms wrote %d events, want 1 (dave's delegation_rejected)", e-ev)
	}

	form.Set("csrf", csrf)
	r := consoletest.Post(t, c, s.URL+"/break-glass/incident/open", form)
	if r.Status != http.StatusSeeOther || r.Location != "/break-glass" {
		t.Fatalf("alice's form = %d %q: %s", r.Status, r.Location, r.Body)
	}
	ds := breakGlassGrants(t, s)
	if len(ds) != 1 || ds[0].Via != store.ViaBreakGlass || ds[0].CreatedBy != "session:alice" || ds[0].Parent != "incident" {
		t.Fatalf("after alice's form the grants are %+v, want one break-glass grant by session:alice", ds)
	}
	page = consoletest.Get(t, c, s.URL+"/break-glass")
	for _, want := range []string{"Opened break-glass " + ds[0].ID, ds[0].ID, "session:alice", "ops-bot", `INC-9 charges stuck<span class="esc"`} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("GET /break-glass after opening lacks %q", want)
		}
	}
	if strings.Contains(page.Body, "\u202e") {
		t.Error("GET /break-glass shows the reason's bidi override raw")
	}
	// The agent acts under it.
	_, err := s.Guard.Execute(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "ops-bot"}),
		&latch.Call{Action: "billing.charge", Arguments: []byte(`{"invoice_id":"inv_1","amount":10}`)},
		func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
	if err != nil {
		t.Errorf("a charge under the opened grant: %v", err)
	}
}
