package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// testUnsettled checks EffectFilter.Unsettled, the read that what needs a person is taken from:
// it selects the ambiguous and executing effects and those with an outcome conflict (committed
// or failed), and none of the settled rest.
func testUnsettled(t *testing.T, b Backend) {
	f := newFixture(t, b)
	f.run(newCall("charge:settled_committed"), t0, store.Committed)
	f.run(newCall("charge:settled_failed"), t0, store.Failed)
	f.run(newCall("charge:ambiguous"), t0, store.Ambiguous)
	f.reserved(newCall("charge:b_executing"), t0) // between the others in key order
	f.reserved(newCall("charge:executing"), t0)
	for to, key := range map[store.State]string{store.Failed: "charge:conflict_failed", store.Committed: "charge:conflict_committed"} {
		c := newCall(key)
		at := f.lapsed(c)
		f.resolve(&store.ResolveRequest{Now: at, Key: c.Key, To: to, By: "cli:ana"})
		opposite := store.Committed
		if to == store.Committed {
			opposite = store.Failed
		}
		if res := f.record(c.record(at.Add(time.Second), 1, opposite)); res.Conflict == "" {
			t.Fatalf("Record(%s) contradicting the resolution: no conflict", key)
		}
	}
	got, err := f.st.Effects(t.Context(), store.EffectFilter{Unsettled: true})
	if err != nil {
		t.Fatalf("Effects(Unsettled) = %v", err)
	}
	var keys []string
	for _, e := range got {
		keys = append(keys, e.Key)
	}
	want := []string{"charge:ambiguous", "charge:b_executing", "charge:conflict_committed", "charge:conflict_failed", "charge:executing"}
	if !slices.Equal(keys, want) {
		t.Errorf("Effects(Unsettled) = %q, want %q (in key order)", keys, want)
	}
	// A page at a time, from where the last ended: the same effects, each once, in key order.
	var paged []string
	for after := ""; len(paged) <= len(want); {
		page, err := f.st.Effects(t.Context(), store.EffectFilter{Unsettled: true, After: after, Limit: 2})
		if err != nil {
			t.Fatalf("Effects(Unsettled, After %q, Limit 2) = %v", after, err)
		}
		if len(page) > 2 {
			t.Fatalf("Effects(Unsettled, After %q, Limit 2) = %d effects", after, len(page))
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			paged = append(paged, e.Key)
		}
		after = page[len(page)-1].Key
	}
	if !slices.Equal(paged, want) {
		t.Errorf("Effects(Unsettled) a page of 2 at a time = %q, want %q", paged, want)
	}
	// Unsettled wins over State.
	if got, err := f.st.Effects(t.Context(), store.EffectFilter{Unsettled: true, State: store.Committed}); err != nil || len(got) != len(want) {
		t.Errorf("Effects(Unsettled, State committed) = %d effects, %v; want the %d unsettled", len(got), err, len(want))
	}
}
