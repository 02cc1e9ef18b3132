package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// A batch that appends receipts sends its COMMIT with its writes, before their replies are read.
// When the connection is cut at that COMMIT, the replies are lost with it; a write of a batch
// that landed is then answered with its events read back from the store, and the answer must be
// the events as stored: the same ids, kinds and times, once each.
func TestBatchLostRepliesAnswered(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	direct, proxy, proxied, settled := cutStores(t, 4)
	const iterations, n = 18, 3
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	answered := 0
	for it := range iterations {
		now = now.Add(time.Second)
		mode := []cutMode{cutBefore, cutAfter, cutSent}[it%3]
		what := fmt.Sprintf("iteration %d (cut %s)", it, mode)
		calls := make([]cutCall, n)
		res := make([]*store.ReserveResult, n)
		for i := range calls {
			calls[i] = newCutCall(fmt.Sprintf("lostreply:%d:%d", it, i))
			var err error
			if res[i], err = direct.Reserve(ctx, calls[i].reserveReq(now)); err != nil || !res[i].Reserved {
				t.Fatalf("%s: Reserve %d = %+v, %v", what, i, res[i], err)
			}
		}
		rec := make([]*store.RecordResult, n)
		errs := make([]error, n)
		cuts := proxy.cuts.Load()
		proxy.arm(mode)
		gate(t, proxied, n, func(i int) {
			rec[i], errs[i] = proxied.Record(ctx, calls[i].recordReq(now.Add(time.Millisecond), res[i].Effect.Attempt))
		})()
		if proxy.take() != cutNone || proxy.cuts.Load() != cuts+1 {
			t.Fatalf("%s: the proxy cut no COMMIT of the records", what)
		}
		for i, c := range calls {
			if errs[i] != nil || rec[i].Lost {
				t.Fatalf("%s: record %d = %+v, %v, want recorded", what, i, rec[i], errs[i])
			}
			stored, err := direct.Events(ctx, store.EventFilter{ActionID: c.actionID})
			if err != nil {
				t.Fatal(err)
			}
			byID := map[int64]*store.Event{}
			for _, e := range stored {
				byID[e.ID] = e
			}
			if len(rec[i].Events) == 0 {
				t.Fatalf("%s: record %d answered no events", what, i)
			}
			for _, e := range rec[i].Events {
				s, ok := byID[e.ID]
				if !ok || s.Kind != e.Kind || !s.Time.Equal(e.Time) || s.ActionID != e.ActionID {
					t.Fatalf("%s: record %d answered event %+v; the store holds %+v under that id", what, i, e, s)
				}
				delete(byID, e.ID) // once each
				answered++
			}
		}
	}
	if got := verifyChain(t, direct); got != iterations*n {
		t.Errorf("the chain holds %d receipts, want %d", got, iterations*n)
	}
	landed := settled.count("lost commit settled: it landed") + settled.count("lost commit found landed")
	t.Logf("%d events answered; %d batches or writes found landed after their replies were lost", answered, landed)
	if landed == 0 {
		t.Error("no batch landed with its replies lost: the read-back of its events was not exercised")
	}
}
