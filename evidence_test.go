package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// evidencePolicy is testPolicy with an authority section, so that delegations can be made.
const evidencePolicy = testPolicy + `
authority:
  grants:
    - id: ops
      subject: { agent: billing-worker }
      actions: ["billing.*", "report.*", "refund.*"]
      expires_at: "2027-01-01T00:00:00Z"
      delegable: true
`

// everyChange makes one of every kind of state change on e's store and returns the ids it made.
type changes struct {
	granted, denied, expired string // approval ids
	revoked, kept            string // delegation ids
	resolution               int64  // the seq of the human resolution's record
}

func everyChange(t *testing.T, e *env) changes {
	t.Helper()
	ctx := agent(t.Context())
	var c changes
	charge := func(id string, fn func(context.Context, Charge) (string, error), opts *latch.Options) error {
		_, err := latch.Protect(e.g, "billing.charge", fn, opts)(ctx, Charge{InvoiceID: id, Amount: 100})
		return err
	}
	ok := func(context.Context, Charge) (string, error) { return "ch", nil }
	lost := func(context.Context, Charge) (string, error) { return "", io.ErrUnexpectedEOF }
	if err := charge("inv_ok", ok, nil); err != nil {
		t.Fatal(err)
	}
	if err := charge("inv_nx", func(context.Context, Charge) (string, error) { return "", latch.NotExecuted(errors.New("declined")) }, nil); !errors.Is(err, latch.ErrNotExecuted) {
		t.Fatal(err)
	}
	if err := charge("inv_nx", ok, nil); err != nil { // a renewal
		t.Fatal(err)
	}
	// Ambiguous, resolved by a person with a result and a note.
	if err := charge("inv_amb", lost, nil); !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatal(err)
	}
	if _, err := e.g.ResolveEffect(t.Context(), &store.ResolveRequest{Key: "charge:inv_amb", To: latch.StateCommitted, By: "cli:ana",
		Result: json.RawMessage(`"ch_amb"`), Note: "the provider shows it"}); err != nil {
		t.Fatal(err)
	}
	for r, err := range e.g.Store().Receipts(t.Context(), store.ReceiptFilter{Last: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		c.resolution = r.Seq
	}
	// Ambiguous, resolved by a reconcile hook.
	if err := charge("inv_hook", lost, nil); !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatal(err)
	}
	hook := func(context.Context, *latch.Attempt) (latch.Outcome, any, error) {
		return latch.OutcomeNotExecuted, nil, nil
	}
	if err := charge("inv_hook", ok, &latch.Options{Reconcile: hook}); err != nil {
		t.Fatal(err)
	}
	// A lapsed lease met by a contender, then the holder's late outcome.
	if err := charge("inv_late", func(ctx context.Context, ch Charge) (string, error) {
		e.clock.Add(latch.DefaultLease + time.Second)
		if err := charge("inv_late", ok, nil); !errors.Is(err, latch.ErrAmbiguousEffect) {
			t.Errorf("contender = %v, want ErrAmbiguousEffect", err)
		}
		return "ch_late", nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	// An outcome that conflicts with a resolution, then resolved again.
	_ = charge("inv_conf", func(ctx context.Context, ch Charge) (string, error) {
		e.clock.Add(latch.DefaultLease + time.Second)
		_ = charge("inv_conf", ok, nil)
		if _, err := e.g.ResolveEffect(ctx, &store.ResolveRequest{Key: "charge:inv_conf", To: latch.StateFailed, By: "cli:ana"}); err != nil {
			t.Error(err)
		}
		return "ch_conf", nil
	}, nil)
	if _, err := e.g.ResolveEffect(t.Context(), &store.ResolveRequest{Key: "charge:inv_conf", To: latch.StateCommitted, By: "cli:ana"}); err != nil {
		t.Fatal(err)
	}
	// Approvals: granted and spent, denied, answered after expiry.
	request := func(id string) string {
		_, err := latch.Protect(e.g, "refund.issue", func(context.Context, map[string]any) (string, error) { return "rf", nil }, nil)(
			ctx, map[string]any{"refund_id": id})
		var req *latch.ApprovalRequiredError
		if !errors.As(err, &req) {
			t.Fatalf("refund %s = %v, want ApprovalRequiredError", id, err)
		}
		return req.ApprovalID
	}
	c.granted, c.denied, c.expired = request("rf_1"), request("rf_2"), request("rf_3")
	if _, err := e.g.Approve(t.Context(), c.granted, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := latch.Protect(e.g, "refund.issue", func(context.Context, map[string]any) (string, error) { return "rf", nil }, nil)(
		latch.WithApproval(ctx, c.granted), map[string]any{"refund_id": "rf_1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.g.Deny(t.Context(), c.denied, "bob"); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(latch.DefaultApprovalTTL + time.Minute)
	if _, err := e.g.Approve(t.Context(), c.expired, "alice"); err == nil {
		t.Fatal("an expired request was approved")
	}
	// Delegations: one revoked, one kept.
	child := []byte("subject: { agent: helper }\nactions: [report.read]\nexpires_at: \"2026-12-31T00:00:00Z\"\n")
	for _, id := range []*string{&c.revoked, &c.kept} {
		d, err := e.g.Delegate(t.Context(), "ops", child, latch.Principal{Agent: "billing-worker"})
		if err != nil {
			t.Fatal(err)
		}
		*id = d.ID
	}
	if _, err := e.g.Revoke(t.Context(), c.revoked, "cli:carol"); err != nil {
		t.Fatal(err)
	}
	return c
}

// oneBreak verifies e's store and requires exactly one break, of kind, at seq, naming subject
// (for state_diverged) and with both values containing chain and table.
func oneBreak(t *testing.T, e *env, what, kind string, seq int64, subject, chain, table string) {
	t.Helper()
	rep, err := store.VerifyChain(t.Context(), e.g.Store())
	if err != nil {
		t.Fatalf("%s: VerifyChain = %v", what, err)
	}
	if rep.OK || len(rep.Breaks) != 1 {
		t.Fatalf("%s: VerifyChain = %+v, want exactly one %s", what, rep.Breaks, kind)
	}
	b := rep.Breaks[0]
	if b.Kind != kind || b.Seq != seq || b.Subject != subject || !strings.Contains(b.Chain, chain) || !strings.Contains(b.Table, table) {
		t.Errorf("%s: break %+v, want %s at seq %d on %q, chain %q, table %q", what, b, kind, seq, subject, chain, table)
	}
}

func lastSeqOf(t *testing.T, e *env, f store.ReceiptFilter) int64 {
	t.Helper()
	var seq int64
	for r, err := range e.g.Store().Receipts(t.Context(), f) {
		if err != nil {
			t.Fatal(err)
		}
		if st, err := receipt.ReadStates(r.Doc); err == nil && (st.Effect != nil || st.Approval != nil || st.Delegation != nil) {
			seq = r.Seq
		}
	}
	return seq
}

// TestStateCheckedAgainstTheChain: after one of every kind of state change the store verifies;
// each edit made through SQL — an effect's state, an approval's approver, a revocation row, a
// resolution (its record and its row) — is named at its place, and undoing it verifies again.
func TestStateCheckedAgainstTheChain(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, evidencePolicy)
			c := everyChange(t, e)
			rep := verifyChain(t, e.g)
			if s := rep.State; s.Effects != 7 || s.Approvals != 3 || s.Delegations != 2 || s.Unchained != 0 {
				t.Errorf("state checked = %+v, want 7 effects, 3 approvals, 2 delegations, none unchained", *s)
			}
			kinds := map[string]int{}
			for r, err := range e.g.Store().Receipts(t.Context(), store.ReceiptFilter{}) {
				if err != nil {
					t.Fatal(err)
				}
				st, _ := receipt.ReadStates(r.Doc)
				kinds[st.Kind]++
			}
			for _, k := range []string{receipt.KindCall, receipt.KindLateOutcome, receipt.KindOutcomeConflict, receipt.KindApprovalAnswer,
				receipt.KindApprovalExpired, receipt.KindResolution, receipt.KindDelegation, receipt.KindRevocation} {
				if kinds[k] == 0 {
					t.Errorf("no %s record after every kind of change (%v)", k, kinds)
				}
			}
			db := testdb.OpenRaw(t, e.url)

			// An effect's state: a committed refund made failed would run again.
			seq := lastSeqOf(t, e, store.ReceiptFilter{EffectKey: "charge:inv_ok"})
			db.Exec(`UPDATE effects SET state = 'failed' WHERE effect_key = 'charge:inv_ok'`)
			oneBreak(t, e, "effect state edited", receipt.BreakStateDiverged, seq, "effect charge:inv_ok", "committed attempt 1", "failed attempt 1")
			db.Exec(`UPDATE effects SET state = 'committed' WHERE effect_key = 'charge:inv_ok'`)
			verifyChain(t, e.g)

			// An approval's approver.
			seq = lastSeqOf(t, e, store.ReceiptFilter{ApprovalID: c.granted})
			db.Exec(`UPDATE approvals SET approver = 'mallory' WHERE approval_id = ?`, c.granted)
			oneBreak(t, e, "approver edited", receipt.BreakStateDiverged, seq, "approval "+c.granted, "consumed by alice", "consumed by mallory")
			db.Exec(`UPDATE approvals SET approver = 'alice' WHERE approval_id = ?`, c.granted)
			// A denied request made granted.
			seq = lastSeqOf(t, e, store.ReceiptFilter{ApprovalID: c.denied})
			db.Exec(`UPDATE approvals SET status = 'granted' WHERE approval_id = ?`, c.denied)
			oneBreak(t, e, "denial made a grant", receipt.BreakStateDiverged, seq, "approval "+c.denied, "denied by bob", "granted by bob")
			db.Exec(`UPDATE approvals SET status = 'denied' WHERE approval_id = ?`, c.denied)
			verifyChain(t, e.g)

			// A revocation row deleted (the insert-only trigger dropped first, as an attacker would).
			var by string
			var at int64
			db.Query(`SELECT revoked_by, revoked_at FROM revocations WHERE delegation_id = ?`, []any{&by, &at}, c.revoked)
			if backend == "sqlite" {
				db.Exec(`DROP TRIGGER revocations_insert_only_delete`)
			} else {
				db.Exec(`DROP TRIGGER revocations_insert_only ON revocations`)
			}
			db.Exec(`DELETE FROM revocations WHERE delegation_id = ?`, c.revoked)
			seq = 0
			for r, err := range e.g.Store().Receipts(t.Context(), store.ReceiptFilter{}) {
				if err != nil {
					t.Fatal(err)
				}
				if st, _ := receipt.ReadStates(r.Doc); st.Kind == receipt.KindRevocation {
					seq = r.Seq
				}
			}
			oneBreak(t, e, "revocation deleted", receipt.BreakStateDiverged, seq, "delegation "+c.revoked, "revoked by cli:carol", "not revoked")
			db.Exec(`INSERT INTO revocations (delegation_id, revoked_by, revoked_at) VALUES (?, ?, ?)`, c.revoked, by, at)
			verifyChain(t, e.g)

			// A resolution: its row says another resolver, or its record is rewritten.
			db.Exec(`UPDATE effects SET resolved_by = 'cli:mallory' WHERE effect_key = 'charge:inv_amb'`)
			oneBreak(t, e, "resolver edited", receipt.BreakStateDiverged, c.resolution, "effect charge:inv_amb", "resolved by cli:ana", "resolved by cli:mallory")
			db.Exec(`UPDATE effects SET resolved_by = 'cli:ana' WHERE effect_key = 'charge:inv_amb'`)
			var doc string
			if backend == "sqlite" {
				db.Query(`SELECT doc FROM receipts WHERE seq = ?`, []any{&doc}, c.resolution)
				db.Exec(`UPDATE receipts SET doc = ? WHERE seq = ?`, strings.Replace(doc, `"cli:ana"`, `"cli:eve"`, 1), c.resolution)
			} else {
				db.Query(`SELECT convert_from(doc, 'UTF8') FROM receipts WHERE seq = ?`, []any{&doc}, c.resolution)
				db.Exec(`UPDATE receipts SET doc = convert_to(?, 'UTF8') WHERE seq = ?`, strings.Replace(doc, `"cli:ana"`, `"cli:eve"`, 1), c.resolution)
			}
			oneBreak(t, e, "resolution record edited", receipt.BreakContentAltered, c.resolution, "", "", "")
		})
	}
}
