package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch/store"
)

// testSweep: a sweeper writes a lapsed lease ambiguous and an expired approval expired, each
// once, with its event; a live lease, a reported attempt, an answered or spent approval are left
// alone; sweepers racing on one record write it once.
func testSweep(t *testing.T, b Backend) {
	t.Run("LapseLease", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		sw := sweeper(t, f.st)
		c := newCall("charge:sweep")
		res := f.reserved(c, t0)
		req := &store.LapseRequest{Now: t0.Add(lease - time.Second), Key: c.Key, ActionID: c.ActionID, Attempt: res.Effect.Attempt}
		if _, _, err := sw.LapseLease(t.Context(), req); !errors.Is(err, store.ErrNothingToSweep) {
			t.Fatalf("LapseLease(live lease) = %v, want ErrNothingToSweep", err)
		}
		if got := f.effect(c.Key).State; got != store.Executing {
			t.Fatalf("after refused sweep, state = %s, want executing", got)
		}
		req.Now = t0.Add(lease)
		wrong := *req
		wrong.ActionID = newID("act_")
		if _, _, err := sw.LapseLease(t.Context(), &wrong); !errors.Is(err, store.ErrNothingToSweep) {
			t.Fatalf("LapseLease(another holder) = %v, want ErrNothingToSweep", err)
		}
		eff, evs, err := sw.LapseLease(t.Context(), req)
		if err != nil {
			t.Fatalf("LapseLease(lapsed) = %v", err)
		}
		if eff.State != store.Ambiguous || eff.Error != store.LeaseExpiredError || !store.HolderMayAct(eff) {
			t.Errorf("LapseLease = %+v, want ambiguous, lease expired, holder may act", eff)
		}
		if len(evs) != 1 || evs[0].Kind != store.EventExecutionAmbiguous || evs[0].ID == 0 || evs[0].EffectKey != c.Key {
			t.Errorf("LapseLease events = %+v, want one execution_ambiguous with its id", evs)
		}
		if got := f.effect(c.Key); got.State != store.Ambiguous {
			t.Errorf("stored state = %s, want ambiguous", got.State)
		}
		if _, _, err := sw.LapseLease(t.Context(), req); !errors.Is(err, store.ErrNothingToSweep) {
			t.Errorf("second LapseLease = %v, want ErrNothingToSweep", err)
		}
		// The holder's own late outcome still settles it, as after a contender's lapse.
		rec := f.record(c.record(t0.Add(lease+time.Second), res.Effect.Attempt, store.Committed))
		if !rec.Late || rec.Effect.State != store.Committed {
			t.Errorf("late Record after sweep = late %t state %s, want late committed", rec.Late, rec.Effect.State)
		}
	})
	t.Run("ExpireApproval", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		sw := sweeper(t, f.st)
		pending := f.createApproval(hashOf("a"), t0)
		granted := f.granted(hashOf("b"))
		denied := f.createApproval(hashOf("c"), t0)
		f.answer(denied.ID, false, t0.Add(time.Minute))
		late := t0.Add(15 * time.Minute)
		if _, _, err := sw.ExpireApproval(t.Context(), &store.ExpireRequest{Now: late.Add(-time.Second), ID: pending.ID}); !errors.Is(err, store.ErrNothingToSweep) {
			t.Fatalf("ExpireApproval(not yet) = %v, want ErrNothingToSweep", err)
		}
		for _, id := range []string{pending.ID, granted.ID} {
			a, evs, err := sw.ExpireApproval(t.Context(), &store.ExpireRequest{Now: late, ID: id})
			if err != nil {
				t.Fatalf("ExpireApproval(%s) = %v", id, err)
			}
			if a.Status != store.Expired || f.approval(id).Status != store.Expired {
				t.Errorf("ExpireApproval(%s) status = %s, stored %s, want expired", id, a.Status, f.approval(id).Status)
			}
			if len(evs) != 1 || evs[0].Kind != store.EventApprovalInvalidated || evs[0].ApprovalID != id || evs[0].ID == 0 {
				t.Errorf("ExpireApproval(%s) events = %+v", id, evs)
			}
		}
		for _, id := range []string{pending.ID, denied.ID, newID("apr_")} {
			if _, _, err := sw.ExpireApproval(t.Context(), &store.ExpireRequest{Now: late, ID: id}); !errors.Is(err, store.ErrNothingToSweep) {
				t.Errorf("ExpireApproval(%s) = %v, want ErrNothingToSweep", id, err)
			}
		}
		if got := f.approval(denied.ID).Status; got != store.Denied {
			t.Errorf("denied request swept to %s", got)
		}
	})
	t.Run("Race", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		sw := sweeper(t, f.st)
		c := newCall("charge:race-sweep")
		res := f.reserved(c, t0)
		req := &store.LapseRequest{Now: t0.Add(lease), Key: c.Key, ActionID: c.ActionID, Attempt: res.Effect.Attempt}
		const n = 8
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				_, _, err := sw.LapseLease(t.Context(), req)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		wrote := 0
		for err := range errs {
			switch {
			case err == nil:
				wrote++
			case !errors.Is(err, store.ErrNothingToSweep):
				t.Errorf("LapseLease = %v", err)
			}
		}
		if wrote != 1 {
			t.Errorf("%d of %d racing sweepers wrote, want 1", wrote, n)
		}
		evs, err := f.st.Events(t.Context(), store.EventFilter{EffectKey: c.Key})
		if err != nil {
			t.Fatal(err)
		}
		lapsed := 0
		for _, e := range evs {
			if e.Kind == store.EventExecutionAmbiguous {
				lapsed++
			}
		}
		if lapsed != 1 {
			t.Errorf("%d execution_ambiguous events, want 1", lapsed)
		}
	})
	t.Run("Counts", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		ct, ok := f.st.(store.Counter)
		if !ok {
			t.Fatalf("%T does not count its records (store.Counter)", f.st)
		}
		f.run(newCall("charge:1"), t0, store.Committed)
		f.run(newCall("charge:2"), t0, store.Committed)
		f.run(newCall("charge:3"), t0, store.Ambiguous)
		f.reserved(newCall("charge:4"), t0)
		f.createApproval(hashOf("x"), t0)
		f.granted(hashOf("y"))
		got, err := ct.Counts(t.Context())
		if err != nil {
			t.Fatalf("Counts() = %v", err)
		}
		want := &store.Counts{
			Effects:   map[store.State]int64{store.Committed: 2, store.Ambiguous: 1, store.Executing: 1},
			Approvals: map[store.ApprovalStatus]int64{store.Pending: 1, store.Granted: 1},
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("Counts() (-want +got):\n%s", d)
		}
	})
}

func sweeper(t *testing.T, st store.Store) store.Sweeper {
	t.Helper()
	sw, ok := st.(store.Sweeper)
	if !ok {
		t.Fatalf("%T cannot sweep (store.Sweeper)", st)
	}
	return sw
}
