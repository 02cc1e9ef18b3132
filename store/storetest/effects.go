package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// testRetryTable walks every row of docs/guarantees.md#the-retry-table: what a new attempt meets.
func testRetryTable(t *testing.T, b Backend) {
	t.Run("None", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		res := f.reserve(c.reserve(t0))
		wantReserved(t, "first reservation", res)
		want := &store.Effect{
			Key: c.Key, State: store.Executing, Attempt: 1, ActionID: c.ActionID, Action: action, ActionHash: c.Hash,
			LeaseExpiresAt: t0.Add(lease), CreatedAt: t0, UpdatedAt: t0, Arguments: arguments,
		}
		same(t, "ReserveResult.Effect", res.Effect, want)
		same(t, "Effect()", f.effect(c.Key), want)
		if res.Receipt != nil {
			t.Errorf("a reservation wrote receipt %d; only refusals and Record write receipts", res.Receipt.Seq)
		}
	})

	t.Run("Committed", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		before := f.run(c, t0, store.Committed)
		res := f.reserve(c.retry().reserve(t0.Add(time.Hour)))
		wantRefused(t, "reserve a committed key", res, false, "committed")
		wantBlockedReceipt(t, "reserve a committed key", res)
		same(t, "ReserveResult.Effect (carries the stored result)", res.Effect, before)
		same(t, "ReserveResult.Effect.Result", res.Effect.Result, chargeResult)
		same(t, "Effect() after the refusal", f.effect(c.Key), before)
	})

	t.Run("Ambiguous", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		before := f.run(c, t0, store.Ambiguous)
		res := f.reserve(c.retry().reserve(t0.Add(time.Hour)))
		wantRefused(t, "reserve an ambiguous key", res, false, "ambiguous")
		wantBlockedReceipt(t, "reserve an ambiguous key", res)
		same(t, "Effect() after the refusal", f.effect(c.Key), before)
		if n := f.verify(); n != 2 {
			t.Errorf("chain holds %d receipts, want 2 (the Record and the refusal)", n)
		}
	})

	t.Run("FailedRenews", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.run(c, t0, store.Failed)
		c2 := c.retry()
		now := t0.Add(time.Hour)
		res := f.reserve(c2.reserve(now))
		wantReserved(t, "reserve a failed key", res)
		want := &store.Effect{
			Key: c.Key, State: store.Executing, Attempt: 2, ActionID: c2.ActionID, Action: action, ActionHash: c.Hash,
			LeaseExpiresAt: now.Add(lease), CreatedAt: t0, UpdatedAt: now, Arguments: arguments,
		}
		same(t, "renewal", res.Effect, want)
		same(t, "Effect() after the renewal", f.effect(c.Key), want)
	})

	t.Run("AttemptsExhausted", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.run(c, t0, store.Failed)
		c2 := c.retry()
		req := c2.reserve(t0.Add(time.Hour))
		req.MaxAttempts = 2
		res := f.reserve(req)
		wantReserved(t, "attempt 2 of 2", res)
		f.record(c2.record(t0.Add(time.Hour+time.Second), 2, store.Failed))
		before := f.effect(c.Key)

		req = c.retry().reserve(t0.Add(2 * time.Hour))
		req.MaxAttempts = 2
		res = f.reserve(req)
		wantRefused(t, "attempt 3 of 2", res, false, "attempts_exhausted")
		wantBlockedReceipt(t, "attempt 3 of 2", res)
		same(t, "Effect() after exhaustion", f.effect(c.Key), before)
	})

	t.Run("InProgress", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		before := f.reserved(c, t0).Effect
		res := f.reserve(c.retry().reserve(t0.Add(lease - time.Nanosecond)))
		wantRefused(t, "reserve under a live lease", res, false, "in_progress")
		wantBlockedReceipt(t, "reserve under a live lease", res)
		same(t, "ReserveResult.Effect", res.Effect, before)
		same(t, "Effect() after the refusal", f.effect(c.Key), before)
	})

	t.Run("LeaseLapsed", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.reserved(c, t0)
		lapse := t0.Add(lease) // the lease is live strictly before its expiry
		res := f.reserve(c.retry().reserve(lapse))
		wantRefused(t, "reserve after the lease lapsed", res, false, "ambiguous")
		wantBlockedReceipt(t, "reserve after the lease lapsed", res)
		// The lapsed lease is kept: the holder has not reported and may still be acting.
		want := &store.Effect{
			Key: c.Key, State: store.Ambiguous, Attempt: 1, ActionID: c.ActionID, Action: action, ActionHash: c.Hash,
			Error: store.LeaseExpiredError, LeaseExpiresAt: t0.Add(lease), CreatedAt: t0, UpdatedAt: lapse, Arguments: arguments,
		}
		same(t, "ReserveResult.Effect", res.Effect, want)
		same(t, "Effect() (written ambiguous)", f.effect(c.Key), want)

		// Nothing turns it into a retry: the next attempt meets an ambiguous record.
		res = f.reserve(c.retry().reserve(lapse.Add(time.Hour)))
		wantRefused(t, "reserve the lapsed key again", res, false, "ambiguous")
		same(t, "Effect() after the second refusal", f.effect(c.Key), want)
	})

	t.Run("ReadsChangeNothing", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		// A lease that lapsed long ago by any clock.
		past := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		before := f.reserved(c, past).Effect
		evs := f.events(store.EventFilter{})
		for i := range 2 {
			same(t, "Effect() of a lapsed lease", f.effect(c.Key), before)
			same(t, "Effects({})", f.effects(store.EffectFilter{}), []*store.Effect{before})
			same(t, "Effects(executing)", f.effects(store.EffectFilter{State: store.Executing}), []*store.Effect{before})
			if got := f.effects(store.EffectFilter{State: store.Ambiguous}); len(got) != 0 {
				t.Errorf("read %d: Effects(ambiguous) = %v, want none", i, got)
			}
		}
		same(t, "events after reads", f.events(store.EventFilter{}), evs)
		if h := f.head(); h.Seq != 0 {
			t.Errorf("reads wrote receipts: head %+v", h)
		}
	})
}

// testRecord covers holder transitions (docs/guarantees.md#atomicity).
func testRecord(t *testing.T, b Backend) {
	for _, outcome := range []store.State{store.Committed, store.Failed, store.Ambiguous} {
		t.Run("Holder/"+string(outcome), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, b)
			c := newCall("charge:inv_1")
			f.reserved(c, t0)
			now := t0.Add(10 * time.Second)
			req := c.record(now, 1, outcome)
			res := f.record(req)
			if res.Lost {
				t.Fatalf("Record(%s) by the holder: Lost", outcome)
			}
			want := &store.Effect{
				Key: c.Key, State: outcome, Attempt: 1, ActionID: c.ActionID, Action: action, ActionHash: c.Hash,
				Result: req.Result, Error: req.Error, CreatedAt: t0, UpdatedAt: now, Arguments: arguments,
			}
			same(t, "RecordResult.Effect", res.Effect, want)
			same(t, "Effect()", f.effect(c.Key), want)
			if got := docString(t, res.Receipt, "result"); got != string(outcome) {
				t.Errorf("receipt result = %q, want %q", got, outcome)
			}
			if res.Receipt.Seq != 1 {
				t.Errorf("receipt seq = %d, want 1", res.Receipt.Seq)
			}
		})
	}

	t.Run("InvalidOutcomeIsAmbiguous", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.reserved(c, t0)
		req := c.record(t0.Add(time.Second), 1, store.Executing)
		res := f.record(req)
		if got := f.effect(c.Key); got.State != store.Ambiguous {
			t.Errorf("Record(outcome executing): state %s, want ambiguous (unknown is not failed)", got.State)
		}
		if res.Lost {
			t.Errorf("Record(outcome executing) by the holder: Lost")
		}
	})

	t.Run("OtherActionCannotWrite", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		before := f.reserved(c, t0).Effect
		res := f.record(c.retry().record(t0.Add(time.Second), 1, store.Committed))
		if !res.Lost {
			t.Errorf("Record by another action id: Lost = false")
		}
		same(t, "Effect() after another action's Record", f.effect(c.Key), before)
	})

	t.Run("OtherAttemptCannotWrite", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.run(c, t0, store.Failed)
		c2 := c.retry()
		before := f.reserved(c2, t0.Add(time.Hour)).Effect
		// The new holder never holds attempt 1: a Record that says so is not its outcome.
		res := f.record(c2.record(t0.Add(time.Hour+time.Second), 1, store.Committed))
		if !res.Lost {
			t.Errorf("Record by the new holder with the old attempt: Lost = false")
		}
		same(t, "Effect() after Record by the new holder with the old attempt", f.effect(c.Key), before)
	})

	t.Run("NoKey", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("")
		res := f.record(receiptOnly(c, t0, "committed"))
		if res.Lost || res.Effect != nil {
			t.Errorf("Record with no key: Lost = %t, Effect = %+v", res.Lost, res.Effect)
		}
		if res.Receipt.Seq != 1 || docString(t, res.Receipt, "result") != "committed" {
			t.Errorf("Record with no key: receipt %d %s", res.Receipt.Seq, res.Receipt.Doc)
		}
		if es := f.effects(store.EffectFilter{}); len(es) != 0 {
			t.Errorf("Record with no key wrote effects: %v", es)
		}
	})
}

// testExtendLease covers lease extension by the holder of a live lease.
func testExtendLease(t *testing.T, b Backend) {
	t.Run("Holder", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.reserved(c, t0)
		now, until := t0.Add(30*time.Second), t0.Add(5*time.Minute)
		got, err := f.st.ExtendLease(t.Context(), &store.ExtendRequest{Now: now, Key: c.Key, ActionID: c.ActionID, Attempt: 1, Until: until})
		if err != nil {
			t.Fatalf("ExtendLease by the holder = %v", err)
		}
		want := &store.Effect{
			Key: c.Key, State: store.Executing, Attempt: 1, ActionID: c.ActionID, Action: action, ActionHash: c.Hash,
			LeaseExpiresAt: until, CreatedAt: t0, UpdatedAt: now, Arguments: arguments,
		}
		same(t, "ExtendLease result", got, want)
		same(t, "Effect() after ExtendLease", f.effect(c.Key), want)
		// Past the old expiry, the extended lease is still live.
		res := f.reserve(c.retry().reserve(t0.Add(2 * lease)))
		wantRefused(t, "reserve under the extended lease", res, false, "in_progress")
	})

	refusals := []struct {
		name string
		req  func(c call) *store.ExtendRequest
	}{
		{"AfterLapse", func(c call) *store.ExtendRequest {
			return &store.ExtendRequest{Now: t0.Add(lease), Key: c.Key, ActionID: c.ActionID, Attempt: 1, Until: t0.Add(time.Hour)}
		}},
		{"OtherAction", func(c call) *store.ExtendRequest {
			return &store.ExtendRequest{Now: t0.Add(time.Second), Key: c.Key, ActionID: newID("act_"), Attempt: 1, Until: t0.Add(time.Hour)}
		}},
		{"OtherAttempt", func(c call) *store.ExtendRequest {
			return &store.ExtendRequest{Now: t0.Add(time.Second), Key: c.Key, ActionID: c.ActionID, Attempt: 2, Until: t0.Add(time.Hour)}
		}},
		{"NoRecord", func(c call) *store.ExtendRequest {
			return &store.ExtendRequest{Now: t0.Add(time.Second), Key: "charge:none", ActionID: c.ActionID, Attempt: 1, Until: t0.Add(time.Hour)}
		}},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, b)
			c := newCall("charge:inv_1")
			before := f.reserved(c, t0).Effect
			got, err := f.st.ExtendLease(t.Context(), r.req(c))
			if !errors.Is(err, store.ErrLeaseLost) {
				t.Errorf("ExtendLease = %+v, %v; want ErrLeaseLost", got, err)
			}
			same(t, "Effect() after a refused ExtendLease", f.effect(c.Key), before)
		})
	}

	t.Run("AfterCommit", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.run(c, t0, store.Committed)
		_, err := f.st.ExtendLease(t.Context(), &store.ExtendRequest{Now: t0.Add(2 * time.Second), Key: c.Key, ActionID: c.ActionID, Attempt: 1, Until: t0.Add(time.Hour)})
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("ExtendLease after commit = %v, want ErrLeaseLost", err)
		}
	})
}

// testResolution covers docs/guarantees.md#resolving-an-ambiguous-effect: only ambiguous resolves, and what the next attempt meets.
func testResolution(t *testing.T, b Backend) {
	t.Run("ToCommitted", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		before := f.run(c, t0, store.Ambiguous)
		now := t0.Add(time.Hour)
		got, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: now, Key: c.Key, To: store.Committed, By: "cli:ana"})
		if err != nil {
			t.Fatalf("Resolve(committed) = %v", err)
		}
		want := *before
		want.State, want.ResolvedBy, want.UpdatedAt = store.Committed, "cli:ana", now
		same(t, "Resolve result", got, &want)
		same(t, "Effect() after Resolve", f.effect(c.Key), &want)
		evs := f.events(store.EventFilter{EffectKey: c.Key})
		if len(evs) == 0 || evs[len(evs)-1].Kind != store.EventEffectResolved {
			t.Errorf("events after Resolve = %v, want effect_resolved last", kinds(evs))
		}
		res := f.reserve(c.retry().reserve(now.Add(time.Second)))
		wantRefused(t, "reserve after resolving committed", res, false, "committed")
	})

	t.Run("ToFailed", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.run(c, t0, store.Ambiguous)
		now := t0.Add(time.Hour)
		got, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: now, Key: c.Key, To: store.Failed, By: "reconcile:billing.charge"})
		if err != nil {
			t.Fatalf("Resolve(failed) = %v", err)
		}
		if got.State != store.Failed || got.ResolvedBy != "reconcile:billing.charge" {
			t.Errorf("Resolve(failed) = %s by %q", got.State, got.ResolvedBy)
		}
		c2 := c.retry()
		res := f.reserve(c2.reserve(now.Add(time.Second)))
		wantReserved(t, "reserve after resolving failed", res)
		if res.Effect.Attempt != 2 || res.Effect.ActionID != c2.ActionID {
			t.Errorf("renewal after resolving failed: attempt %d holder %s, want 2 %s", res.Effect.Attempt, res.Effect.ActionID, c2.ActionID)
		}
	})

	refused := []struct {
		name  string
		setup func(f *fixture, c call)
		to    store.State
		want  error
	}{
		{"Committed", func(f *fixture, c call) { f.run(c, t0, store.Committed) }, store.Failed, store.ErrNotAmbiguous},
		{"Failed", func(f *fixture, c call) { f.run(c, t0, store.Failed) }, store.Committed, store.ErrNotAmbiguous},
		{"Executing", func(f *fixture, c call) { f.reserved(c, t0.Add(time.Hour-time.Second)) }, store.Committed, store.ErrNotAmbiguous},
		{"Missing", func(f *fixture, c call) {}, store.Committed, store.ErrNotFound},
		{"ToExecuting", func(f *fixture, c call) { f.run(c, t0, store.Ambiguous) }, store.Executing, nil},
	}
	for _, r := range refused {
		t.Run("Refused"+r.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, b)
			c := newCall("charge:inv_1")
			r.setup(f, c)
			before := f.effects(store.EffectFilter{})
			evs := f.events(store.EventFilter{})
			got, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: t0.Add(time.Hour), Key: c.Key, To: r.to, By: "cli:ana"})
			if err == nil || (r.want != nil && !errors.Is(err, r.want)) {
				t.Errorf("Resolve(%s → %s) = %+v, %v; want %v", r.name, r.to, got, err, r.want)
			}
			same(t, "effects after a refused Resolve", f.effects(store.EffectFilter{}), before)
			same(t, "events after a refused Resolve", f.events(store.EventFilter{}), evs)
		})
	}
}
