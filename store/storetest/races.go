package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// race runs fn(i) in n goroutines released at once and returns their results in order.
func race[T any](n int, fn func(i int) (T, error)) ([]T, []error) {
	out := make([]T, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i], errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return out, errs
}

// testRaces covers atomicity under goroutines of one process (docs/guarantees.md#atomicity).
func testRaces(t *testing.T, b Backend) {
	t.Run("AnswerOnce", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hashOf("billing.charge inv_1"), t0)
		answers, errs := race(8, func(i int) (*store.Approval, error) {
			return f.st.AnswerApproval(t.Context(), &store.AnswerRequest{
				Now: t0.Add(time.Minute), ID: a.ID, Grant: i%2 == 0, Approver: fmt.Sprintf("user:approver-%d", i),
			})
		})
		var winner *store.Approval
		for i, err := range errs {
			if err == nil {
				if winner != nil {
					t.Errorf("answer %d won too: %s by %s, and %s by %s", i, answers[i].Status, answers[i].Approver, winner.Status, winner.Approver)
				}
				winner = answers[i]
			}
		}
		if winner == nil {
			t.Fatalf("no answer won: %v", errs)
		}
		for i, err := range errs {
			if err != nil {
				wantAnswerError(t, fmt.Sprintf("losing answer %d", i), err, "already_"+string(winner.Status))
			}
		}
		same(t, "Approval() after the race", f.approval(a.ID), winner)
		evs := f.events(store.EventFilter{ApprovalID: a.ID})
		if len(evs) != 2 {
			t.Errorf("events after the race = %v, want requested and one answer", kinds(evs))
		}
	})

	t.Run("ConsumeOnce", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.granted(hashOf("billing.charge inv_1"))
		calls := make([]call, 8)
		for i := range calls {
			calls[i] = newCall(fmt.Sprintf("charge:inv_%d", i))
			calls[i].Hash, calls[i].ApprovalID = a.ActionHash, a.ID
		}
		results, errs := race(len(calls), func(i int) (*store.ReserveResult, error) {
			return f.st.Reserve(t.Context(), calls[i].reserve(t0.Add(2*time.Minute)))
		})
		winner := -1
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("Reserve %d = %v", i, errs[i])
			}
			if res.Reserved {
				if winner >= 0 {
					t.Errorf("reservations %d and %d both spent approval %s", winner, i, a.ID)
				}
				winner = i
				continue
			}
			wantRefused(t, fmt.Sprintf("losing reservation %d", i), res, true, "consumed")
		}
		if winner < 0 {
			t.Fatalf("no reservation spent the approval")
		}
		if got := f.approval(a.ID); got.Status != store.Consumed || got.ConsumedBy != calls[winner].ActionID {
			t.Errorf("Approval() = %s by %s, want consumed by %s", got.Status, got.ConsumedBy, calls[winner].ActionID)
		}
		if es := f.effects(store.EffectFilter{}); len(es) != 1 || es[0].Key != calls[winner].Key {
			t.Errorf("effects after the race = %v, want only %s", es, calls[winner].Key)
		}
		f.verify()
	})

	t.Run("ReserveOnce", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		calls := make([]call, 16)
		for i := range calls {
			calls[i] = newCall("charge:inv_1")
		}
		results, errs := race(len(calls), func(i int) (*store.ReserveResult, error) {
			return f.st.Reserve(t.Context(), calls[i].reserve(t0))
		})
		winner := -1
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("Reserve %d = %v", i, errs[i])
			}
			if res.Reserved {
				if winner >= 0 {
					t.Errorf("reservations %d and %d both hold charge:inv_1", winner, i)
				}
				winner = i
				continue
			}
			wantRefused(t, fmt.Sprintf("losing reservation %d", i), res, false, "in_progress")
		}
		if winner < 0 {
			t.Fatalf("no reservation won")
		}
		e := f.effect("charge:inv_1")
		if e.State != store.Executing || e.Attempt != 1 || e.ActionID != calls[winner].ActionID {
			t.Errorf("Effect() = %s attempt %d by %s, want executing attempt 1 by %s", e.State, e.Attempt, e.ActionID, calls[winner].ActionID)
		}
		if n := f.verify(); n != 15 {
			t.Errorf("chain holds %d receipts, want 15 (one per refusal)", n)
		}
	})
}

// testProcessRaces races OS processes: the test binary re-executed (see Child).
func testProcessRaces(t *testing.T, b Backend) {
	const n = 8

	t.Run("ReserveOnce", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		dir := t.TempDir()
		specs := make([]childSpec, n)
		for i := range specs {
			specs[i] = childSpec{Role: roleReserve, URL: f.url, Dir: dir, Name: fmt.Sprint(i), Key: "charge:inv_1",
				ActionHash: hashOf("billing.charge inv_1"), Executed: dir + "/executed", Now: t0.UnixNano()}
		}
		out := runChildren(t, specs)
		if len(out.markers) != 1 || len(out.executed) != 1 {
			t.Fatalf("%d processes reserved (markers %v) and %d executed; want exactly one. outcomes: %v",
				len(out.markers), out.markers, len(out.executed), out.outcomes)
		}
		for name, o := range out.outcomes {
			if _, won := out.markers[name]; !won && o != "refused in_progress" {
				t.Errorf("process %s: %s, want refused in_progress", name, o)
			}
		}
		var holder string
		for _, id := range out.markers {
			holder = id
		}
		e := f.effect("charge:inv_1")
		if e.State != store.Executing || e.Attempt != 1 || e.ActionID != holder {
			t.Errorf("Effect() = %s attempt %d by %s, want executing attempt 1 by %s", e.State, e.Attempt, e.ActionID, holder)
		}
		f.verify()
	})

	t.Run("PruneWhileWriting", func(t *testing.T) {
		t.Parallel()
		testPruneWhileProcessesWrite(t, b)
	})

	t.Run("ReserveDistinctKeys", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		dir := t.TempDir()
		specs := make([]childSpec, n)
		for i := range specs {
			key := fmt.Sprintf("charge:inv_%d", i)
			specs[i] = childSpec{Role: roleReserve, URL: f.url, Dir: dir, Name: fmt.Sprint(i), Key: key,
				ActionHash: hashOf("billing.charge " + key), Executed: fmt.Sprintf("%s/executed-%d", dir, i), Now: t0.UnixNano()}
		}
		out := runChildren(t, specs)
		if len(out.markers) != n || len(out.executed) != n {
			t.Errorf("%d processes reserved and %d executed on %d distinct keys; want %d. outcomes: %v",
				len(out.markers), len(out.executed), n, n, out.outcomes)
		}
		if es := f.effects(store.EffectFilter{State: store.Executing}); len(es) != n {
			t.Errorf("Effects(executing) = %d records, want %d", len(es), n)
		}
	})

	t.Run("ConsumeOnce", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.granted(hashOf("billing.charge inv_1"))
		dir := t.TempDir()
		specs := make([]childSpec, n)
		for i := range specs {
			specs[i] = childSpec{Role: roleReserve, URL: f.url, Dir: dir, Name: fmt.Sprint(i), Key: fmt.Sprintf("charge:inv_%d", i),
				ApprovalID: a.ID, ActionHash: a.ActionHash, Executed: dir + "/executed", Now: t0.Add(2 * time.Minute).UnixNano()}
		}
		out := runChildren(t, specs)
		if len(out.markers) != 1 || len(out.executed) != 1 {
			t.Fatalf("%d processes spent approval %s (markers %v), %d executed; want exactly one. outcomes: %v",
				len(out.markers), a.ID, out.markers, len(out.executed), out.outcomes)
		}
		for name, o := range out.outcomes {
			if _, won := out.markers[name]; !won && o != "refused approval consumed" {
				t.Errorf("process %s: %s, want refused approval consumed", name, o)
			}
		}
		var holder string
		for _, id := range out.markers {
			holder = id
		}
		if got := f.approval(a.ID); got.Status != store.Consumed || got.ConsumedBy != holder {
			t.Errorf("Approval() = %s by %s, want consumed by %s", got.Status, got.ConsumedBy, holder)
		}
	})
}
