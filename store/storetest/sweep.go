package storetest

import (
	"errors"
	"fmt"
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
	t.Run("ReconcileClaims", func(t *testing.T) {
		t.Parallel()
		testReconcileClaims(t, b)
	})
	t.Run("Nudges", func(t *testing.T) {
		t.Parallel()
		testNudges(t, b)
	})
	t.Run("ReconcileClaimRace", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		cl := claimer(t, f.st)
		c := newCall("charge:race-claim")
		f.run(c, t0, store.Ambiguous)
		const n = 8
		var wg sync.WaitGroup
		won := make(chan string, n)
		for i := range n {
			wg.Go(func() {
				holder := fmt.Sprintf("sweeper-%d", i)
				_, err := cl.ClaimReconcile(t.Context(), &store.ClaimRequest{Now: t0.Add(time.Minute), Key: c.Key, Attempt: 1,
					Holder: holder, Hold: time.Minute, Backoff: time.Minute, MaxBackoff: time.Hour})
				switch {
				case err == nil:
					won <- holder
				case !errors.Is(err, store.ErrNothingToSweep):
					t.Errorf("ClaimReconcile(%s) = %v", holder, err)
				}
			})
		}
		wg.Wait()
		close(won)
		var winners []string
		for h := range won {
			winners = append(winners, h)
		}
		if len(winners) != 1 {
			t.Fatalf("%d of %d racing sweepers claimed %s (%v), want 1", len(winners), n, c.Key, winners)
		}
		claims, err := cl.ReconcileClaims(t.Context())
		if err != nil || len(claims) != 1 || claims[0].Holder != winners[0] || claims[0].Tries != 1 {
			t.Errorf("ReconcileClaims() = %+v, %v, want the one claim of %s, try 1", claims, err, winners[0])
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

// testReconcileClaims: a claim is granted only on an ambiguous attempt, keeps other sweepers out
// while held, keeps everyone out until the attempt is due again (with a doubling wait), and
// starts again from one try for a later attempt of the key.
func testReconcileClaims(t *testing.T, b Backend) {
	f := newFixture(t, b)
	cl := claimer(t, f.st)
	ctx := t.Context()
	const hold, backoff, maxBackoff = 30 * time.Second, time.Minute, 3 * time.Minute
	req := func(now time.Time, key string, attempt int, holder string) *store.ClaimRequest {
		return &store.ClaimRequest{Now: now, Key: key, Attempt: attempt, Holder: holder, Hold: hold, Backoff: backoff, MaxBackoff: maxBackoff}
	}
	running, committed := newCall("charge:claim-running"), newCall("charge:claim-committed")
	f.reserved(running, t0)
	f.run(committed, t0, store.Committed)
	for _, key := range []string{running.Key, committed.Key, "charge:claim-none"} {
		if _, err := cl.ClaimReconcile(ctx, req(t0, key, 1, "a")); !errors.Is(err, store.ErrNothingToSweep) {
			t.Errorf("ClaimReconcile(%s, not ambiguous) = %v, want ErrNothingToSweep", key, err)
		}
	}
	c := newCall("charge:claim")
	f.run(c, t0, store.Ambiguous)
	if _, err := cl.ClaimReconcile(ctx, req(t0, c.Key, 2, "a")); !errors.Is(err, store.ErrNothingToSweep) {
		t.Errorf("ClaimReconcile(another attempt) = %v, want ErrNothingToSweep", err)
	}
	for _, bad := range []*store.ClaimRequest{
		{Now: t0, Key: c.Key, Attempt: 1, Holder: "a", Backoff: backoff, MaxBackoff: maxBackoff},             // no hold
		{Now: t0, Key: c.Key, Attempt: 1, Hold: hold, Backoff: backoff, MaxBackoff: maxBackoff},              // no sweeper
		{Now: t0, Key: c.Key, Attempt: 1, Holder: "a", Hold: hold, Backoff: maxBackoff, MaxBackoff: backoff}, // backoff past its maximum
	} {
		if _, err := cl.ClaimReconcile(ctx, bad); err == nil || errors.Is(err, store.ErrNothingToSweep) {
			t.Errorf("ClaimReconcile(%+v) = %v, want an error naming the bad field", bad, err)
		}
	}
	if claims, err := cl.ReconcileClaims(ctx); err != nil || len(claims) != 0 {
		t.Fatalf("ReconcileClaims() after refusals = %+v, %v, want none written", claims, err)
	}
	at := t0.Add(time.Minute)
	got, err := cl.ClaimReconcile(ctx, req(at, c.Key, 1, "a"))
	if err != nil {
		t.Fatalf("ClaimReconcile(ambiguous) = %v", err)
	}
	want := &store.ReconcileClaim{Key: c.Key, Attempt: 1, Holder: "a", Tries: 1, ClaimedAt: at, HeldUntil: at.Add(hold), NextAt: at.Add(backoff)}
	same(t, "first claim", got, want)
	// Held: another sweeper is kept out; past the hold, the attempt is not due until NextAt.
	for _, now := range []time.Time{at, at.Add(hold - time.Nanosecond), at.Add(hold), at.Add(backoff - time.Nanosecond)} {
		if _, err := cl.ClaimReconcile(ctx, req(now, c.Key, 1, "b")); !errors.Is(err, store.ErrNothingToSweep) {
			t.Errorf("ClaimReconcile(at +%v) = %v, want ErrNothingToSweep", now.Sub(at), err)
		}
	}
	// Due: the next ask waits twice as long, then as long as the maximum allows.
	now := at
	for i, wait := range []time.Duration{2 * backoff, maxBackoff, maxBackoff} {
		now = now.Add(want.NextAt.Sub(want.ClaimedAt))
		got, err := cl.ClaimReconcile(ctx, req(now, c.Key, 1, "b"))
		if err != nil {
			t.Fatalf("ClaimReconcile(try %d) = %v", i+2, err)
		}
		want = &store.ReconcileClaim{Key: c.Key, Attempt: 1, Holder: "b", Tries: i + 2, ClaimedAt: now, HeldUntil: now.Add(hold), NextAt: now.Add(wait)}
		same(t, fmt.Sprintf("claim %d", i+2), got, want)
	}
	claims, err := cl.ReconcileClaims(ctx)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "ReconcileClaims()", claims, []*store.ReconcileClaim{want})
	// A later attempt of the key that turns ambiguous is asked about at once, from one try.
	if _, err := f.st.Resolve(ctx, &store.ResolveRequest{Now: now.Add(time.Second), Key: c.Key, To: store.Failed, By: "cli:ana"}); err != nil {
		t.Fatal(err)
	}
	later := now.Add(2 * time.Second)
	again := c.retry()
	res := f.reserved(again, later)
	f.record(again.record(later.Add(time.Second), res.Effect.Attempt, store.Ambiguous))
	if _, err := cl.ClaimReconcile(ctx, req(later.Add(2*time.Second), c.Key, 1, "a")); !errors.Is(err, store.ErrNothingToSweep) {
		t.Errorf("ClaimReconcile(the resolved attempt) = %v, want ErrNothingToSweep", err)
	}
	next := now.Add(hold) // the last claim is no longer held, and the new attempt was never asked
	got, err = cl.ClaimReconcile(ctx, req(next, c.Key, 2, "a"))
	if err != nil {
		t.Fatalf("ClaimReconcile(attempt 2) = %v", err)
	}
	same(t, "claim of attempt 2", got, &store.ReconcileClaim{Key: c.Key, Attempt: 2, Holder: "a", Tries: 1, ClaimedAt: next,
		HeldUntil: next.Add(hold), NextAt: next.Add(backoff)})
}

func claimer(t *testing.T, st store.Store) store.ReconcileClaimer {
	t.Helper()
	cl, ok := st.(store.ReconcileClaimer)
	if !ok {
		t.Fatalf("%T keeps no reconcile claims (store.ReconcileClaimer)", st)
	}
	return cl
}
