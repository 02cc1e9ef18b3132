package console_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/internal/jsonview"
)

const remindPolicy = `schema: latch.policy/v1
approvers:
  roles:
    leads: [alice]
    heads: []
actions:
  refund.issue:
    effect: "refund:{id}"
    decision: approve
    approval_ttl: 1h
    approvers:
      roles: [leads]
      remind_after: 10m
      escalate_after: 30m
      escalate_to: {roles: [heads], people: [erin]}
`

// TestRequestPageShowsReminders: the request page and the API show when a request is reminded
// about and escalated, and whether the sweeper sent it; once escalated, an account with the
// role it escalates to may answer it on the page, where before it could only read it.
func TestRequestPageShowsReminders(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: remindPolicy})
	s.AddAccount(t, "dana", pw, "heads")
	_, err := s.Guard.Begin(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"}),
		&latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"id":"r1"}`)})
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("Begin = %v; want an approval required", err)
	}
	created := approval(t, s, ar.ApprovalID).CreatedAt
	remindAt, escalateAt := *jsonview.Stamp(created.Add(10 * time.Minute)), *jsonview.Stamp(created.Add(30 * time.Minute))
	c, _ := login(t, s, "dana")
	page := func() string {
		t.Helper()
		return consoletest.Get(t, c, s.URL+"/approvals/"+ar.ApprovalID).Body
	}
	api := func() *jsonview.Reminders {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/v1/approvals/"+ar.ApprovalID, nil)
		req.Header.Set("Authorization", "Bearer "+s.Approver)
		r := consoletest.Do(t, consoletest.Client(t, ""), req)
		var v jsonview.Approval
		if err := json.Unmarshal([]byte(r.Body), &v); err != nil || r.Status != http.StatusOK {
			t.Fatalf("GET /v1/approvals/%s = %d %s", ar.ApprovalID, r.Status, r.Body)
		}
		req, _ = http.NewRequest(http.MethodGet, s.URL+"/v1/approvals?status=pending", nil)
		req.Header.Set("Authorization", "Bearer "+s.Approver)
		r = consoletest.Do(t, consoletest.Client(t, ""), req)
		var list struct{ Approvals []jsonview.Approval }
		if err := json.Unmarshal([]byte(r.Body), &list); err != nil || len(list.Approvals) != 1 {
			t.Fatalf("GET /v1/approvals = %d %s", r.Status, r.Body)
		}
		one, _ := json.Marshal(v.Reminders)
		listed, _ := json.Marshal(list.Approvals[0].Reminders)
		if string(one) != string(listed) {
			t.Errorf("reminders of the request %s and of the listing %s differ", one, listed)
		}
		return v.Reminders
	}
	sweep := func(wantReminded, wantEscalated int) {
		t.Helper()
		rep, err := s.Guard.Sweep(t.Context())
		if err != nil || len(rep.Reminded) != wantReminded || len(rep.Escalated) != wantEscalated {
			t.Fatalf("Sweep = %+v, %v; want %d reminded, %d escalated", rep, err, wantReminded, wantEscalated)
		}
	}
	contains := func(body string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("request page lacks %q", w)
			}
		}
	}

	sweep(0, 0)
	body := page()
	contains(body, "Reminder", "due "+remindAt+", not sent", "Escalation", "to role heads, erin at "+escalateAt, "You are not among the approvers")
	if r := api(); r == nil || r.RemindAt == nil || *r.RemindAt != remindAt || r.RemindedAt != nil || r.EscalatedAt != nil {
		t.Errorf("API reminders before any = %+v", r)
	}

	s.Clock.Add(15 * time.Minute)
	sweep(1, 0)
	contains(page(), "due "+remindAt+", sent ", "You are not among the approvers")
	if r := api(); r == nil || r.RemindedAt == nil || r.EscalatedAt != nil {
		t.Errorf("API reminders after the reminder = %+v", r)
	}

	s.Clock.Add(20 * time.Minute)
	sweep(0, 1)
	body = page()
	contains(body, "(they may answer from then on), sent ", "escalated: those it names may answer now", "members of leads, heads")
	if strings.Contains(body, "You are not among the approvers") || !strings.Contains(body, `action="/approvals/`+ar.ApprovalID+`/answer"`) {
		t.Errorf("after the escalation dana cannot answer on the page:\n%s", body)
	}
	if r := api(); r == nil || r.RemindedAt == nil || r.EscalatedAt == nil || r.EscalateTo == nil || strings.Join(r.EscalateTo.Roles, ",") != "heads" {
		t.Errorf("API reminders after the escalation = %+v", r)
	}
	sweep(0, 0)
}
