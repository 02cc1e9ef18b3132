package operator_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
	_ "github.com/latchkit/latch/store/postgres"
	_ "github.com/latchkit/latch/store/sqlite"
)

// budgetPolicy budgets a grant (two metrics), an expired grant, and the action itself per agent.
const budgetPolicy = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    arguments:
      invoice_id: {type: string}
      amount: {type: integer, min: 1}
    decision: allow
    budgets:
      - {metric: count, limit: 3, window: P1D, per: agent}
authority:
  grants:
    - id: ops-billing
      subject: {agent: billing}
      actions: [billing.*]
      expires_at: 2027-06-01T00:00:00Z
      delegable: true
      budgets:
        - {metric: count, limit: 5, window: P1D}
        - {metric: amount, limit: 10000, window: PT1H}
    - id: last-year
      subject: {agent: billing}
      actions: [billing.*]
      expires_at: 2025-01-01T00:00:00Z
      budgets:
        - {metric: count, limit: 5, window: P1D}
`

// delegationGrant is a delegation beneath ops-billing with a tighter count budget.
const delegationGrant = `subject: {agent: billing}
actions: [billing.charge]
expires_at: 2027-01-01T00:00:00Z
budgets:
  - {metric: count, limit: 4, window: P1D}
  - {metric: amount, limit: 8000, window: PT2H}
`

// ledgerFixture is a store with a budget ledger, written through Reserve with Charges and Record
// as the pipeline writes it.
type ledgerFixture struct {
	t   *testing.T
	st  store.Store
	pol *policy.Policy
	now time.Time
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

// call reserves key for agent at at with charges (count 1 and amount 1200 of each budget of
// the grants given, and count 1 of the action's budget for agent), then records outcome (""
// leaves it executing).
func (f *ledgerFixture) call(key, agent string, at time.Time, outcome store.State, grants ...string) {
	f.t.Helper()
	var charges []store.Charge
	for _, g := range grants {
		for _, b := range f.budgetsOf(g) {
			amount := int64(1)
			if b.Metric == "amount" {
				amount = 1200
			}
			// The store checks the charge's own limit: a roomy one, as if the policy's limits were
			// lowered since (the operator reads them from the policy).
			charges = append(charges, store.Charge{Budget: g, Metric: b.Metric, Amount: amount, Limit: 100 * b.Limit, Window: b.Window})
		}
	}
	charges = append(charges, store.Charge{Budget: store.ActionBudget("billing.charge", "agent", agent), Metric: "count", Amount: 1, Limit: 100, Window: 24 * time.Hour})
	actionID := fmt.Sprintf("act_%032x", []byte(key))
	args := json.RawMessage(`{"amount":1200,"invoice_id":"` + key + `"}`)
	draft := func() *receipt.Receipt {
		return &receipt.Receipt{ReceiptID: "rcp_" + actionID[4:], ActionID: actionID, Action: "billing.charge", ActionHash: hashOf(key),
			Arguments: args, Principal: receipt.Principal{Agent: agent}, Environment: "production", Decision: "allow",
			DecisionReason: "decision", EffectKey: "charge:" + key, StartedAt: at, PolicyHash: f.pol.Hash, Mode: "enforce"}
	}
	res, err := f.st.Reserve(f.t.Context(), &store.ReserveRequest{Now: at, ActionID: actionID, Action: "billing.charge", ActionHash: hashOf(key),
		EffectKey: "charge:" + key, Arguments: args, Lease: 10 * 24 * time.Hour, Receipt: draft(), Charges: charges})
	if err != nil || res.Refusal != nil {
		f.t.Fatalf("Reserve(%s) = %+v, %v", key, res, err)
	}
	if outcome == "" {
		return
	}
	rc := draft()
	rc.Result, rc.Attempt, rc.FinishedAt = string(outcome), 1, at
	req := &store.RecordRequest{Now: at, Receipt: rc, EffectKey: "charge:" + key, ActionID: actionID, Attempt: 1, Outcome: outcome}
	switch outcome {
	case store.Committed:
		req.Result = json.RawMessage(`{"charge":"ch_1"}`)
	default:
		req.Error = "context deadline exceeded"
		rc.Error = req.Error
	}
	if _, err := f.st.Record(f.t.Context(), req); err != nil {
		f.t.Fatalf("Record(%s, %s) = %v", key, outcome, err)
	}
}

// budgetsOf are the budgets of a policy grant or of the test's delegations.
func (f *ledgerFixture) budgetsOf(id string) []policy.Budget {
	for _, g := range f.pol.Authority.Grants {
		if g.ID == id {
			return g.Budgets
		}
	}
	g, err := policy.ParseGrant(id, []byte(delegationGrant))
	if err != nil {
		f.t.Fatal(err)
	}
	return g.Budgets
}

func newLedgerFixture(t *testing.T, backend string) *ledgerFixture {
	t.Helper()
	pol, err := policy.Parse("latch.yaml", []byte(budgetPolicy))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), testdb.URL(t, backend, "budgetops"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &ledgerFixture{t: t, st: st, pol: pol, now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
}

// TestBudgetsFromTheLedger: the budgets in force, read from ledger rows the store's Reserve
// wrote: consumed is what is held within each window (a released charge and one older than the
// window do not count), remaining never goes below 0, each held charge says its effect's state
// and whether it waits for a person; an expired grant and a revoked delegation are not in
// force, and an action's budget is listed per principal with rows. Both stores.
func TestBudgetsFromTheLedger(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			f := newLedgerFixture(t, backend)
			ds := f.st.(store.DelegationStore)
			for _, d := range []*store.Delegation{
				{ID: "dlg_live", Parent: "ops-billing", Grant: []byte(delegationGrant), CreatedBy: "billing", CreatedAt: f.now.Add(-48 * time.Hour)},
				{ID: "dlg_gone", Parent: "ops-billing", Grant: []byte(delegationGrant), CreatedBy: "billing", CreatedAt: f.now.Add(-48 * time.Hour)},
			} {
				if err := ds.CreateDelegation(t.Context(), d, nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := ds.RevokeDelegation(t.Context(), &store.RevokeRequest{Now: f.now.Add(-time.Minute), ID: "dlg_gone", By: "cli:alice"}); err != nil {
				t.Fatal(err)
			}
			n := f.now
			f.call("old", "billing", n.Add(-25*time.Hour), store.Committed, "ops-billing", "dlg_live") // left every window
			f.call("k1", "billing", n.Add(-3*time.Hour), store.Committed, "ops-billing", "dlg_live")   // left the amount windows
			f.call("k2", "billing", n.Add(-90*time.Minute), store.Ambiguous, "ops-billing", "dlg_live")
			f.call("k3", "billing", n.Add(-30*time.Minute), store.Failed, "ops-billing", "dlg_live") // released
			f.call("k4", "billing", n.Add(-10*time.Minute), "", "ops-billing", "dlg_live")           // executing
			f.call("k5", "other", n.Add(-5*time.Minute), store.Committed, "ops-billing", "dlg_gone", "last-year")
			f.call("k6", "billing", n.Add(-time.Minute), store.Committed, "ops-billing", "dlg_gone")
			f.call("k7", "billing", n.Add(-time.Minute), store.Committed, "ops-billing")

			o, err := operator.New(&operator.Config{Store: f.st, Policy: f.pol, Now: func() time.Time { return n }})
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.Budgets(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			type row struct {
				Budget, Metric             string
				Consumed, Remaining, Limit int64
				Held                       string
			}
			held := func(b jsonview.Budget) string {
				var s []string
				for _, h := range b.Held {
					x := strings.TrimPrefix(h.EffectKey, "charge:") + "=" + deref(h.State)
					if h.NeedsPerson {
						x += "!"
					}
					s = append(s, x)
				}
				return strings.Join(s, " ")
			}
			var rows []row
			for _, b := range got {
				rows = append(rows, row{b.Budget, b.Metric, b.Consumed, b.Remaining, b.Limit, held(b)})
			}
			want := []row{
				// ops-billing: count over a day k1 k2 k4 k5 k6 k7 (6 of 5: a policy edit can leave more held than the limit);
				// amount over an hour: k4 k5 k6 k7.
				{"ops-billing", "count", 6, 0, 5, "k1=committed k2=ambiguous! k4=executing k5=committed k6=committed k7=committed"},
				{"ops-billing", "amount", 4800, 5200, 10000, "k4=executing k5=committed k6=committed k7=committed"},
				// dlg_live: count k1 k2 k4; amount over two hours k2 k4.
				{"dlg_live", "count", 3, 1, 4, "k1=committed k2=ambiguous! k4=executing"},
				{"dlg_live", "amount", 2400, 5600, 8000, "k2=ambiguous! k4=executing"},
				// the action's own budget, per agent: billing (k1 k2 k4 k6 k7), other (k5).
				{"action:billing.charge:agent:billing", "count", 5, 0, 3, "k1=committed k2=ambiguous! k4=executing k6=committed k7=committed"},
				{"action:billing.charge:agent:other", "count", 1, 2, 3, "k5=committed"},
			}
			if d := cmp.Diff(want, rows); d != "" {
				t.Errorf("Budgets (-want +got):\n%s", d)
			}
			for _, b := range got {
				if b.Budget == "dlg_live" && b.Metric == "count" {
					if b.Kind != "delegation" || deref(b.Grant) != "dlg_live" || b.Window != "P1D" || b.WindowSeconds != 86400 || b.Ratio != 0.75 {
						t.Errorf("dlg_live count = %+v, want a delegation's P1D budget at ratio 0.75", b)
					}
					if h := b.Held[1]; h.Attempt != 1 || h.Amount != 1 || deref(h.ConsumedAt) != "2026-11-29T08:30:00.000Z" || !strings.Contains(h.Why, "resolves") {
						t.Errorf("the ambiguous held charge = %+v", h)
					}
				}
				if b.Kind == "action" && (deref(b.Action) != "billing.charge" || deref(b.Per) != "agent" || b.Grant != nil) {
					t.Errorf("an action's budget = %+v, want action billing.charge per agent, no grant", b)
				}
			}

			// The levels are the same sums, without reading a charge's effect.
			levels, err := o.BudgetLevels(t.Context())
			if err != nil || len(levels) != len(got) {
				t.Fatalf("BudgetLevels = %d, %v", len(levels), err)
			}
			for i := range levels {
				if levels[i].Consumed != got[i].Consumed || len(levels[i].Held) != 0 {
					t.Errorf("BudgetLevels[%d] = %+v, want consumed %d and no held list", i, levels[i], got[i].Consumed)
				}
			}

			// A revoked delegation is not in force, but inspecting it shows what it still holds.
			in, err := o.InspectGrant(t.Context(), "dlg_gone")
			if err != nil {
				t.Fatal(err)
			}
			if in.Live || !strings.Contains(deref(in.NotLive), "authority_revoked") || in.Kind != "delegation" || deref(in.Parent) != "ops-billing" ||
				len(in.Budgets) != 2 || in.Budgets[0].Consumed != 2 {
				t.Errorf("InspectGrant(dlg_gone) = %+v, want not live (revoked) beneath ops-billing, count 2 held", in)
			}
			if in, err := o.InspectGrant(t.Context(), "last-year"); err != nil || in.Live || !strings.Contains(deref(in.NotLive), "authority_expired") || in.Budgets[0].Consumed != 1 {
				t.Errorf("InspectGrant(last-year) = %+v, %v; want an expired grant holding k5", in, err)
			}
			if in, err := o.InspectGrant(t.Context(), "ops-billing"); err != nil || !in.Live || in.Kind != "grant" || len(in.Budgets) != 2 {
				t.Errorf("InspectGrant(ops-billing) = %+v, %v", in, err)
			}
			if _, err := o.InspectGrant(t.Context(), "nope"); !errors.Is(err, operator.ErrNoGrant) {
				t.Errorf("InspectGrant(nope) = %v, want ErrNoGrant", err)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestWatchBudgets: the watch reads at once and then every interval, hands each read over, and
// returns when its context ends (TestMain's goleak check holds it to leaving nothing behind).
func TestWatchBudgets(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t, "sqlite")
	f.call("k1", "billing", f.now.Add(-time.Minute), store.Committed, "ops-billing")
	o, err := operator.New(&operator.Config{Store: f.st, Policy: f.pol, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	reads := make(chan []jsonview.Budget, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.WatchBudgets(ctx, 10*time.Millisecond, func(list []jsonview.Budget, err error) {
			if err != nil {
				t.Errorf("read: %v", err)
			}
			select {
			case reads <- list:
			default:
			}
		})
	}()
	for range 3 {
		select {
		case list := <-reads:
			if len(list) != 3 || list[0].Budget != "ops-billing" || list[0].Consumed != 1 || len(list[0].Held) != 0 {
				t.Fatalf("a watch read = %+v, want the levels (ops-billing count 1, no held list)", list)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the watch read nothing")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("WatchBudgets did not return when its context ended")
	}
}
