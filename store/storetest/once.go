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

// testRecordOnce covers RecordRequest.Once: an outcome reported from elsewhere is recorded once,
// and a second report — after the first, or racing it from another handle on the store — is
// refused with ErrRecorded and writes nothing.
func testRecordOnce(t *testing.T, b Backend) {
	t.Run("Again", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		keyed := newCall("charge:inv_1")
		f.reserved(keyed, t0)
		first := keyed.record(t0.Add(time.Second), 1, store.Committed)
		first.Once = true
		f.record(first)
		bare := newCall("")
		noKey := receiptOnly(bare, t0.Add(2*time.Second), "committed")
		noKey.Once = true
		f.record(noKey)

		before := f.snapshot()
		for _, outcome := range []store.State{store.Committed, store.Ambiguous, store.Failed} {
			again := keyed.record(t0.Add(3*time.Second), 1, outcome)
			again.Once = true
			if _, err := f.st.Record(t.Context(), again); !errors.Is(err, store.ErrRecorded) {
				t.Errorf("Record(%s) again, once: %v; want ErrRecorded", outcome, err)
			}
		}
		again := receiptOnly(bare, t0.Add(3*time.Second), "committed")
		again.Once = true
		if _, err := f.st.Record(t.Context(), again); !errors.Is(err, store.ErrRecorded) {
			t.Errorf("Record without a key again, once: %v; want ErrRecorded", err)
		}
		if diff := cmp.Diff(before, f.snapshot()); diff != "" {
			t.Errorf("a refused record wrote (-before +after):\n%s", diff)
		}
		// Without Once a second record is written, as the holder's lost outcome it is.
		plain := keyed.record(t0.Add(4*time.Second), 1, store.Committed)
		if res := f.record(plain); !res.Lost {
			t.Errorf("a second record without Once: Lost = false")
		}
	})

	t.Run("NeedsActionID", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		req := receiptOnly(newCall(""), t0, "committed")
		req.Receipt.ActionID = ""
		req.Once = true
		if _, err := f.st.Record(t.Context(), req); !errors.Is(err, store.ErrInvalidInput) {
			t.Errorf("Record once without an action id: %v, want ErrInvalidInput", err)
		}
		if rs := f.receipts(store.ReceiptFilter{}); len(rs) != 0 {
			t.Errorf("refused record wrote %d receipts", len(rs))
		}
	})

	// Four reports of each outcome at once, two through each of two handles on the store (as two
	// processes serving it would): exactly one of each is written.
	t.Run("Racing", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		handles := []store.Store{f.st, openStore(t, b, f.url)}
		const calls = 12
		cs := make([]call, calls)
		for i := range cs {
			key := ""
			if i%2 == 0 {
				key = fmt.Sprintf("charge:inv_%d", i)
			}
			cs[i] = newCall(key)
			if key != "" {
				f.reserved(cs[i], t0)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		written := make([]int, calls)
		for i, c := range cs {
			for r := range 4 {
				wg.Go(func() {
					req := receiptOnly(c, t0.Add(time.Second), "committed")
					if c.Key != "" {
						req = c.record(t0.Add(time.Second), 1, store.Committed)
					}
					req.Once = true
					_, err := handles[r%2].Record(t.Context(), req)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						written[i]++
					case !errors.Is(err, store.ErrRecorded):
						t.Errorf("Record %d (report %d): %v", i, r, err)
					}
				})
			}
		}
		wg.Wait()
		for i, n := range written {
			if n != 1 {
				t.Errorf("call %d: %d of 4 racing reports written, want 1", i, n)
			}
			if rs := f.receipts(store.ReceiptFilter{ActionID: cs[i].ActionID}); len(rs) != 1 {
				t.Errorf("call %d: %d receipts, want 1", i, len(rs))
			}
		}
		if n := f.verify(); n != calls {
			t.Errorf("chain of %d receipts, want %d", n, calls)
		}
	})
}
