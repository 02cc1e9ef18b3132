package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	zsqlite "zombiezen.com/go/sqlite"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

var batchNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// batchCall is one protected call's requests.
type batchCall struct{ key, act string }

func newBatchCall(i int) batchCall {
	return batchCall{key: fmt.Sprintf("charge:inv_%d", i), act: fmt.Sprintf("act_%d", i)}
}

func (c batchCall) reserve() *store.ReserveRequest {
	return &store.ReserveRequest{Now: batchNow, ActionID: c.act, Action: "billing.charge", ActionHash: "sha256:ab", EffectKey: c.key,
		Lease: time.Minute, Events: []store.Event{{Kind: store.EventActionProposed, ActionID: c.act, EffectKey: c.key}}}
}

func (c batchCall) record() *store.RecordRequest {
	return &store.RecordRequest{Now: batchNow, EffectKey: c.key, ActionID: c.act, Attempt: 1, Outcome: store.Committed,
		Receipt: &receipt.Receipt{ReceiptID: "rcp_" + c.act, ActionID: c.act, EffectKey: c.key, Result: receipt.Committed}}
}

// held holds the writer, as a leader running a batch would, so that the requests made
// meanwhile queue and form the next batch; release lets them run.
func held(t *testing.T, s *Store) (queued func(n int), release func()) {
	t.Helper()
	s.wr.lock <- struct{}{}
	released := false
	release = func() {
		if !released {
			released = true
			<-s.wr.lock
		}
	}
	t.Cleanup(release)
	queued = func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			s.wr.mu.Lock()
			got := len(s.wr.queue)
			s.wr.mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d requests queued, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return queued, release
}

// inOrder starts fns one after the other, each once the one before it has queued, and returns
// a function that waits for all of them and returns their errors in order.
func inOrder(t *testing.T, s *Store, queued func(int), fns ...func() error) func() []error {
	t.Helper()
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
		queued(i + 1)
	}
	return func() []error { wg.Wait(); return errs }
}

func verifyChain(t *testing.T, s *Store) receipt.Report {
	t.Helper()
	head, err := s.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := receipt.Verify(s.Receipts(t.Context(), store.ReceiptFilter{}), head)
	if err != nil || !rep.OK {
		t.Fatalf("Verify() = %+v, %v", rep, err)
	}
	return rep
}

// TestGroupCommitUnderConcurrency: calls in flight at once share commits.
func TestGroupCommitUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := open(t, backend.New(t), nil)
	const n = 16
	calls := make([]batchCall, n)
	for i := range calls {
		calls[i] = newBatchCall(i)
		if _, err := s.Reserve(t.Context(), calls[i].reserve()); err != nil {
			t.Fatal(err)
		}
	}
	before := s.WriteTransactions()
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			<-start
			_, errs[i] = s.Record(t.Context(), c.record())
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if commits := s.WriteTransactions() - before; commits >= n {
		t.Errorf("%d concurrent Records took %d commits, want fewer", n, commits)
	}
	if rep := verifyChain(t, s); rep.Verified != n {
		t.Errorf("chain holds %d receipts, want %d", rep.Verified, n)
	}
	if es, err := s.Effects(t.Context(), store.EffectFilter{State: store.Committed}); err != nil || len(es) != n {
		t.Errorf("Effects(committed) = %d, %v; want %d", len(es), err, n)
	}
}

// TestBatchOneCommit: the requests queued behind a running batch commit together, once, and
// each sees the writes of those before it.
func TestBatchOneCommit(t *testing.T) {
	t.Parallel()
	s := open(t, backend.New(t), nil)
	a, b := newBatchCall(1), newBatchCall(2)
	rival := a
	rival.act = "act_rival"
	rivalReq := rival.reserve()
	rivalReq.Receipt = &receipt.Receipt{ReceiptID: "rcp_rival", ActionID: rival.act, EffectKey: rival.key}
	queued, release := held(t, s)
	var resA, resRival *store.ReserveResult
	var recB *store.RecordResult
	wait := inOrder(t, s, queued,
		func() (err error) { resA, err = s.Reserve(t.Context(), a.reserve()); return err },
		// The same key, planned against the batch's own write: refused, as it would be alone.
		func() (err error) { resRival, err = s.Reserve(t.Context(), rivalReq); return err },
		func() error { _, err := s.Reserve(t.Context(), b.reserve()); return err },
		func() (err error) { recB, err = s.Record(t.Context(), b.record()); return err },
		func() error { _, err := s.Record(t.Context(), a.record()); return err },
	)
	before := s.WriteTransactions()
	release()
	if err := errors.Join(wait()...); err != nil {
		t.Fatal(err)
	}
	if got := s.WriteTransactions() - before; got != 1 {
		t.Errorf("a batch of 5 took %d commits, want 1", got)
	}
	if !resA.Reserved || resRival.Reserved || resRival.Refusal.Reason != "in_progress" {
		t.Errorf("reserve a = %+v, rival = %+v; want a reserved and the rival refused in_progress", resA, resRival.Refusal)
	}
	if recB.Lost || recB.Effect.State != store.Committed {
		t.Errorf("record b = %+v, want committed", recB)
	}
	// The rival's refusal receipt and the two records: seq 1, 2, 3 without a gap.
	if rep := verifyChain(t, s); rep.Verified != 3 {
		t.Errorf("chain holds %d receipts, want 3", rep.Verified)
	}
}

// TestBatchFailureIsolated: a request that fails in a batch is rolled back alone; the others
// commit, and the chain has no gap where its receipt would have been.
func TestBatchFailureIsolated(t *testing.T) {
	t.Parallel()
	s := open(t, backend.New(t), nil)
	a, b := newBatchCall(1), newBatchCall(2)
	for _, c := range []batchCall{a, b} {
		if _, err := s.Reserve(t.Context(), c.reserve()); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	queued, release := held(t, s)
	wait := inOrder(t, s, queued,
		func() error { _, err := s.Record(t.Context(), a.record()); return err },
		// Writes a receipt and an event, then fails: neither may survive.
		func() error {
			return s.write(t.Context(), func(t *txn) error {
				if _, err := t.appendReceipt(&receipt.Receipt{ReceiptID: "rcp_doomed", ActionID: "act_doomed", Result: receipt.Denied}); err != nil {
					return err
				}
				if _, err := t.insertEvents([]store.Event{{Kind: "doomed", ActionID: "act_doomed"}}, batchNow, nil); err != nil {
					return err
				}
				return boom
			})
		},
		// A constraint failure in SQLite itself, after a receipt: a second insert of a's effect
		// key, which the primary key of effects refuses.
		func() error {
			return s.write(t.Context(), func(t *txn) error {
				if _, err := t.appendReceipt(&receipt.Receipt{ReceiptID: "rcp_twice", ActionID: "act_twice", Result: receipt.Denied}); err != nil {
					return err
				}
				eff := store.Effect{Key: a.key, State: store.Executing, Attempt: 1, ActionID: "act_twice", Action: "billing.charge",
					ActionHash: "sha256:ab", CreatedAt: batchNow, UpdatedAt: batchNow}
				return t.applyEffect(&store.EffectWrite{Next: eff})
			})
		},
		func() error { _, err := s.Record(t.Context(), b.record()); return err },
	)
	before := s.WriteTransactions()
	release()
	errs := wait()
	if errs[0] != nil || !errors.Is(errs[1], boom) || zsqlite.ErrCode(errs[2]).ToPrimary() != zsqlite.ResultConstraint || errs[3] != nil {
		t.Fatalf("errors = %v; want nil, boom, a constraint failure, nil", errs)
	}
	if got := s.WriteTransactions() - before; got != 1 {
		t.Errorf("batch took %d commits, want 1", got)
	}
	if rep := verifyChain(t, s); rep.Verified != 2 {
		t.Errorf("chain holds %d receipts, want a's and b's", rep.Verified)
	}
	for _, c := range []batchCall{a, b} {
		if e, err := s.Effect(t.Context(), c.key); err != nil || e.State != store.Committed {
			t.Errorf("Effect(%s) = %+v, %v; want committed", c.key, e, err)
		}
	}
	if evs, err := s.Events(t.Context(), store.EventFilter{ActionID: "act_doomed"}); err != nil || len(evs) != 0 {
		t.Errorf("events of the failed request = %v, %v; want none", evs, err)
	}
}

// TestBatchCommitFails: when the COMMIT of a batch fails, every request of it fails, and none
// of them wrote anything, reservations included.
func TestBatchCommitFails(t *testing.T) {
	t.Parallel()
	s := open(t, backend.New(t), nil)
	a, b := newBatchCall(1), newBatchCall(2)
	if _, err := s.Reserve(t.Context(), a.reserve()); err != nil {
		t.Fatal(err)
	}
	queued, release := held(t, s)
	wait := inOrder(t, s, queued,
		func() error { _, err := s.Record(t.Context(), a.record()); return err },
		// A foreign key checked only at COMMIT: the request itself succeeds, the COMMIT fails.
		func() error {
			return s.write(t.Context(), func(t *txn) error {
				if _, err := t.c.exec(`PRAGMA defer_foreign_keys = ON`); err != nil {
					return err
				}
				_, err := t.c.exec(`INSERT INTO revocations (delegation_id, revoked_by, revoked_at) VALUES ('dlg_none', 'x', 1)`)
				return err
			})
		},
		func() error { _, err := s.Reserve(t.Context(), b.reserve()); return err },
	)
	before := s.WriteTransactions()
	release()
	for i, err := range wait() {
		if err == nil {
			t.Errorf("request %d of a batch whose COMMIT failed succeeded", i)
		}
	}
	if got := s.WriteTransactions() - before; got != 0 {
		t.Errorf("WriteTransactions() moved by %d, want 0", got)
	}
	if e, err := s.Effect(t.Context(), a.key); err != nil || e.State != store.Executing {
		t.Errorf("Effect(a) = %+v, %v; want still executing", e, err)
	}
	if _, err := s.Effect(t.Context(), b.key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Effect(b) = %v; want no reservation", err)
	}
	if rep := verifyChain(t, s); rep.Verified != 0 {
		t.Errorf("chain holds %d receipts, want none", rep.Verified)
	}
	// The writer is usable afterwards.
	if _, err := s.Record(t.Context(), a.record()); err != nil {
		t.Errorf("Record after a failed batch = %v", err)
	}
}

// TestQueuedCancel: a request whose context ends while it waits in the queue is abandoned,
// never run; one already taken by a leader is waited for.
func TestQueuedCancel(t *testing.T) {
	t.Parallel()
	s := open(t, backend.New(t), nil)
	c := newBatchCall(1)
	queued, release := held(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	wait := inOrder(t, s, queued, func() error { _, err := s.Reserve(ctx, c.reserve()); return err })
	cancel()
	if err := wait()[0]; !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve with a cancelled context = %v, want context.Canceled", err)
	}
	release()
	if _, err := s.Reserve(t.Context(), newBatchCall(2).reserve()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Effect(t.Context(), c.key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Effect() of the abandoned reservation = %v, want ErrNotFound", err)
	}
}

// TestCloseQueued: Close fails the requests still queued and refuses new ones.
func TestCloseQueued(t *testing.T) {
	t.Parallel()
	s := openClose(t, backend.New(t), nil)
	queued, release := held(t, s)
	wait := inOrder(t, s, queued, func() error { _, err := s.Reserve(t.Context(), newBatchCall(1).reserve()); return err })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for {
		s.wr.mu.Lock()
		c := s.wr.closed
		s.wr.mu.Unlock()
		if c {
			break
		}
		time.Sleep(time.Millisecond)
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := wait()[0]; !errors.Is(err, errClosed) {
		t.Errorf("queued Reserve at Close = %v, want errClosed", err)
	}
	if _, err := s.Reserve(t.Context(), newBatchCall(2).reserve()); !errors.Is(err, errClosed) {
		t.Errorf("Reserve after Close = %v, want errClosed", err)
	}
}

// TestCheckpointPages: the writer checkpoints every walCheckpointPages pages, and so does the
// bare database openDB gives `latch bench` to compare with.
func TestCheckpointPages(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	s := open(t, url, nil)
	db, err := openDB(url + "-bare")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	writerQuery(t, s, `PRAGMA wal_autocheckpoint`, &n)
	if n != walCheckpointPages {
		t.Errorf("store: wal_autocheckpoint = %d; want %d", n, walCheckpointPages)
	}
	if err := db.QueryRowContext(t.Context(), `PRAGMA wal_autocheckpoint`).Scan(&n); err != nil || n != walCheckpointPages {
		t.Errorf("OpenDB: wal_autocheckpoint = %d, %v; want %d", n, err, walCheckpointPages)
	}
}

// TestWriterStartsTheLogOver: the checkpointer, once the log is long, copies it pass after pass
// and then asks the writer to start it over; the writer's next commit copies what is left and
// the commit after it starts the log from its beginning. Without this the log grows to
// wal_autocheckpoint pages and the commit that crosses it copies everything since the
// checkpointer's last pass while callers wait.
func TestWriterStartsTheLogOver(t *testing.T) {
	t.Parallel()
	url := backend.New(t) + "?synchronous=normal"
	s := open(t, url, nil)
	// The checkpointer's passes run when this test says, not 20 ms after a commit.
	if err := s.wr.ckpt.close(); err != nil {
		t.Fatal(err)
	}
	loc, err := parseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := startCheckpointer(loc)
	if err != nil {
		t.Fatal(err)
	}
	close(ck.stop) // its goroutine ends; its connection stays open for the passes below
	<-ck.done
	ck.stop, ck.done = make(chan struct{}), make(chan struct{})
	close(ck.done)
	s.wr.ckpt = ck
	logged := func() int {
		t.Helper()
		var busy, logged, copied int
		writerQuery(t, s, `PRAGMA wal_checkpoint(PASSIVE)`, &busy, &logged, &copied)
		return logged
	}

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	i := 0
	for ; i < 20; i++ {
		protectedCall(t, s, i, now)
	}
	ck.pass(t.Context())
	if ck.restartDue() {
		t.Fatalf("a log of 20 calls asked for a restart; want none below %d frames", restartFrames)
	}
	// Grow the log past restartFrames (and short of wal_autocheckpoint): nothing has started it
	// over yet, so the WAL file's size counts its frames.
	for (fileSize(t, loc.path+"-wal")-32)/(24+4096) < restartFrames+100 {
		protectedCall(t, s, i, now)
		i++
	}
	ck.pass(t.Context())
	if !ck.restart.Load() {
		t.Fatalf("a log copied whole after %d calls did not ask the writer to start it over", i)
	}
	// Commits go on while the checkpointer's request waits for the writer: what they append is
	// not copied.
	ck.restart.Store(false)
	for range 30 {
		protectedCall(t, s, i, now)
		i++
	}
	ck.restart.Store(true)
	protectedCall(t, s, i, now) // its commit copies the rest
	if ck.restart.Load() {
		t.Fatal("the writer's commit did not take the request to start the log over")
	}
	protectedCall(t, s, i+1, now) // its commit starts the log over
	if n := logged(); n > 40 {
		t.Fatalf("after the writer's checkpoint and one more call the log holds %d frames; want it started over (one call's frames)", n)
	}
}
