package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

const runsPolicy = `
schema: latch.policy/v1
version: "runs-1"
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
  refund.issue:
    effect: "refund:{refund_id}"
    decision: approve
`

// TestStateCheckInRuns: with the state check writing a run every 3 keys (so that 40 effects make
// many runs, merged), a store verifies and counts every row; an effect edited through SQL, a row
// deleted and an approval's approver edited are each named at their key, exactly once; and with
// no directory to write runs in, verification is an error, not a pass. It does not run in parallel:
// it sets the run limit for the package.
func TestStateCheckInRuns(t *testing.T) {
	defer store.SetRunLimit(3)()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			url := testdb.URL(t, backend, "latch_store")
			p, err := policy.Parse("runs.yaml", []byte(runsPolicy))
			if err != nil {
				t.Fatal(err)
			}
			g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: url})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"})
			type charge struct {
				InvoiceID string `json:"invoice_id"`
			}
			for i := range 40 {
				n := (i * 17) % 40 // keys not in the order they are written
				_, err := latch.Protect(g, "billing.charge", func(context.Context, charge) (string, error) {
					if n%4 == 0 {
						return "", latch.NotExecuted(errors.New("declined"))
					}
					return "ch", nil
				}, nil)(ctx, charge{InvoiceID: fmt.Sprintf("inv_%02d", n)})
				if (err != nil) != (n%4 == 0) {
					t.Fatalf("charge inv_%02d: %v", n, err)
				}
			}
			type refund struct {
				RefundID string `json:"refund_id"`
			}
			issue := latch.Protect(g, "refund.issue", func(context.Context, refund) (string, error) { return "rf", nil }, nil)
			_, err = issue(ctx, refund{"rf_1"})
			var req *latch.ApprovalRequiredError
			if !errors.As(err, &req) {
				t.Fatalf("refund = %v, want approval required", err)
			}
			if _, err := g.Approve(t.Context(), req.ApprovalID, "alice"); err != nil {
				t.Fatal(err)
			}
			if _, err := issue(latch.WithApproval(ctx, req.ApprovalID), refund{"rf_1"}); err != nil {
				t.Fatal(err)
			}

			rep, err := store.VerifyChain(t.Context(), g.Store())
			if err != nil || !rep.OK {
				t.Fatalf("VerifyChain = %+v, %v", rep, err)
			}
			if s := rep.State; s == nil || s.Effects != 41 || s.Approvals != 1 {
				t.Fatalf("state checked = %+v, want 41 effects and 1 approval", s)
			}
			db := testdb.OpenRaw(t, url)
			oneDiverged := func(what, subject, chain, table string) {
				t.Helper()
				rep, err := store.VerifyChain(t.Context(), g.Store())
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if len(rep.Breaks) != 1 || rep.Breaks[0].Kind != receipt.BreakStateDiverged || rep.Breaks[0].Subject != subject ||
					!strings.Contains(rep.Breaks[0].Chain, chain) || !strings.Contains(rep.Breaks[0].Table, table) {
					t.Fatalf("%s: breaks %+v, want one state_diverged on %s (%s / %s)", what, rep.Breaks, subject, chain, table)
				}
			}
			db.Exec(`UPDATE effects SET state = 'failed' WHERE effect_key = 'charge:inv_17'`)
			oneDiverged("a committed effect made failed", "effect charge:inv_17", "committed", "failed")
			db.Exec(`UPDATE effects SET state = 'committed' WHERE effect_key = 'charge:inv_17'`)
			db.Exec(`DELETE FROM effects WHERE effect_key = 'charge:inv_39'`)
			oneDiverged("an effect row deleted", "effect charge:inv_39", "committed", "no record")
			db.Exec(`UPDATE approvals SET approver = 'mallory' WHERE approval_id = ?`, req.ApprovalID)
			rep, err = store.VerifyChain(t.Context(), g.Store())
			if err != nil || len(rep.Breaks) != 2 || rep.Breaks[1].Subject != "approval "+req.ApprovalID {
				t.Fatalf("after the approver's edit: %+v, %v, want the deleted row and the approval", rep.Breaks, err)
			}

			t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
			if _, err := store.VerifyChain(t.Context(), g.Store()); err == nil || !strings.Contains(err.Error(), "temporary run") {
				t.Fatalf("VerifyChain with nowhere to write runs = %v, want an error", err)
			}
		})
	}
}
