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
	"github.com/latchkit/latch/store"
)

const onExpiryPolicy = `schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{id}"
    decision: approve
    approval_ttl: 1h
    approvers:
      on_expiry: deny
`

// TestApprovalsShowOnExpiry: under approvers.on_expiry: deny, latch approvals (table and JSON)
// and latch inspect say that a pending request will be denied if still unanswered at its
// expiry, and that one the sweeper found expired was denied by latch:expiry.
func TestApprovalsShowOnExpiry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(pol, []byte(onExpiryPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite:" + filepath.Join(dir, "state.db")
	ask := func(at time.Time, id string) string {
		t.Helper()
		g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: pol, StoreURL: storeURL, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
		_, err = g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"id":"` + id + `"}`)},
			func(context.Context, json.RawMessage) (any, error) { return nil, nil })
		var ar *latch.ApprovalRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("refund %s: %v, want an approval request", id, err)
		}
		return ar.ApprovalID
	}
	old := ask(time.Now().Add(-2*time.Hour).UTC(), "r1")
	fresh := ask(time.Now().UTC(), "r2")
	sweeper, err := latch.Open(t.Context(), &latch.Config{PolicyPath: pol, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sweeper.Sweep(t.Context())
	sweeper.Close()
	if err != nil || len(rep.DeniedAtExpiry) != 1 || rep.DeniedAtExpiry[0] != old {
		t.Fatalf("Sweep = %+v, %v; want %s denied at its expiry", rep, err, old)
	}

	run := func(args ...string) string {
		var out, errOut bytes.Buffer
		if code := cli.Main(t.Context(), append(args, "--policy", pol, "--store", storeURL), &out, &errOut, func(string) string { return "" }); code != 0 {
			t.Fatalf("latch %v: exit %d: %s", args, code, errOut.String())
		}
		return out.String()
	}
	table := run("approvals", "--status", "all")
	for _, want := range []string{fresh + ": denied if still unanswered at ", old + ": denied at its expiry "} {
		if !strings.Contains(table, want) {
			t.Errorf("latch approvals:\n%s\nwant a line with %q", table, want)
		}
	}
	views := map[string]jsonview.Approval{}
	for line := range strings.Lines(run("approvals", "--json", "--status", "all")) {
		var v jsonview.Approval
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		views[v.ApprovalID] = v
	}
	if v := views[fresh]; v.Status != "pending" || v.OnExpiry != "deny" || v.Approver != nil {
		t.Errorf("latch approvals --json of the pending request = %s, on_expiry %q; want pending, deny", v.Status, v.OnExpiry)
	}
	if v := views[old]; v.Status != "denied" || v.OnExpiry != "deny" || v.Approver == nil || *v.Approver != store.ExpiryApprover {
		t.Errorf("latch approvals --json of the swept request = %s by %v, on_expiry %q; want denied by %s", v.Status, v.Approver, v.OnExpiry, store.ExpiryApprover)
	}
	inspect := run("inspect", old)
	for _, want := range []string{"at expiry", "denied at its expiry", store.ExpiryApprover, store.EventApprovalDeniedAtExpiry} {
		if !strings.Contains(inspect, want) {
			t.Errorf("latch inspect:\n%s\nwant %q", inspect, want)
		}
	}
}
