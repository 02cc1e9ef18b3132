package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// ledgerCall is one call of the ledger check's store: its key, action id and charges.
type ledgerCall struct {
	key, actionID string
	charges       []store.Charge
}

func (c ledgerCall) hash() string {
	sum := sha256.Sum256([]byte("billing.charge " + c.key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (c ledgerCall) draft(now time.Time) *receipt.Receipt {
	rc := &receipt.Receipt{ReceiptID: fmt.Sprintf("rcp_%032x", now.UnixNano()), ActionID: c.actionID, Action: "billing.charge",
		ActionHash: c.hash(), Principal: receipt.Principal{Agent: "agent:billing"}, Environment: "production", Decision: "allow",
		EffectKey: c.key, StartedAt: now, Mode: "enforce"}
	for _, ch := range c.charges {
		rc.BudgetCharges = append(rc.BudgetCharges, receipt.BudgetCharge{Budget: ch.Budget, Metric: ch.Metric, Amount: ch.Amount,
			Limit: ch.Limit, Window: store.FormatWindow(ch.Window)})
	}
	return rc
}

// TestLedgerCheck: the state check replays the budget ledger from the chain on both stores —
// with the check writing a run every 2 keys, so that the attempts of many keys are merged from
// runs. A store written only through latch verifies; each edit below it (an amount changed, a
// release set or cleared, a row deleted, a row inserted beside a recorded call that charged
// nothing or for an attempt that never was, a live attempt's row released) is named
// state_diverged, once, at its charge. It does not run in parallel: it sets the run limit.
func TestLedgerCheck(t *testing.T) {
	defer store.SetRunLimit(2)()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	count := store.Charge{Budget: "grant:ops", Metric: "count", Amount: 1, Limit: 10, Window: time.Hour}
	cents := store.Charge{Budget: "grant:ops", Metric: "cents", Amount: 500, Limit: 100000, Window: 24 * time.Hour}
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			url := testdb.URL(t, backend, "latch_ledger")
			st, err := store.Open(t.Context(), url, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			now := t0
			seq := 0
			attempt := func(key string, charges []store.Charge, outcome store.State) {
				t.Helper()
				now = now.Add(time.Second)
				seq++
				c := ledgerCall{key: key, actionID: fmt.Sprintf("act_%032x", seq), charges: charges}
				res, err := st.Reserve(t.Context(), &store.ReserveRequest{Now: now, ActionID: c.actionID, Action: "billing.charge",
					ActionHash: c.hash(), EffectKey: key, Lease: time.Hour, Receipt: c.draft(now), Charges: charges})
				if err != nil || !res.Reserved {
					t.Fatalf("reserve %s = %+v, %v", key, res, err)
				}
				if outcome == store.Executing {
					return
				}
				rc := c.draft(now)
				rc.Result, rc.Attempt, rc.FinishedAt = string(outcome), res.Effect.Attempt, now
				if _, err := st.Record(t.Context(), &store.RecordRequest{Now: now, Receipt: rc, EffectKey: key, ActionID: c.actionID,
					Attempt: res.Effect.Attempt, Outcome: outcome}); err != nil {
					t.Fatal(err)
				}
			}
			both := []store.Charge{count, cents}
			attempt("charge:k1", both, store.Committed)
			attempt("charge:k2", both, store.Failed)
			attempt("charge:k3", both, store.Executing)
			attempt("charge:k4", both, store.Failed)
			attempt("charge:k4", both, store.Committed)
			attempt("charge:k5", nil, store.Committed)
			attempt("charge:k6", []store.Charge{count}, store.Ambiguous)
			for i := range 6 {
				attempt(fmt.Sprintf("charge:m%d", i), []store.Charge{count}, store.Committed)
			}
			if _, err := st.Resolve(t.Context(), &store.ResolveRequest{Now: now.Add(time.Minute), Key: "charge:k6", To: store.Failed, By: "cli:ops"}); err != nil {
				t.Fatal(err)
			}
			rep, err := store.VerifyChain(t.Context(), st)
			if err != nil || !rep.OK {
				t.Fatalf("VerifyChain of a store written through latch = %+v, %v", rep, err)
			}

			db := testdb.OpenRaw(t, url)
			oneDiverged := func(what, key string, attempt int, metric, chain, table string) {
				t.Helper()
				rep, err := store.VerifyChain(t.Context(), st)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				subject := fmt.Sprintf("budget charge of effect %s attempt %d, budget grant:ops metric %s", key, attempt, metric)
				if len(rep.Breaks) != 1 || rep.Breaks[0].Kind != receipt.BreakStateDiverged || rep.Breaks[0].Subject != subject ||
					!strings.Contains(rep.Breaks[0].Chain, chain) || !strings.Contains(rep.Breaks[0].Table, table) {
					t.Fatalf("%s: breaks %+v, want one state_diverged on %s (%s / %s)", what, rep.Breaks, subject, chain, table)
				}
			}
			verifies := func(what string) {
				t.Helper()
				if rep, err := store.VerifyChain(t.Context(), st); err != nil || !rep.OK {
					t.Fatalf("after %s: %+v, %v; want the store to verify again", what, rep.Breaks, err)
				}
			}
			row := `effect_key = ? AND attempt = ? AND metric = ?`

			db.Exec(`UPDATE budget_charges SET amount = 499 WHERE `+row, "charge:k1", 1, "cents")
			oneDiverged("an amount lowered", "charge:k1", 1, "cents", "amount 500 of limit 100000 over P1D", "amount 499")
			db.Exec(`UPDATE budget_charges SET amount = 500 WHERE `+row, "charge:k1", 1, "cents")
			verifies("the amount restored")

			db.Exec(`UPDATE budget_charges SET budget_limit = 99 WHERE `+row, "charge:k1", 1, "count")
			oneDiverged("a limit changed", "charge:k1", 1, "count", "limit 10", "limit 99")
			db.Exec(`UPDATE budget_charges SET budget_limit = 10 WHERE `+row, "charge:k1", 1, "count")

			db.Exec(`UPDATE budget_charges SET released_at = 1 WHERE `+row, "charge:k1", 1, "count")
			oneDiverged("a committed call's charge released", "charge:k1", 1, "count", "held", "released")
			db.Exec(`UPDATE budget_charges SET released_at = NULL WHERE `+row, "charge:k1", 1, "count")

			db.Exec(`UPDATE budget_charges SET released_at = NULL WHERE `+row, "charge:k2", 1, "cents")
			oneDiverged("a failed call's release cleared", "charge:k2", 1, "cents", "released", "held")
			db.Exec(`UPDATE budget_charges SET released_at = 5 WHERE `+row, "charge:k2", 1, "cents")

			db.Exec(`UPDATE budget_charges SET released_at = NULL WHERE `+row, "charge:k4", 1, "count")
			oneDiverged("a renewed attempt's release cleared", "charge:k4", 1, "count", "released", "held")
			db.Exec(`UPDATE budget_charges SET released_at = 5 WHERE `+row, "charge:k4", 1, "count")

			db.Exec(`UPDATE budget_charges SET released_at = NULL WHERE `+row, "charge:k6", 1, "count")
			oneDiverged("a resolved-failed call's release cleared", "charge:k6", 1, "count", "released", "held")
			db.Exec(`UPDATE budget_charges SET released_at = 5 WHERE `+row, "charge:k6", 1, "count")

			db.Exec(`UPDATE budget_charges SET released_at = 1 WHERE `+row, "charge:k3", 1, "count")
			oneDiverged("a live attempt's charge released", "charge:k3", 1, "count", "held", "released")
			db.Exec(`UPDATE budget_charges SET released_at = NULL WHERE `+row, "charge:k3", 1, "count")
			verifies("the releases restored")

			db.Exec(`DELETE FROM budget_charges WHERE `+row, "charge:m3", 1, "count")
			oneDiverged("a row deleted", "charge:m3", 1, "count", "amount 1 of limit 10 over PT1H, held", "no row")
			insert := `INSERT INTO budget_charges (effect_key, attempt, budget, metric, amount, budget_limit, window_ns, action_id, consumed_at)
				VALUES (?, ?, 'grant:ops', ?, 1, 10, 3600000000000, 'act_x', 1)`
			db.Exec(insert, "charge:m3", 1, "count")
			verifies("the row put back")

			db.Exec(insert, "charge:k5", 1, "count")
			oneDiverged("a row beside a call that charged nothing", "charge:k5", 1, "count", "no such charge", "amount 1 of limit 10")
			db.Exec(`DELETE FROM budget_charges WHERE `+row, "charge:k5", 1, "count")

			db.Exec(insert, "charge:k1", 1, "tokens")
			oneDiverged("a row of another metric beside a recorded call", "charge:k1", 1, "tokens", "no such charge", "amount 1")
			db.Exec(`DELETE FROM budget_charges WHERE `+row, "charge:k1", 1, "tokens")

			db.Exec(insert, "charge:k4", 3, "count")
			oneDiverged("a row of an attempt that never was", "charge:k4", 3, "count", "no such attempt", "amount 1")
			db.Exec(`DELETE FROM budget_charges WHERE `+row, "charge:k4", 3, "count")

			db.Exec(insert, "charge:zz", 1, "count")
			oneDiverged("a row of an effect that never was", "charge:zz", 1, "count", "no such attempt", "amount 1")
			db.Exec(`DELETE FROM budget_charges WHERE `+row, "charge:zz", 1, "count")
			db.Exec(insert, "charge:a0", 1, "count")
			oneDiverged("a row of an effect before every other", "charge:a0", 1, "count", "no such attempt", "amount 1")
			db.Exec(`DELETE FROM budget_charges WHERE `+row, "charge:a0", 1, "count")
			verifies("every edit undone")
		})
	}
}
