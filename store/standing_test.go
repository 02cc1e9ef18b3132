package store

import (
	"encoding/json"
	"testing"
	"time"
)

func actionDoc(t *testing.T, name, args, resource, agent, env string) json.RawMessage {
	t.Helper()
	var res any
	if resource != "" {
		res = resource
	}
	doc, err := json.Marshal(map[string]any{"schema": "latch.action/v1", "name": name, "arguments": json.RawMessage(args),
		"resource": res, "principal": map[string]any{"agent": agent, "user": nil}, "environment": env})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestCheckStandingUse: the use of a standing approval is decided against the whole action of
// the request it was granted from: the bounded arguments within bounds, every other field and
// argument equal, and its state.
func TestCheckStandingUse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := &Standing{ID: "sta_1", Status: StandingActive, ActionName: "refund",
		Action: actionDoc(t, "refund", `{"amount":100,"order":"o-1","currency":"EUR"}`, "acct:1", "bot", "production"),
		Terms: StandingTerms{Uses: 2, For: Duration(time.Hour), Max: map[string]int64{"amount": 300}, Vary: []string{"order"},
			Total: &StandingTotal{Argument: "amount", Limit: 500}},
		ExpiresAt: now.Add(time.Hour)}
	for _, tc := range []struct {
		name                     string
		edit                     func(s *Standing)
		action, args, res, agent string
		env                      string
		rendered                 bool
		want                     string
		amount                   int64
	}{
		{name: "within bounds", args: `{"amount":300,"order":"o-9","currency":"EUR"}`, want: "", amount: 300},
		{name: "over the max", args: `{"amount":301,"order":"o-9","currency":"EUR"}`, want: "mismatch"},
		{name: "a fraction", args: `{"amount":2.5,"order":"o-9","currency":"EUR"}`, want: "mismatch"},
		{name: "a fixed argument changed", args: `{"amount":1,"order":"o-9","currency":"USD"}`, want: "mismatch"},
		{name: "an argument added", args: `{"amount":1,"order":"o-9","currency":"EUR","note":"x"}`, want: "mismatch"},
		{name: "a varying argument left out", args: `{"amount":1,"currency":"EUR"}`, want: "mismatch"},
		{name: "another resource", args: `{"amount":1,"order":"o-9","currency":"EUR"}`, res: "acct:2", want: "mismatch"},
		{name: "another resource rendered from the arguments", rendered: true, args: `{"amount":1,"order":"o-9","currency":"EUR"}`, res: "acct:2", want: "", amount: 1},
		{name: "another environment", args: `{"amount":1,"order":"o-9","currency":"EUR"}`, env: "staging", want: "mismatch"},
		{name: "another agent", args: `{"amount":1,"order":"o-9","currency":"EUR"}`, agent: "eve", want: "mismatch"},
		{name: "another action", action: "payout", args: `{"amount":1,"order":"o-9","currency":"EUR"}`, want: "mismatch"},
		{name: "over the total", edit: func(s *Standing) { s.Spent = 300 }, args: `{"amount":201,"order":"o-9","currency":"EUR"}`, want: "exhausted"},
		{name: "up to the total", edit: func(s *Standing) { s.Spent = 300 }, args: `{"amount":200,"order":"o-9","currency":"EUR"}`, want: "", amount: 200},
		{name: "every use spent", edit: func(s *Standing) { s.Uses = 2 }, args: `{"amount":1,"order":"o-9","currency":"EUR"}`, want: "exhausted"},
		{name: "expired", edit: func(s *Standing) { s.ExpiresAt = now }, args: `{"amount":1,"order":"o-9","currency":"EUR"}`, want: "expired"},
		{name: "revoked", edit: func(s *Standing) { s.Status = StandingRevoked }, args: `{"amount":1,"order":"o-9","currency":"EUR"}`, want: "revoked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := *base
			if tc.edit != nil {
				tc.edit(&s)
			}
			action, res, agent, env := "refund", "acct:1", "bot", "production"
			if tc.action != "" {
				action = tc.action
			}
			if tc.res != "" {
				res = tc.res
			}
			if tc.agent != "" {
				agent = tc.agent
			}
			if tc.env != "" {
				env = tc.env
			}
			req := &ReserveRequest{Now: now, Action: action, ApprovalID: s.ID, Document: actionDoc(t, action, tc.args, res, agent, env),
				ResourceRendered: tc.rendered}
			reason, detail, amount := CheckStandingUse(&s, req)
			if reason != tc.want || amount != tc.amount {
				t.Errorf("CheckStandingUse = %q (%s), amount %d; want %q, %d", reason, detail, amount, tc.want, tc.amount)
			}
		})
	}
	if reason, _, _ := CheckStandingUse(nil, &ReserveRequest{Now: now}); reason != "unknown" {
		t.Errorf("CheckStandingUse(nil) = %q, want unknown", reason)
	}
}
