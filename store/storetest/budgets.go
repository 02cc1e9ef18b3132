package storetest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// The budget ledger (docs/budgets.md): a reservation's charges are checked and written in its
// transaction, held until the attempt becomes failed, released then by compare-and-set.

// countCharge is a budget of limit calls per window.
func countCharge(budget string, limit int64, window time.Duration) store.Charge {
	return store.Charge{Budget: budget, Metric: "count", Amount: 1, Limit: limit, Window: window}
}

// charged is a new call under key that makes charges.
func charged(key string, charges ...store.Charge) call {
	c := newCall(key)
	c.Charges = charges
	return c
}

// ledger reads the ledger rows f selects.
func (f *fixture) ledger(flt store.ChargeFilter) []*store.ChargeRecord {
	f.t.Helper()
	bs, ok := f.st.(store.BudgetStore)
	if !ok {
		f.t.Fatalf("the %s store is not a store.BudgetStore", f.b.Name)
	}
	rows, err := bs.Charges(f.t.Context(), flt)
	if err != nil {
		f.t.Fatalf("Charges(%+v) = %v", flt, err)
	}
	return rows
}

// ledgerOf reads the rows of one effect key.
func (f *fixture) ledgerOf(key string) []*store.ChargeRecord {
	f.t.Helper()
	var out []*store.ChargeRecord
	for _, r := range f.ledger(store.ChargeFilter{}) {
		if r.EffectKey == key {
			out = append(out, r)
		}
	}
	return out
}

// wantExhausted checks a budget_exhausted refusal by charge want: its receipt is denied, records
// no charge, and its message names the budget, the metric and the window but no amount.
func wantExhausted(t *testing.T, what string, res *store.ReserveResult, want store.Charge) {
	t.Helper()
	wantRefused(t, what, res, false, store.ReasonBudgetExhausted)
	if res.Refusal.Charge == nil || *res.Refusal.Charge != want {
		t.Errorf("%s: Refusal.Charge = %+v, want %+v", what, res.Refusal.Charge, want)
	}
	d := res.Refusal.Detail
	for _, part := range []string{want.Budget, want.Metric, store.FormatWindow(want.Window)} {
		if !strings.Contains(d, part) {
			t.Errorf("%s: detail %q does not name %q", what, d, part)
		}
	}
	for _, n := range []int64{want.Limit, want.Amount} {
		if strings.Contains(d, strconv.FormatInt(n, 10)) && n > 1 {
			t.Errorf("%s: detail %q states the amount %d", what, d, n)
		}
	}
	if res.Receipt == nil {
		t.Fatalf("%s: no receipt, want a denied one", what)
	}
	m := doc(t, *res.Receipt)
	if m["result"] != receipt.Denied || m["decision"] != "deny" || m["decision_reason"] != store.ReasonBudgetExhausted {
		t.Errorf("%s: receipt result %v decision %v reason %v, want denied, deny, %s", what, m["result"], m["decision"], m["decision_reason"], store.ReasonBudgetExhausted)
	}
	if m["budget_charges"] != nil {
		t.Errorf("%s: receipt budget_charges = %v, want null: nothing was charged", what, m["budget_charges"])
	}
	if got := docString(t, *res.Receipt, "error"); got != res.Refusal.Text() {
		t.Errorf("%s: receipt error = %q, want %q", what, got, res.Refusal.Text())
	}
}

func testBudgets(t *testing.T, b Backend) {
	t.Run("WithinAndOver", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		budget := countCharge("grant:ops", 3, time.Hour)
		for i := range 3 {
			c := charged(fmt.Sprintf("charge:inv_%d", i), budget)
			wantReserved(t, "charge "+strconv.Itoa(i), f.reserve(c.reserve(t0.Add(time.Duration(i)*time.Second))))
		}
		over := charged("charge:inv_3", budget)
		head := f.head()
		res := f.reserve(over.reserve(t0.Add(10 * time.Second)))
		wantExhausted(t, "fourth charge", res, budget)
		f.noEffect(over.Key)
		if rows := f.ledgerOf(over.Key); len(rows) != 0 {
			t.Errorf("ledger rows of the refused call = %+v, want none", rows)
		}
		if h := f.head(); h.Seq != head.Seq+1 {
			t.Errorf("head after the refusal = %d, want %d (its receipt only)", h.Seq, head.Seq+1)
		}
		var refused bool
		for _, e := range f.events(store.EventFilter{EffectKey: over.Key}) {
			refused = refused || e.Kind == store.EventEffectRefused && strings.Contains(string(e.Payload), store.ReasonBudgetExhausted)
		}
		if !refused {
			t.Errorf("events of the refused call lack effect_refused budget_exhausted: %v", kinds(f.events(store.EventFilter{EffectKey: over.Key})))
		}
		rows := f.ledger(store.ChargeFilter{Budget: budget.Budget, Metric: "count"})
		if len(rows) != 3 {
			t.Fatalf("Charges() = %d rows, want 3", len(rows))
		}
		for i, r := range rows {
			want := store.ChargeRecord{Budget: budget.Budget, Metric: "count", Amount: 1, Limit: 3, Window: time.Hour,
				EffectKey: fmt.Sprintf("charge:inv_%d", i), Attempt: 1, ActionID: r.ActionID, ConsumedAt: t0.Add(time.Duration(i) * time.Second)}
			same(t, "row "+strconv.Itoa(i), *r, want)
		}
		// Another budget is its own: the same calls fit it.
		other := charged("charge:inv_4", countCharge("grant:other", 1, time.Hour))
		wantReserved(t, "a charge of another budget", f.reserve(other.reserve(t0.Add(11*time.Second))))
		f.verify()
	})

	t.Run("Amounts", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		cents := func(n int64) store.Charge {
			return store.Charge{Budget: "grant:ops", Metric: "amount_cents", Amount: n, Limit: 1000, Window: 24 * time.Hour}
		}
		wantReserved(t, "400", f.reserve(charged("k1", cents(400)).reserve(t0)))
		wantReserved(t, "another 400", f.reserve(charged("k2", cents(400)).reserve(t0.Add(time.Second))))
		wantExhausted(t, "a third 400", f.reserve(charged("k3", cents(400)).reserve(t0.Add(2*time.Second))), cents(400))
		wantReserved(t, "200, exactly to the limit", f.reserve(charged("k4", cents(200)).reserve(t0.Add(3*time.Second))))
		wantReserved(t, "0", f.reserve(charged("k5", cents(0)).reserve(t0.Add(4*time.Second))))
		wantExhausted(t, "1 past the limit", f.reserve(charged("k6", cents(1)).reserve(t0.Add(5*time.Second))), cents(1))
		f.verify()
	})

	t.Run("FirstRefusingCharge", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		hour, day := countCharge("grant:ops", 2, time.Hour), countCharge("grant:ops", 3, 24*time.Hour)
		parent := countCharge("grant:root", 10, 24*time.Hour)
		// Two windows of one (budget, metric) are two checks of one amount: one row.
		wantReserved(t, "first", f.reserve(charged("k1", hour, day, parent).reserve(t0)))
		if rows := f.ledgerOf("k1"); len(rows) != 2 {
			t.Errorf("ledger rows of a call charged hour and day on one grant, and its parent = %+v, want 2", rows)
		}
		wantReserved(t, "second", f.reserve(charged("k2", hour, day, parent).reserve(t0.Add(time.Minute))))
		wantExhausted(t, "third within the hour", f.reserve(charged("k3", hour, day, parent).reserve(t0.Add(2*time.Minute))), hour)
		wantReserved(t, "third an hour later", f.reserve(charged("k4", hour, day, parent).reserve(t0.Add(61*time.Minute))))
		wantExhausted(t, "fourth in the day", f.reserve(charged("k5", hour, day, parent).reserve(t0.Add(3*time.Hour))), day)
		// The refusal charged none of the charges before the refusing one.
		if rows := f.ledger(store.ChargeFilter{Budget: "grant:root"}); len(rows) != 3 {
			t.Errorf("parent budget rows = %d, want 3 (the refused calls charged nothing)", len(rows))
		}
		f.verify()
	})

	t.Run("RollingWindow", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		budget := countCharge("grant:ops", 1, time.Hour)
		wantReserved(t, "at t0", f.reserve(charged("k1", budget).reserve(t0)))
		wantExhausted(t, "within the window", f.reserve(charged("k2", budget).reserve(t0.Add(59*time.Minute+59*time.Second))), budget)
		// The window is (now − window, now]: a charge consumed exactly a window ago no longer counts.
		wantReserved(t, "a window later", f.reserve(charged("k3", budget).reserve(t0.Add(time.Hour))))
		// A charge consumed after now does not count at now either (the injected clock).
		wantReserved(t, "before both, by the clock", f.reserve(charged("k4", budget).reserve(t0.Add(-time.Minute))))
		f.verify()
	})

	t.Run("ReleaseOnNotExecuted", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		budget := countCharge("grant:ops", 1, time.Hour)
		c := charged("k1", budget)
		f.run(c, t0, store.Failed)
		rows := f.ledgerOf("k1")
		if len(rows) != 1 || !rows[0].ReleasedAt.Equal(t0.Add(time.Second)) {
			t.Fatalf("ledger of a failed attempt = %+v, want one row released at %s", rows, t0.Add(time.Second))
		}
		wantReserved(t, "after the release", f.reserve(charged("k2", budget).reserve(t0.Add(2*time.Second))))
		f.verify()
	})

	t.Run("HeldUnlessFailed", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		budget := countCharge("grant:ops", 10, 24*time.Hour)
		committed, ambiguous, executing, lapsed := charged("committed", budget), charged("ambiguous", budget), charged("executing", budget), charged("lapsed", budget)
		f.run(committed, t0, store.Committed)
		f.run(ambiguous, t0, store.Ambiguous)
		f.reserved(executing, t0)
		f.reserved(lapsed, t0)
		// A contender meets the lapsed lease: the record is written ambiguous, its charge held.
		wantRefused(t, "contender of a lapsed lease", f.reserve(lapsed.retry().reserve(t0.Add(2*lease))), false, "ambiguous")
		if e := f.effect(lapsed.Key); e.State != store.Ambiguous {
			t.Fatalf("lapsed record = %s, want ambiguous", e.State)
		}
		for _, key := range []string{committed.Key, ambiguous.Key, executing.Key, lapsed.Key} {
			rows := f.ledgerOf(key)
			if len(rows) != 1 || !rows[0].ReleasedAt.IsZero() {
				t.Errorf("ledger of %s = %+v, want one held row", key, rows)
			}
		}
		// A resolution to committed holds it; to failed releases it.
		if _, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: t0.Add(time.Hour), Key: ambiguous.Key, To: store.Committed, By: "cli:ops"}); err != nil {
			t.Fatal(err)
		}
		if rows := f.ledgerOf(ambiguous.Key); len(rows) != 1 || !rows[0].ReleasedAt.IsZero() {
			t.Errorf("ledger of an ambiguous attempt resolved committed = %+v, want held", rows)
		}
		at := t0.Add(2 * time.Hour)
		if _, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: at, Key: lapsed.Key, To: store.Failed, By: "cli:ops"}); err != nil {
			t.Fatal(err)
		}
		if rows := f.ledgerOf(lapsed.Key); len(rows) != 1 || !rows[0].ReleasedAt.Equal(at) {
			t.Errorf("ledger of a lapsed attempt resolved failed = %+v, want released at %s", rows, at)
		}
		f.verify()
	})

	t.Run("ReleaseByHook", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := charged("k1", countCharge("grant:ops", 1, 24*time.Hour))
		f.run(c, t0, store.Ambiguous)
		at := t0.Add(time.Minute)
		if _, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: at, Key: c.Key, To: store.Failed, By: "reconcile:" + action, Hook: true}); err != nil {
			t.Fatal(err)
		}
		if rows := f.ledgerOf(c.Key); len(rows) != 1 || !rows[0].ReleasedAt.Equal(at) {
			t.Errorf("ledger after a hook's not_executed = %+v, want released at %s", rows, at)
		}
		f.verify()
	})

	t.Run("ConflictHoldsAgain", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := charged("k1", countCharge("grant:ops", 5, 24*time.Hour))
		res := f.reserved(c, t0)
		// The lease lapses, a person resolves it failed (released), then the holder reports
		// committed: the conflict is resolved committed by a person, and the charge is held
		// again — the consequence happened.
		if _, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: t0.Add(2 * lease), Key: c.Key, To: store.Failed, By: "cli:ops"}); err != nil {
			t.Fatal(err)
		}
		if rows := f.ledgerOf(c.Key); len(rows) != 1 || rows[0].ReleasedAt.IsZero() {
			t.Fatalf("ledger after resolved failed = %+v, want released", rows)
		}
		f.record(c.record(t0.Add(3*lease), res.Effect.Attempt, store.Committed))
		if e := f.effect(c.Key); e.Conflict == "" {
			t.Fatalf("effect after the holder's committed = %+v, want a conflict", e)
		}
		if _, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: t0.Add(4 * lease), Key: c.Key, To: store.Committed, By: "cli:ops"}); err != nil {
			t.Fatal(err)
		}
		if rows := f.ledgerOf(c.Key); len(rows) != 1 || !rows[0].ReleasedAt.IsZero() {
			t.Errorf("ledger after the conflict resolved committed = %+v, want held again", rows)
		}
		f.verify()
	})

	t.Run("Renewal", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		budget := countCharge("grant:ops", 1, 24*time.Hour)
		c := charged("k1", budget)
		f.run(c, t0, store.Failed)
		again := c.retry()
		res := f.reserved(again, t0.Add(time.Minute))
		if res.Effect.Attempt != 2 {
			t.Fatalf("renewal attempt = %d, want 2", res.Effect.Attempt)
		}
		rows := f.ledgerOf(c.Key)
		if len(rows) != 2 || rows[0].Attempt != 1 || rows[0].ReleasedAt.IsZero() || rows[1].Attempt != 2 || !rows[1].ReleasedAt.IsZero() ||
			rows[1].ActionID != again.ActionID {
			t.Fatalf("ledger after a renewal = %+v, want attempt 1 released and attempt 2 held by %s", rows, again.ActionID)
		}
		wantExhausted(t, "another key while attempt 2 holds the budget", f.reserve(charged("k2", budget).reserve(t0.Add(2*time.Minute))), budget)
		// Attempt 2 fails: only its own row is released (attempt 1's keeps its release time).
		f.record(again.record(t0.Add(3*time.Minute), 2, store.Failed))
		rows = f.ledgerOf(c.Key)
		if len(rows) != 2 || !rows[0].ReleasedAt.Equal(t0.Add(time.Second)) || !rows[1].ReleasedAt.Equal(t0.Add(3*time.Minute)) {
			t.Errorf("ledger after attempt 2 failed = %+v, want each released at its own failure", rows)
		}
		f.verify()
	})

	t.Run("WithApproval", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		budget := countCharge("grant:ops", 1, time.Hour)
		wantReserved(t, "first", f.reserve(charged("k1", budget).reserve(t0)))
		c := charged("k2", budget)
		a := f.granted(c.Hash)
		c.ApprovalID = a.ID
		res := f.reserve(c.reserve(t0.Add(2 * time.Minute)))
		wantExhausted(t, "a granted call over budget", res, budget)
		if got := f.approval(a.ID); got.Status != store.Granted {
			t.Errorf("approval after the refusal = %s, want granted: a refused reservation spends nothing", got.Status)
		}
		c2 := charged("k3", countCharge("grant:other", 1, time.Hour))
		a2 := f.granted(c2.Hash)
		c2.ApprovalID = a2.ID
		wantReserved(t, "a granted call within its budget", f.reserve(c2.reserve(t0.Add(2*time.Minute))))
		if rows := f.ledgerOf("k3"); len(rows) != 1 {
			t.Errorf("ledger of a reservation that spent an approval = %+v, want its charge", rows)
		}
		f.verify()
	})

	t.Run("Probe", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		budget := countCharge("grant:ops", 1, time.Hour)
		wantReserved(t, "first", f.reserve(charged("k1", budget).reserve(t0)))
		c := charged("k2", budget)
		a := newApproval(c.Hash, t0.Add(time.Minute))
		res, err := f.st.CreateApproval(t.Context(), &store.ApprovalRequest{Now: t0.Add(time.Minute), Approval: a, Probe: c.reserve(t0.Add(time.Minute))})
		if err != nil {
			t.Fatal(err)
		}
		if res.Refused == nil || res.Approval != nil {
			t.Fatalf("CreateApproval over budget = %+v, want the probe refused and no request", res)
		}
		wantExhausted(t, "probe", res.Refused, budget)
		if _, err := f.st.Approval(t.Context(), a.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Approval(%s) = %v, want ErrNotFound: no request is stored", a.ID, err)
		}
		// Within its budget, the request is stored and nothing is charged: the reservation that
		// spends it will be.
		c3 := charged("k3", countCharge("grant:other", 1, time.Hour))
		a3 := newApproval(c3.Hash, t0.Add(time.Minute))
		res, err = f.st.CreateApproval(t.Context(), &store.ApprovalRequest{Now: t0.Add(time.Minute), Approval: a3, Probe: c3.reserve(t0.Add(time.Minute))})
		if err != nil || res.Refused != nil || res.Approval == nil {
			t.Fatalf("CreateApproval within budget = %+v, %v; want a request", res, err)
		}
		if rows := f.ledger(store.ChargeFilter{Budget: "grant:other"}); len(rows) != 0 {
			t.Errorf("ledger after a probe = %+v, want nothing charged", rows)
		}
		f.verify()
	})

	t.Run("NeedsEffectKey", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := charged("", countCharge("grant:ops", 1, time.Hour))
		a := f.granted(c.Hash)
		c.ApprovalID = a.ID
		head := f.head()
		_, err := f.st.Reserve(t.Context(), c.reserve(t0.Add(2*time.Minute)))
		if !errors.Is(err, store.ErrChargesNeedKey) || !errors.Is(err, store.ErrInvalidInput) {
			t.Fatalf("Reserve with charges and no effect key = %v, want ErrChargesNeedKey", err)
		}
		if got := f.approval(a.ID); got.Status != store.Granted || f.head() != head {
			t.Errorf("after the refused call: approval %s, head %+v (was %+v); want nothing written", got.Status, f.head(), head)
		}
		for _, bad := range []store.Charge{
			{Metric: "count", Amount: 1, Limit: 1, Window: time.Hour},
			{Budget: "g", Amount: 1, Limit: 1, Window: time.Hour},
			{Budget: "g", Metric: "count", Amount: -1, Limit: 1, Window: time.Hour},
			{Budget: "g", Metric: "count", Amount: 1, Limit: -1, Window: time.Hour},
			{Budget: "g", Metric: "count", Amount: 1, Limit: 1},
		} {
			c := charged("k-bad", bad)
			if _, err := f.st.Reserve(t.Context(), c.reserve(t0)); !errors.Is(err, store.ErrInvalidInput) {
				t.Errorf("Reserve with charge %+v = %v, want ErrInvalidInput", bad, err)
			}
		}
		c = charged("k-twice", countCharge("g", 5, time.Hour), store.Charge{Budget: "g", Metric: "count", Amount: 2, Limit: 9, Window: 24 * time.Hour})
		if _, err := f.st.Reserve(t.Context(), c.reserve(t0)); !errors.Is(err, store.ErrInvalidInput) {
			t.Errorf("Reserve charging one (budget, metric) two amounts = %v, want ErrInvalidInput", err)
		}
		f.noEffect("k-bad")
		f.noEffect("k-twice")
	})

	t.Run("Read", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		for i := range 4 {
			cs := []store.Charge{countCharge("grant:a", 10, time.Hour), {Budget: "grant:a", Metric: "cents", Amount: int64(100 * i), Limit: 10000, Window: time.Hour}}
			if i%2 == 1 {
				cs = []store.Charge{countCharge("grant:b", 10, time.Hour)}
			}
			wantReserved(t, "call "+strconv.Itoa(i), f.reserve(charged(fmt.Sprintf("k%d", i), cs...).reserve(t0.Add(time.Duration(3-i)*time.Minute))))
		}
		all := f.ledger(store.ChargeFilter{})
		if len(all) != 6 {
			t.Fatalf("Charges() = %d rows, want 6", len(all))
		}
		for i := 1; i < len(all); i++ {
			if all[i].ConsumedAt.Before(all[i-1].ConsumedAt) {
				t.Errorf("Charges() row %d consumed %s after row %d's %s: want oldest first", i, all[i].ConsumedAt, i-1, all[i-1].ConsumedAt)
			}
		}
		if got := f.ledger(store.ChargeFilter{Budget: "grant:a", Metric: "cents"}); len(got) != 2 || got[0].EffectKey != "k2" || got[1].Amount != 0 {
			t.Errorf("Charges(grant:a cents) = %+v, want k2 then k0", got)
		}
		if got := f.ledger(store.ChargeFilter{Budget: "grant:b"}); len(got) != 2 {
			t.Errorf("Charges(grant:b) = %d rows, want 2", len(got))
		}
		if got := f.ledger(store.ChargeFilter{Metric: "count", Since: t0.Add(time.Minute)}); len(got) != 3 {
			t.Errorf("Charges(count since t0+1m) = %d rows, want 3", len(got))
		}
		if got := f.ledger(store.ChargeFilter{Limit: 2}); len(got) != 2 || got[0].EffectKey != "k3" {
			t.Errorf("Charges(limit 2) = %+v, want the 2 oldest, k3 first", got)
		}
		bs := f.st.(store.BudgetStore)
		if _, err := bs.Charges(t.Context(), store.ChargeFilter{Limit: -1}); !errors.Is(err, store.ErrInvalidInput) {
			t.Errorf("Charges(limit -1) = %v, want ErrInvalidInput", err)
		}
	})

	t.Run("Prune", func(t *testing.T) {
		t.Parallel()
		f := newRetentionFixture(t, b)
		short, long := countCharge("grant:ops", 10, time.Hour), countCharge("grant:ops", 10, 90*24*time.Hour)
		spent, counting, released := charged("spent", short), charged("counting", long), charged("released", long)
		f.run(spent, t0, store.Committed)
		f.run(counting, t0, store.Committed)
		f.run(released, t0, store.Failed)
		f.run(newCall("filler"), t0.Add(time.Minute), store.Committed) // the checkpoint's receipt, kept
		cp := f.checkpoint(t0.Add(time.Hour))
		f.run(newCall("after"), t0.Add(2*time.Hour), store.Committed)
		now := t0.Add(30 * 24 * time.Hour)
		if _, err := f.rs.Prune(t.Context(), &store.PruneRequest{Now: now, By: "cli:ops", Before: cp.SignedAt.Add(time.Millisecond),
			KeepSettled: 24 * time.Hour, Check: func(c *receipt.Checkpoint) error { return c.VerifySignature(f.pub) }}); err != nil {
			t.Fatal(err)
		}
		// The charge whose window has passed and the released one no longer count: their effects
		// go, with their rows. The one still counting keeps its effect and its row, checked
		// against the record the prune carried.
		f.noEffect(spent.Key)
		f.noEffect(released.Key)
		f.effect(counting.Key)
		if rows := f.ledger(store.ChargeFilter{}); len(rows) != 1 || rows[0].EffectKey != counting.Key {
			t.Fatalf("ledger after the prune = %+v, want only %s's row", rows, counting.Key)
		}
		f.verifyFrom(cp.Seq)
		// The key whose effect went runs again from attempt 1, charged afresh.
		again := spent.retry()
		if res := f.reserved(again, now); res.Effect.Attempt != 1 {
			t.Errorf("a pruned key reserved again: attempt %d, want 1", res.Effect.Attempt)
		}
		if rows := f.ledgerOf(spent.Key); len(rows) != 1 || rows[0].ActionID != again.ActionID {
			t.Errorf("ledger of the pruned key reserved again = %+v, want its new charge", rows)
		}
	})

	t.Run("ReleaseRace", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := charged("k1", countCharge("grant:ops", 1, 24*time.Hour))
		f.run(c, t0, store.Ambiguous)
		effects, errs := race(8, func(i int) (*store.Effect, error) {
			return f.st.Resolve(t.Context(), &store.ResolveRequest{Now: t0.Add(time.Duration(i+1) * time.Minute), Key: c.Key, To: store.Failed,
				By: fmt.Sprintf("cli:ops-%d", i)})
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Errorf("resolutions %d and %d both released the charge", winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, store.ErrNotAmbiguous):
				t.Errorf("losing resolution %d = %v, want ErrNotAmbiguous", i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("no resolution won: %v", errs)
		}
		at := effects[winner].UpdatedAt
		if rows := f.ledgerOf(c.Key); len(rows) != 1 || !rows[0].ReleasedAt.Equal(at) {
			t.Errorf("ledger after the race = %+v, want one row released at the winner's %s", rows, at)
		}
		f.verify()
	})

	t.Run("ChargeRace", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		const limit = 5
		budget := countCharge("grant:ops", limit, time.Hour)
		results, errs := race(16, func(i int) (*store.ReserveResult, error) {
			return f.st.Reserve(t.Context(), charged(fmt.Sprintf("k%d", i), budget).reserve(t0))
		})
		admitted := 0
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("Reserve %d = %v", i, errs[i])
			}
			if res.Reserved {
				admitted++
				continue
			}
			wantRefused(t, fmt.Sprintf("reservation %d", i), res, false, store.ReasonBudgetExhausted)
		}
		if admitted != limit || len(f.ledger(store.ChargeFilter{})) != limit || len(f.effects(store.EffectFilter{})) != limit {
			t.Errorf("%d reservations admitted, %d rows, %d effects; want %d of each", admitted, len(f.ledger(store.ChargeFilter{})), len(f.effects(store.EffectFilter{})), limit)
		}
		f.verify()
	})

	t.Run("ProcessRace", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		const n, amount, limit = 4, 2, 5 // limit/amount = 2 admitted
		dir := t.TempDir()
		charge := store.Charge{Budget: "grant:ops", Metric: "cents", Amount: amount, Limit: limit, Window: time.Hour}
		specs := make([]childSpec, n)
		for i := range specs {
			key := fmt.Sprintf("charge:inv_%d", i)
			specs[i] = childSpec{Role: roleReserve, URL: f.url, Dir: dir, Name: fmt.Sprint(i), Key: key,
				ActionHash: hashOf(action + " " + key), Executed: fmt.Sprintf("%s/executed-%d", dir, i), Now: t0.UnixNano(),
				Charges: []store.Charge{charge}}
		}
		out := runChildren(t, specs)
		if len(out.markers) != limit/amount {
			t.Errorf("%d of %d processes reserved against a budget that admits %d: %v", len(out.markers), n, limit/amount, out.outcomes)
		}
		for name, o := range out.outcomes {
			if _, won := out.markers[name]; !won && o != "refused "+store.ReasonBudgetExhausted {
				t.Errorf("process %s: %s, want refused %s", name, o, store.ReasonBudgetExhausted)
			}
		}
		rows := f.ledger(store.ChargeFilter{Budget: "grant:ops"})
		var sum int64
		for _, r := range rows {
			sum += r.Amount
		}
		if len(rows) != limit/amount || sum > limit {
			t.Errorf("ledger after the race = %d rows summing %d, want %d rows within %d", len(rows), sum, limit/amount, limit)
		}
		f.verify()
	})
}
