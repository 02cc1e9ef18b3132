package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// snapshot is everything a store holds, read through its interface.
type snapshot struct {
	Effects   []*store.Effect
	Approvals []*store.Approval
	Receipts  []receipt.Sealed
	Head      receipt.Head
	Events    []*store.Event
}

// snapshot reads everything; effects and approvals, whose order the interface leaves open, are
// sorted by key and id.
func (f *fixture) snapshot() snapshot {
	f.t.Helper()
	s := snapshot{
		Effects:   f.effects(store.EffectFilter{}),
		Approvals: f.approvals(store.ApprovalFilter{}),
		Receipts:  f.receipts(store.ReceiptFilter{}),
		Head:      f.head(),
		Events:    f.events(store.EventFilter{}),
	}
	slices.SortFunc(s.Effects, func(a, b *store.Effect) int { return strings.Compare(a.Key, b.Key) })
	slices.SortFunc(s.Approvals, func(a, b *store.Approval) int { return strings.Compare(a.ID, b.ID) })
	return s
}

// testDurability writes one of everything, closes the store and opens it again.
func testDurability(t *testing.T, b Backend) {
	url := b.New(t)
	st, err := b.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open(%q) = %v", url, err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			st.Close()
		}
	})
	f := &fixture{t: t, b: b, url: url, st: st}
	a := f.granted(hashOf("billing.charge inv_1"))
	c := newCall("charge:inv_1")
	c.Hash, c.ApprovalID = a.ActionHash, a.ID
	f.run(c, t0, store.Committed)
	f.run(newCall("charge:inv_2"), t0, store.Failed)
	f.run(newCall("charge:inv_3"), t0, store.Ambiguous)
	f.reserved(newCall("charge:inv_4"), t0)
	f.reserve(c.retry().reserve(t0.Add(time.Hour))) // a refusal and its receipt
	f.createApproval(hashOf("pending"), t0)
	before := f.snapshot()
	closed = true
	if err := st.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}

	f.st = openStore(t, b, url)
	same(t, "store after reopen", f.snapshot(), before)
	if n := f.verify(); n != 5 {
		t.Errorf("chain after reopen holds %d receipts, want 5 (the approval's answer, four calls)", n)
	}
	// The chain continues where it stopped.
	res := f.record(receiptOnly(newCall(""), t0.Add(2*time.Hour), "committed"))
	if res.Receipt.Seq != 6 {
		t.Errorf("first receipt after reopen: seq %d, want 6", res.Receipt.Seq)
	}
	f.verify()
}

// testReceiptChain covers docs/guarantees.md#the-chain: one gap-free chain from every writer, verified.
func testReceiptChain(t *testing.T, b Backend) {
	t.Run("OneChain", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		var sealed []receipt.Sealed
		f.reserved(c, t0)
		sealed = append(sealed, f.record(c.record(t0.Add(time.Second), 1, store.Committed)).Receipt)
		res := f.reserve(c.retry().reserve(t0.Add(time.Minute))) // refused committed
		sealed = append(sealed, *res.Receipt)
		u := newCall("charge:inv_2")
		u.ApprovalID = newID("apr_")
		res = f.reserve(u.reserve(t0.Add(2 * time.Minute))) // refused: unknown approval
		sealed = append(sealed, *res.Receipt)
		sealed = append(sealed, f.record(receiptOnly(newCall(""), t0.Add(3*time.Minute), "denied")).Receipt)

		got := f.receipts(store.ReceiptFilter{})
		same(t, "Receipts({})", got, sealed)
		same(t, "seqs", seqs(got), []int64{1, 2, 3, 4})
		if h := f.head(); h.Seq != 4 || h.Hash != sealed[3].Hash {
			t.Errorf("Head() = %+v, want seq 4 %s", h, sealed[3].Hash)
		}
		for i, s := range got {
			wantPrev := receipt.GenesisHash
			if i > 0 {
				wantPrev = got[i-1].Hash
			}
			if p := docString(t, s, "prev_hash"); p != wantPrev {
				t.Errorf("receipt %d prev_hash = %s, want %s", s.Seq, p, wantPrev)
			}
		}
		if n := f.verify(); n != 4 {
			t.Errorf("Verify() walked %d receipts, want 4", n)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		if h := f.head(); h.Seq != 0 {
			t.Errorf("Head() of an empty store = %+v, want seq 0", h)
		}
		if n := f.verify(); n != 0 {
			t.Errorf("Verify() of an empty store walked %d", n)
		}
	})

	t.Run("ConcurrentRecords", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		const workers, each = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		start := make(chan struct{})
		for w := range workers {
			wg.Go(func() {
				<-start
				for i := range each {
					req := receiptOnly(newCall(""), t0.Add(time.Duration(w*each+i)*time.Second), "committed")
					if _, err := f.st.Record(t.Context(), req); err != nil {
						errs <- fmt.Errorf("worker %d record %d: %w", w, i, err)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		got := seqs(f.receipts(store.ReceiptFilter{}))
		want := make([]int64, workers*each)
		for i := range want {
			want[i] = int64(i + 1)
		}
		same(t, "seqs after concurrent Records", got, want)
		if h := f.head(); h.Seq != workers*each {
			t.Errorf("Head().Seq = %d, want %d", h.Seq, workers*each)
		}
		f.verify()
	})

	t.Run("Filters", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		apr := newID("apr_")
		rows := []struct {
			key, approval string
		}{{"k1", apr}, {"k1", ""}, {"k2", apr}, {"k2", ""}, {"k1", ""}}
		var actions []string
		for i, r := range rows {
			c := newCall(r.key)
			c.ApprovalID = r.approval
			actions = append(actions, c.ActionID)
			f.record(receiptOnly(c, t0.Add(time.Duration(i)*time.Minute), "committed"))
		}
		cases := []struct {
			f    store.ReceiptFilter
			want []int64
		}{
			{store.ReceiptFilter{}, []int64{1, 2, 3, 4, 5}},
			{store.ReceiptFilter{ActionID: actions[2]}, []int64{3}},
			{store.ReceiptFilter{ActionID: newID("act_")}, []int64{}},
			{store.ReceiptFilter{EffectKey: "k1"}, []int64{1, 2, 5}},
			{store.ReceiptFilter{ApprovalID: apr}, []int64{1, 3}},
			{store.ReceiptFilter{Since: t0.Add(2 * time.Minute)}, []int64{3, 4, 5}},
			{store.ReceiptFilter{AfterSeq: 3}, []int64{4, 5}},
			{store.ReceiptFilter{Last: 2}, []int64{4, 5}},
			{store.ReceiptFilter{Last: 10}, []int64{1, 2, 3, 4, 5}},
			{store.ReceiptFilter{EffectKey: "k1", Last: 2}, []int64{2, 5}},
			{store.ReceiptFilter{EffectKey: "k1", AfterSeq: 1}, []int64{2, 5}},
			{store.ReceiptFilter{EffectKey: "k2", ApprovalID: apr}, []int64{3}},
			{store.ReceiptFilter{Since: t0.Add(time.Minute), Last: 1, EffectKey: "k2"}, []int64{4}},
		}
		for _, c := range cases {
			same(t, fmt.Sprintf("Receipts(%+v) seqs", c.f), seqs(f.receipts(c.f)), c.want)
		}
		// Breaking out of the stream early releases it: later reads and writes still work.
		for range 3 {
			for _, err := range f.st.Receipts(t.Context(), store.ReceiptFilter{}) {
				if err != nil {
					t.Fatalf("Receipts() = %v", err)
				}
				break
			}
		}
		f.record(receiptOnly(newCall(""), t0.Add(time.Hour), "committed"))
		f.verify()
	})
}

// testEvents covers docs/guarantees.md#events: the request's and the decider's events, in the same transaction,
// in id order.
func testEvents(t *testing.T, b Backend) {
	f := newFixture(t, b)
	head, _ := f.st.(store.EventHead)
	if head != nil {
		if id, err := head.LastEventID(t.Context()); err != nil || id != 0 {
			t.Errorf("LastEventID of an empty log = %d, %v; want 0", id, err)
		}
	}
	c := newCall("charge:inv_1")
	proposed := store.Event{Kind: store.EventActionProposed, Time: t0, ActionID: c.ActionID, EffectKey: c.Key,
		Payload: json.RawMessage(`{"name":"billing.charge"}`)}
	evaluated := store.Event{Kind: store.EventPolicyEvaluated, Time: t0, ActionID: c.ActionID, EffectKey: c.Key,
		Payload: json.RawMessage(`{"decision":"allow","rule":"charge"}`)}
	req := c.reserve(t0)
	req.Events = []store.Event{proposed, evaluated}
	reserved := f.reserve(req)
	rec := c.record(t0.Add(time.Second), 1, store.Committed)
	rec.Events = []store.Event{{Kind: store.EventReconcileStarted, Time: t0.Add(time.Second), ActionID: c.ActionID}}
	recorded := f.record(rec)
	c2 := c.retry()
	f.reserve(c2.reserve(t0.Add(time.Minute))) // refused: committed
	a := f.createApproval(hashOf("x"), t0.Add(2*time.Minute))

	// Paging: after an id, at most a limit, lowest ids first; with an id filter too.
	all := f.events(store.EventFilter{})
	if len(all) < 6 {
		t.Fatalf("%d events in the log, want at least 6", len(all))
	}
	page := f.events(store.EventFilter{AfterID: all[1].ID, Limit: 2})
	if len(page) != 2 || page[0].ID != all[2].ID || page[1].ID != all[3].ID {
		t.Errorf("events after %d, limit 2 = %v, want ids %d and %d", all[1].ID, kinds(page), all[2].ID, all[3].ID)
	}
	if rest := f.events(store.EventFilter{AfterID: all[len(all)-1].ID}); len(rest) != 0 {
		t.Errorf("events after the last id = %v, want none", kinds(rest))
	}
	if got := f.events(store.EventFilter{ActionID: c.ActionID, AfterID: all[2].ID}); len(got) == 0 || got[0].ID <= all[2].ID || got[0].ActionID != c.ActionID {
		t.Errorf("events of the action after id %d = %v", all[2].ID, got)
	}
	if got := f.events(store.EventFilter{Limit: 1}); len(got) != 1 || got[0].ID != all[0].ID {
		t.Errorf("events, limit 1 = %v, want the first", got)
	}

	evs := f.events(store.EventFilter{ActionID: c.ActionID})
	same(t, "kinds for the action", kinds(evs), []string{
		store.EventActionProposed, store.EventPolicyEvaluated, store.EventEffectReserved,
		store.EventReconcileStarted, store.EventExecutionCommitted,
	})
	increasing(t, "events for the action", evs)
	// The results carry the events the transaction wrote, as stored (ids included): sinks
	// receive them from there.
	var returned []*store.Event
	for _, list := range [][]store.Event{reserved.Events, recorded.Events} {
		for i := range list {
			returned = append(returned, &list[i])
		}
	}
	same(t, "events returned by Reserve and Record", returned, evs)
	if len(evs) == 5 {
		for i, want := range []store.Event{proposed, evaluated} {
			got := *evs[i]
			got.ID = 0
			same(t, "request event as stored", got, want)
		}
	}

	all = f.events(store.EventFilter{})
	increasing(t, "all events", all)
	if len(all) != 7 {
		t.Errorf("Events({}) = %v, want 7 events", kinds(all))
	}
	same(t, "kinds for the key", kinds(f.events(store.EventFilter{EffectKey: c.Key})), []string{
		store.EventActionProposed, store.EventPolicyEvaluated, store.EventEffectReserved,
		store.EventExecutionCommitted, store.EventEffectRefused,
	})
	same(t, "kinds for the refused action", kinds(f.events(store.EventFilter{ActionID: c2.ActionID})), []string{store.EventEffectRefused})
	same(t, "kinds for the refused action or the approval (any id matches)",
		kinds(f.events(store.EventFilter{ActionID: c2.ActionID, ApprovalID: a.ID})),
		[]string{store.EventEffectRefused, store.EventApprovalRequested})
	for _, e := range all {
		if e.Time.IsZero() {
			t.Errorf("event %d %s has no time", e.ID, e.Kind)
		}
	}
	if head != nil {
		if id, err := head.LastEventID(t.Context()); err != nil || id != all[len(all)-1].ID {
			t.Errorf("LastEventID = %d, %v; want the newest event's id %d", id, err, all[len(all)-1].ID)
		}
	}
}

// testErrors covers the sentinels of reads.
func testErrors(t *testing.T, b Backend) {
	f := newFixture(t, b)
	if _, err := f.st.Effect(t.Context(), "charge:none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Effect(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := f.st.Approval(t.Context(), newID("apr_")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Approval(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: t0, Key: "charge:none", To: store.Failed, By: "cli:ana"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Resolve(unknown) = %v, want ErrNotFound", err)
	}
	// Close may be called more than once (a program's deferred Close after an explicit one); the
	// fixture's cleanup closes the store again after this.
	if err := f.st.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if err := f.st.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
}

// testWriteTransactions checks the cost of the hot path (docs/guarantees.md#the-pipeline-of-one-call): reserve + record is two write
// transactions, a refusal one, a read none.
func testWriteTransactions(t *testing.T, b Backend) {
	f := newFixture(t, b)
	wc, ok := f.st.(store.WriteCounter)
	if !ok {
		t.Skipf("backend %s does not implement store.WriteCounter", b.Name)
	}
	step := func(what string, want int64, fn func()) {
		t.Helper()
		before := wc.WriteTransactions()
		fn()
		if got := wc.WriteTransactions() - before; got != want {
			t.Errorf("%s: %d write transactions, want %d", what, got, want)
		}
	}
	c := newCall("charge:inv_1")
	step("reserve + record", 2, func() { f.run(c, t0, store.Committed) })
	step("refused reserve", 1, func() { f.reserve(c.retry().reserve(t0.Add(time.Minute))) })
	var a *store.Approval
	step("create approval", 1, func() { a = f.createApproval(hashOf("x"), t0) })
	step("answer approval", 1, func() { f.answer(a.ID, true, t0.Add(time.Minute)) })
	step("reads", 0, func() {
		f.effect(c.Key)
		f.effects(store.EffectFilter{})
		f.approval(a.ID)
		f.approvals(store.ApprovalFilter{})
		f.receipts(store.ReceiptFilter{})
		f.head()
		f.events(store.EventFilter{})
		f.verify()
	})
}
