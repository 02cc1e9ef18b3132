package operator_test

import (
	"context"
	"iter"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	latch "github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/internal/prefill"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// countingStore is a real store whose Receipts reads are counted by where they start.
type countingStore struct {
	store.Store
	fromStart atomic.Int64 // reads of the whole chain (AfterSeq 0)
}

func (c *countingStore) Receipts(ctx context.Context, f store.ReceiptFilter) iter.Seq2[receipt.Sealed, error] {
	if f.AfterSeq == 0 && f.Since.IsZero() {
		c.fromStart.Add(1)
	}
	return c.Store.Receipts(ctx, f)
}

// TestStatsCountTheChainOnce: requests for the stats of the whole chain that arrive together
// read the chain once — the first count keeps its tally, the ones that waited for it start from
// the tally — and all of them answer the same counts.
func TestStatsCountTheChainOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := latch.OpenStore(ctx, "sqlite:"+filepath.Join(t.TempDir(), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	gen := prefill.New("stats", 0)
	var calls []store.FillCall
	start := time.Now().Add(-time.Hour)
	for i := range int64(2000) {
		calls = gen.Next(calls, i, start.Add(time.Duration(i)*time.Second))
	}
	if err := st.(store.Filler).Fill(ctx, calls); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: st}
	op, err := operator.New(&operator.Config{Store: cs, Keeper: st.(store.TallyKeeper)})
	if err != nil {
		t.Fatal(err)
	}
	const requests = 8
	counted := make([]int, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := op.Stats(ctx, 0)
			if err != nil {
				t.Error(err)
			}
			counted[i] = s.Receipts
		}()
	}
	wg.Wait()
	if n := cs.fromStart.Load(); n != 1 {
		t.Errorf("%d requests together read the whole chain %d times, want once", requests, n)
	}
	every, err := receipt.Tally(st.Receipts(ctx, store.ReceiptFilter{}))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range counted {
		if n != every.Receipts || n < 1900 {
			t.Errorf("request %d counted %d receipts, want %d, about 2,000", i, n, every.Receipts)
		}
	}
}
