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

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/cli"
)

// TestApprovalsShowStateCapture: latch approvals lists, below the table, when the state of a
// request's target was captured, with its fingerprint, and --json carries it as precondition;
// a request without one lists nothing and has precondition null.
func TestApprovalsShowStateCapture(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "latch.yaml")
	doc := "schema: latch.policy/v1\nactions:\n  refund.issue:\n    effect: \"refund:{id}\"\n    decision: approve\n"
	if err := os.WriteFile(pol, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite:" + filepath.Join(dir, "state.db")
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: pol, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "worker"})
	read := func(context.Context, latch.PreconditionRequest) (any, error) {
		return map[string]any{"status": "open"}, nil
	}
	ask := func(id string, opts *latch.Options) string {
		_, err := g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"id":"` + id + `"}`), Options: opts},
			func(context.Context, json.RawMessage) (any, error) { return nil, nil })
		var ar *latch.ApprovalRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("refund %s: %v, want an approval request", id, err)
		}
		return ar.ApprovalID
	}
	with := ask("r1", &latch.Options{Precondition: read})
	without := ask("r2", nil)
	a, err := g.Store().Approval(t.Context(), with)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()

	run := func(args ...string) string {
		var out, errOut bytes.Buffer
		if code := cli.Main(t.Context(), append(args, "--policy", pol, "--store", storeURL), &out, &errOut, func(string) string { return "" }); code != 0 {
			t.Fatalf("latch %s = %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	out := run("approvals")
	if line := with + ": state captured at "; !strings.Contains(out, line) || !strings.Contains(out, a.PreconditionHash) {
		t.Errorf("latch approvals lacks %q and the fingerprint %s:\n%s", line, a.PreconditionHash, out)
	}
	if strings.Contains(out, without+": state captured") {
		t.Errorf("latch approvals lists a capture for a request without one:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(run("approvals", "--json")), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		pc, _ := m["precondition"].(map[string]any)
		switch m["approval_id"] {
		case with:
			if pc == nil || pc["hash"] != a.PreconditionHash || pc["captured_at"] == nil {
				t.Errorf("--json of %s: precondition = %v, want %s with its capture time", with, m["precondition"], a.PreconditionHash)
			}
		case without:
			if m["precondition"] != nil {
				t.Errorf("--json of %s: precondition = %v, want null", without, m["precondition"])
			}
		}
	}
}
