package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// gate starts n calls of fn at once and makes them one batch: it holds the batcher's lock until
// all n are queued, then lets the first of them lead. The returned function waits for all n.
func gate(t *testing.T, st *Store, n int, fn func(i int)) (wait func()) {
	t.Helper()
	for range cap(st.batch.lock) {
		st.batch.lock <- struct{}{}
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st.batch.mu.Lock()
		queued := len(st.batch.queue)
		st.batch.mu.Unlock()
		if queued == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d writes queued after 10 s", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
	for range cap(st.batch.lock) {
		<-st.batch.lock
	}
	return wg.Wait
}

// openFresh opens a store on a new schema, closed when the test ends.
func openFresh(t *testing.T) *Store {
	t.Helper()
	st, err := Open(t.Context(), newSchemaURL(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// verifyChain checks the whole chain and returns how many receipts it holds.
func verifyChain(t *testing.T, st *Store) int {
	t.Helper()
	ctx := t.Context()
	head, err := st.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := receipt.Verify(st.Receipts(ctx, store.ReceiptFilter{}), head)
	if err != nil || !rep.OK {
		t.Fatalf("Verify() = %+v, %v, want no breaks", rep, err)
	}
	return int(rep.Verified)
}

// Reserves and Records in flight together are committed together: 8 calls cost one commit for
// their reservations and one for their outcomes, each answered as if it had run alone.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openFresh(t)
	const n = 8
	now := time.Now()
	calls := make([]cutCall, n)
	reserved := make([]*store.ReserveResult, n)
	errs := make([]error, n)
	for i := range calls {
		calls[i] = newCutCall(fmt.Sprintf("group:%d", i))
	}
	gate(t, st, n, func(i int) { reserved[i], errs[i] = st.Reserve(ctx, calls[i].reserveReq(now)) })()
	if got := st.WriteTransactions(); got != 1 {
		t.Errorf("WriteTransactions() after %d concurrent reserves = %d, want 1", n, got)
	}
	for i, res := range reserved {
		if errs[i] != nil || !res.Reserved || res.Effect.ActionID != calls[i].actionID || len(res.Events) == 0 {
			t.Fatalf("Reserve #%d = %+v, %v, want reserved by %s with its events", i, res, errs[i], calls[i].actionID)
		}
		for _, e := range res.Events {
			if e.ID == 0 || e.ActionID != calls[i].actionID {
				t.Errorf("Reserve #%d returned event %+v: want an id and its own action id", i, e)
			}
		}
		row, err := st.Effect(ctx, calls[i].key)
		if err != nil || row.State != store.Executing || row.ActionID != calls[i].actionID {
			t.Errorf("effect %s = %+v, %v, want executing by %s", calls[i].key, row, err, calls[i].actionID)
		}
	}

	recorded := make([]*store.RecordResult, n)
	gate(t, st, n, func(i int) {
		recorded[i], errs[i] = st.Record(ctx, calls[i].recordReq(now, reserved[i].Effect.Attempt))
	})()
	if got := st.WriteTransactions(); got != 2 {
		t.Errorf("WriteTransactions() after %d concurrent records = %d, want 2", n, got)
	}
	seqs := map[int64]bool{}
	for i, res := range recorded {
		if errs[i] != nil || res.Lost || res.Effect == nil || res.Document == nil {
			t.Fatalf("Record #%d = %+v, %v, want the outcome recorded", i, res, errs[i])
		}
		if res.Document.Seq != res.Receipt.Seq || res.Document.ActionID != calls[i].actionID {
			t.Errorf("Record #%d returned document seq %d of %s with receipt seq %d", i, res.Document.Seq, res.Document.ActionID, res.Receipt.Seq)
		}
		seqs[res.Receipt.Seq] = true
		got := receiptsOf(t, st, calls[i].actionID)
		if len(got) != 1 || got[0].Seq != res.Receipt.Seq || got[0].Hash != res.Receipt.Hash || string(got[0].Doc) != string(res.Receipt.Doc) {
			t.Errorf("call %d: stored receipts %v, want exactly the one Record returned (seq %d)", i, seqsOf(got), res.Receipt.Seq)
		}
		row, err := st.Effect(ctx, calls[i].key)
		if err != nil || row.State != store.Committed {
			t.Errorf("effect %s = %+v, %v, want committed", calls[i].key, row, err)
		}
	}
	for seq := int64(1); seq <= n; seq++ {
		if !seqs[seq] {
			t.Errorf("no Record returned seq %d: returned %v", seq, seqs)
		}
	}
	if got := verifyChain(t, st); got != n {
		t.Errorf("the chain holds %d receipts, want %d", got, n)
	}

	// Reserves only, two of them refused (their keys are committed): the refusals' receipts are
	// appended by the batch too, after it takes the head with its writes.
	mixed := []cutCall{newCutCall("group:new:0"), newCutCall(calls[0].key), newCutCall("group:new:1"), newCutCall(calls[1].key)}
	gate(t, st, len(mixed), func(i int) { reserved[i], errs[i] = st.Reserve(ctx, mixed[i].reserveReq(now)) })()
	if got := st.WriteTransactions(); got != 3 {
		t.Errorf("WriteTransactions() after 4 concurrent reserves = %d, want 3", got)
	}
	for i := range mixed {
		refused := i%2 == 1
		switch r := reserved[i]; {
		case errs[i] != nil:
			t.Fatalf("Reserve of %s: %v", mixed[i].key, errs[i])
		case r.Reserved == refused, refused && (r.Receipt == nil || r.Document == nil || r.Receipt.Seq != r.Document.Seq):
			t.Errorf("Reserve of %s = %+v, want refused %t with its receipt", mixed[i].key, r, refused)
		}
	}
	if got := verifyChain(t, st); got != n+2 {
		t.Errorf("the chain holds %d receipts, want %d", got, n+2)
	}
}

// Two writes of one key never share a batch: the second is decided from the first's row, as it
// would be alone. Here 4 reserves of one key and 4 of others arrive together: exactly one of the
// four wins its key, the others are refused in_progress, and every other key is reserved.
func TestGroupCommitSameKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openFresh(t)
	now := time.Now()
	calls := make([]cutCall, 8)
	for i := range calls {
		key := "same"
		if i%2 == 1 {
			key = fmt.Sprintf("other:%d", i)
		}
		calls[i] = newCutCall(key)
	}
	res := make([]*store.ReserveResult, len(calls))
	errs := make([]error, len(calls))
	gate(t, st, len(calls), func(i int) { res[i], errs[i] = st.Reserve(ctx, calls[i].reserveReq(now)) })()
	won := 0
	for i, r := range res {
		switch {
		case errs[i] != nil:
			t.Fatalf("Reserve #%d: %v", i, errs[i])
		case calls[i].key != "same" && !r.Reserved:
			t.Errorf("Reserve #%d of its own key %s refused: %+v", i, calls[i].key, r.Refusal)
		case calls[i].key == "same" && r.Reserved:
			won++
		case calls[i].key == "same" && (r.Refusal == nil || r.Refusal.Reason != "in_progress"):
			t.Errorf("Reserve #%d of the shared key = %+v, want reserved or refused in_progress", i, r)
		}
	}
	if won != 1 {
		t.Errorf("%d reserves of the shared key won, want exactly 1", won)
	}
	if got := verifyChain(t, st); got != 3 {
		t.Errorf("the chain holds %d receipts, want 3 (the blocked reserves)", got)
	}
}

// A compare-and-set that loses inside a batch sends every write of the batch back to its own
// transaction: nothing of the batch is committed, and each write is decided again from the rows
// as they now are. Here another transaction moves one holder's lease while the batch waits for
// that row: the batch rolls back, and all three records then commit alone.
func TestGroupCommitConflict(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openFresh(t)
	now := time.Now()
	const n = 3
	calls := make([]cutCall, n)
	reserved := make([]*store.ReserveResult, n)
	for i := range calls {
		calls[i] = newCutCall(fmt.Sprintf("conflict:%d", i))
		var err error
		if reserved[i], err = st.Reserve(ctx, calls[i].reserveReq(now)); err != nil || !reserved[i].Reserved {
			t.Fatalf("Reserve #%d = %+v, %v", i, reserved[i], err)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, st.conn.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE `+st.quoted()+`.effects SET lease_expires_at = lease_expires_at + 1
		WHERE effect_key = $1`, calls[1].key); err != nil {
		t.Fatal(err)
	}
	var pid uint32
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	before := st.WriteTransactions()
	recorded := make([]*store.RecordResult, n)
	errs := make([]error, n)
	wait := gate(t, st, n, func(i int) {
		recorded[i], errs[i] = st.Record(ctx, calls[i].recordReq(now, reserved[i].Effect.Attempt))
	})
	// Commit the lease move only once the batch waits for the row it holds locked.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
			pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch never waited for the locked row")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wait()
	for i, r := range recorded {
		if errs[i] != nil || r.Lost {
			t.Fatalf("Record #%d = %+v, %v, want recorded", i, r, errs[i])
		}
		row, err := st.Effect(ctx, calls[i].key)
		if err != nil || row.State != store.Committed {
			t.Errorf("effect %s = %+v, %v, want committed", calls[i].key, row, err)
		}
	}
	if got := st.WriteTransactions() - before; got != n {
		t.Errorf("%d commits for the records, want %d: the batch must roll back and each record commit alone", got, n)
	}
	if got := verifyChain(t, st); got != n {
		t.Errorf("the chain holds %d receipts, want %d", got, n)
	}
}

// A batch whose COMMIT is cut — never sent, sent and answered, or sent with the reply lost
// before the server may have committed — is settled, never guessed: every write of it is
// reported exactly as the rows say, once. The properties are TestCutCommit's, for batches.
func TestGroupCommitCut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	direct, proxy, proxied, settled := cutStores(t, 8)

	const iterations, n = 30, 4
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var prev *cutCall // a call recorded in the iteration before
	for it := range iterations {
		now = now.Add(time.Second)
		mode := []cutMode{cutBefore, cutAfter, cutSent}[it%3]
		calls := make([]cutCall, n)
		for i := range calls {
			calls[i] = newCutCall(fmt.Sprintf("gcut:%d:%d", it, i))
		}
		what := fmt.Sprintf("iteration %d (cut %s)", it, mode)

		res := make([]*store.ReserveResult, n)
		errs := make([]error, n)
		cuts := proxy.cuts.Load()
		proxy.arm(mode)
		gate(t, proxied, n, func(i int) { res[i], errs[i] = proxied.Reserve(ctx, calls[i].reserveReq(now)) })()
		if proxy.take() != cutNone || proxy.cuts.Load() != cuts+1 {
			t.Fatalf("%s: the proxy cut no COMMIT of the reserves", what)
		}
		for i, c := range calls {
			row, rerr := direct.Effect(ctx, c.key)
			if rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
				t.Fatal(rerr)
			}
			ours := rerr == nil && row.State == store.Executing && row.ActionID == c.actionID
			reported := errs[i] == nil && res[i].Reserved
			if !ours || !reported {
				t.Fatalf("%s: reserve %d reported %+v, %v; the row is %+v: want reserved and reported once", what, i, res[i], errs[i], row)
			}
			evs, err := direct.Events(ctx, store.EventFilter{ActionID: c.actionID})
			if err != nil {
				t.Fatal(err)
			}
			if k := count(evs, store.EventEffectReserved); k != 1 {
				t.Fatalf("%s: reserve %d has %d effect_reserved events, want 1", what, i, k)
			}
		}

		// Half the records are made once (RecordRequest.Once), and beside them goes a second
		// record of a call recorded in the iteration before: whatever becomes of the batch's
		// commit, it is refused, writes nothing, and the others are written once.
		rec := make([]*store.RecordResult, n)
		errs = make([]error, n+1)
		cuts = proxy.cuts.Load()
		proxy.arm([]cutMode{cutBefore, cutAfter, cutSent}[(it+1)%3])
		writes := n
		if prev != nil {
			writes++
		}
		gate(t, proxied, writes, func(i int) {
			if i == n {
				_, errs[i] = proxied.Record(ctx, once(prev.recordReq(now.Add(time.Millisecond), 1), true))
				return
			}
			rec[i], errs[i] = proxied.Record(ctx, once(calls[i].recordReq(now.Add(time.Millisecond), res[i].Effect.Attempt), i%2 == 1))
		})()
		if proxy.take() != cutNone || proxy.cuts.Load() != cuts+1 {
			t.Fatalf("%s: the proxy cut no COMMIT of the records", what)
		}
		if prev != nil {
			if !errors.Is(errs[n], store.ErrRecorded) {
				t.Fatalf("%s: a second record of %s = %v, want ErrRecorded", what, prev.actionID, errs[n])
			}
			if got := receiptsOf(t, direct, prev.actionID); len(got) != 1 {
				t.Fatalf("%s: after a refused second record %s has receipts %v, want 1", what, prev.actionID, seqsOf(got))
			}
		}
		prev = &calls[0]
		for i, c := range calls {
			if errs[i] != nil || rec[i].Lost {
				t.Fatalf("%s: record %d = %+v, %v, want recorded", what, i, rec[i], errs[i])
			}
			got := receiptsOf(t, direct, c.actionID)
			if len(got) != 1 || got[0].Seq != rec[i].Receipt.Seq || got[0].Hash != rec[i].Receipt.Hash {
				t.Fatalf("%s: call %d has receipts %v, want exactly the one Record returned (seq %d)", what, i, seqsOf(got), rec[i].Receipt.Seq)
			}
		}
	}
	if got := verifyChain(t, direct); got != iterations*n {
		t.Errorf("the chain holds %d receipts, want %d", got, iterations*n)
	}
	landed, notLanded := settled.count("lost commit settled: it landed"), settled.count("lost commit settled: it did not land; re-issuing")
	t.Logf("%d batches cut: %d settled as landed, %d as not landed (%d re-issued writes found their batch landed late)",
		proxy.cuts.Load(), landed, notLanded, settled.count("lost commit found landed"))
	if landed+notLanded != 2*iterations || landed == 0 || notLanded == 0 {
		t.Errorf("every cut batch must be settled one way or the other, and both ways must occur")
	}
}

// An effect row that another transaction inserts while a batch of reservations inserts the same
// key fails the batch's insert (a unique violation: the batch inserts with no ON CONFLICT), and
// so the whole batch: nothing of it is committed, and each reservation is decided again alone,
// from the rows as they now are. Here the batch waits on the other transaction's uncommitted row,
// which then commits: that key's reservation finds it held, the two others are reserved.
func TestGroupCommitInsertConflict(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openFresh(t)
	now := time.Now()
	const n = 3
	calls := make([]cutCall, n)
	for i := range calls {
		calls[i] = newCutCall(fmt.Sprintf("insert-conflict:%d", i))
	}
	conn, err := pgx.ConnectConfig(ctx, st.conn.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO `+st.quoted()+`.effects
		(effect_key, state, attempt, action_id, action, action_hash, lease_expires_at, created_at, updated_at)
		VALUES ($1, 'executing', 1, 'elsewhere', 'billing.charge', 'other', $2, $3, $3)`,
		calls[1].key, now.Add(time.Hour).UnixNano(), now.UnixNano()); err != nil {
		t.Fatal(err)
	}
	var pid uint32
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	before := st.WriteTransactions()
	reserved := make([]*store.ReserveResult, n)
	errs := make([]error, n)
	wait := gate(t, st, n, func(i int) {
		reserved[i], errs[i] = st.Reserve(ctx, calls[i].reserveReq(now))
	})
	// Commit the other row only once the batch waits for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
			pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch never waited for the other transaction's row")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wait()
	for i, r := range reserved {
		if errs[i] != nil {
			t.Fatalf("Reserve #%d: %v", i, errs[i])
		}
		row, err := st.Effect(ctx, calls[i].key)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i == 1 && (r.Reserved || row.ActionID != "elsewhere"):
			t.Errorf("Reserve #1 = %+v, effect %+v: want not reserved, the other transaction's row kept", r, row)
		case i != 1 && (!r.Reserved || row.ActionID != calls[i].actionID || row.State != store.Executing):
			t.Errorf("Reserve #%d = %+v, effect %+v: want reserved", i, r, row)
		}
	}
	if got := st.WriteTransactions() - before; got != n {
		t.Errorf("%d commits for the reservations, want %d: the batch must roll back and each reservation commit alone", got, n)
	}
	// The events of the rolled-back batch are gone: each action has the events of its own
	// transaction only.
	for i, c := range calls {
		evs, err := st.Events(ctx, store.EventFilter{ActionID: c.actionID})
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, e := range evs {
			kinds[e.Kind]++
		}
		for kind, k := range kinds {
			if k != 1 {
				t.Errorf("action #%d has %d %s events, want those of one reservation: %v", i, k, kind, kinds)
			}
		}
		if len(evs) == 0 {
			t.Errorf("action #%d has no events", i)
		}
	}
}
