package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/cli"
	"github.com/latchkit/latch/internal/jsonview"
)

const remindPolicy = `schema: latch.policy/v1
approvers:
  roles:
    leads: [alice, bob]
    heads: [dana]
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

// TestApprovalsShowReminders: a request asked for 15 minutes ago and swept since shows, in
// latch approvals (table and JSON) and latch inspect, that its reminder was due and sent and
// that its escalation to role heads and erin is due later and not sent.
func TestApprovalsShowReminders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(pol, []byte(remindPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite:" + filepath.Join(dir, "state.db")
	asked := time.Now().Add(-15 * time.Minute).UTC()
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: pol, StoreURL: storeURL,
		Now: func() time.Time { return asked }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
	_, err = g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"id":"r1"}`)},
		func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("refund: %v, want an approval request", err)
	}
	g.Close()
	sweeper, err := latch.Open(t.Context(), &latch.Config{PolicyPath: pol, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sweeper.Sweep(t.Context())
	sweeper.Close()
	if err != nil || len(rep.Reminded) != 1 || len(rep.Escalated) != 0 {
		t.Fatalf("Sweep = %+v, %v; want one reminder, no escalation", rep, err)
	}

	run := func(args ...string) string {
		var out, errOut bytes.Buffer
		if code := cli.Main(t.Context(), append(args, "--policy", pol, "--store", storeURL), &out, &errOut, func(string) string { return "" }); code != 0 {
			t.Fatalf("latch %v: exit %d: %s", args, code, errOut.String())
		}
		return out.String()
	}
	remindAt := jsonview.Stamp(asked.Add(10 * time.Minute))
	escalateAt := jsonview.Stamp(asked.Add(30 * time.Minute))
	table := run("approvals")
	for _, want := range []string{
		ar.ApprovalID + ": reminder due " + *remindAt + ", sent ",
		ar.ApprovalID + ": escalation to role heads, erin at " + *escalateAt + " (they may answer from then on), not sent",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("latch approvals:\n%s\nwant a line with %q", table, want)
		}
	}
	var v jsonview.Approval
	if err := json.Unmarshal([]byte(run("approvals", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	r := v.Reminders
	if r == nil || r.RemindAt == nil || *r.RemindAt != *remindAt || r.RemindedAt == nil || r.EscalatedAt != nil ||
		r.EscalateAt == nil || *r.EscalateAt != *escalateAt || r.EscalateTo == nil || strings.Join(r.EscalateTo.People, ",") != "erin" {
		t.Errorf("latch approvals --json reminders = %+v, want reminded, escalation to erin due and not sent", r)
	}
	inspect := run("inspect", ar.ApprovalID)
	for _, want := range []string{"reminder     due " + *remindAt + ", sent", "escalation   to role heads, erin at " + *escalateAt, "approval_reminded"} {
		if !strings.Contains(inspect, want) {
			t.Errorf("latch inspect:\n%s\nwant %q", inspect, want)
		}
	}
}
