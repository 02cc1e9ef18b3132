package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// testTally: the count of the whole chain (store.CountChain) equals receipt.Tally over every
// receipt, whether it starts from a kept tally or not; a kept tally is advanced only forward; a
// count after a prune does not start from a tally of receipts the prune removed.
func testTally(t *testing.T, b Backend) {
	f := newRetentionFixture(t, b)
	ctx := t.Context()
	k, ok := f.st.(store.TallyKeeper)
	if !ok {
		t.Fatalf("backend %s keeps no tally (store.TallyKeeper)", b.Name)
	}
	full := func() receipt.Stats {
		t.Helper()
		s, err := receipt.Tally(f.st.Receipts(ctx, store.ReceiptFilter{}))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	count := func(what string, wantRead int) *store.KeptTally {
		t.Helper()
		got, read, err := store.CountChain(ctx, f.st, k)
		if err != nil {
			t.Fatalf("%s: CountChain: %v", what, err)
		}
		if d := cmp.Diff(full(), got.Stats); d != "" {
			t.Errorf("%s: CountChain differs from a tally of every receipt (-every +counted):\n%s", what, d)
		}
		if read != wantRead {
			t.Errorf("%s: CountChain read %d receipts, want %d", what, read, wantRead)
		}
		return got
	}

	if got, read, err := store.CountChain(ctx, f.st, k); err != nil || read != 0 || got.Stats.Receipts != 0 {
		t.Fatalf("CountChain of an empty store = %+v, %d, %v; want nothing read", got, read, err)
	}
	if kept, err := k.KeptTally(ctx); err != nil || kept != nil {
		t.Fatalf("KeptTally of a new store = %+v, %v; want none", kept, err)
	}
	f.run(newCall("tally-1"), t0, store.Committed)
	f.run(newCall("tally-2"), t0, store.Failed)
	f.record(receiptOnly(newCall(""), t0, "denied"))
	first := count("no tally kept", 3) // a receipt a call
	if err := k.KeepTally(ctx, first); err != nil {
		t.Fatal(err)
	}
	kept, err := k.KeptTally(ctx)
	if err != nil || kept == nil || kept.From != first.From || kept.Through != first.Through {
		t.Fatalf("KeptTally = %+v, %v; want the one kept, %d through %d", kept, err, first.From, first.Through)
	}
	f.run(newCall("tally-3"), t0.Add(time.Minute), store.Ambiguous)
	f.record(receiptOnly(newCall(""), t0.Add(time.Minute), "denied"))
	second := count("from the tally kept", 2)
	if second.From != first.From || second.Through <= first.Through {
		t.Errorf("the second count spans %d through %d, want %d through more than %d", second.From, second.Through, first.From, first.Through)
	}
	if err := k.KeepTally(ctx, second); err != nil {
		t.Fatal(err)
	}
	// A count that raced this one and ended earlier does not replace it.
	if err := k.KeepTally(ctx, first); err != nil {
		t.Fatal(err)
	}
	if kept, err := k.KeptTally(ctx); err != nil || kept == nil || kept.Through != second.Through {
		t.Fatalf("KeptTally after keeping an earlier one = %+v, %v; want through %d", kept, err, second.Through)
	}
	count("nothing appended", 0)
	if err := k.KeepTally(ctx, &store.KeptTally{}); err == nil {
		t.Errorf("KeepTally of an empty tally succeeded")
	}

	// A prune removes receipts the kept tally counted: the next count starts again.
	cp := f.checkpoint(t0.Add(time.Hour))
	f.run(newCall("tally-4"), t0.Add(2*time.Hour), store.Committed)
	if _, err := f.rs.Prune(ctx, &store.PruneRequest{Now: t0.Add(3 * time.Hour), By: "cli:ops", BeforeSeq: cp.Seq}); err != nil {
		t.Fatal(err)
	}
	if kept, err := k.KeptTally(ctx); err != nil || kept != nil {
		t.Errorf("KeptTally after a prune below it = %+v, %v; want none", kept, err)
	}
	all := f.receipts(store.ReceiptFilter{})
	count("after a prune", len(all))
}
