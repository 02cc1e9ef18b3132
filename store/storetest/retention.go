package storetest

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// retentionFixture is a fixture with its RetentionStore and a checkpoint key.
type retentionFixture struct {
	*fixture
	rs  store.RetentionStore
	key ed25519.PrivateKey
	pub ed25519.PublicKey
}

func newRetentionFixture(t *testing.T, b Backend) *retentionFixture {
	t.Helper()
	f := newFixture(t, b)
	rs, err := store.Retention(f.st)
	if err != nil {
		t.Fatalf("backend %s: %v", b.Name, err)
	}
	k, p := SigningKey(t)
	return &retentionFixture{fixture: f, rs: rs, key: k, pub: p}
}

// SigningKey makes a new checkpoint key pair, as latch checkpoint keygen does, parsed.
func SigningKey(t testing.TB) (ed25519.PrivateKey, ed25519.PublicKey) {
	t.Helper()
	priv, pub, err := receipt.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := receipt.ParseSigningKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	p, err := receipt.ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k, p
}

func (f *retentionFixture) checkpoint(now time.Time) *receipt.Checkpoint {
	f.t.Helper()
	cp, err := store.SignCheckpoint(f.t.Context(), f.st, f.key, now)
	if err != nil {
		f.t.Fatalf("SignCheckpoint: %v", err)
	}
	return cp
}

// verifyFrom verifies the chain and wants it intact, starting at start (0: seq 1), with its
// state checked, and every stored checkpoint at or past the start holding.
func (f *retentionFixture) verifyFrom(start int64) receipt.Report {
	f.t.Helper()
	rep, err := store.VerifyChain(f.t.Context(), f.st)
	if err != nil {
		f.t.Fatalf("VerifyChain() = %v", err)
	}
	if !rep.OK {
		f.t.Errorf("VerifyChain() breaks: %+v", rep.Breaks)
	}
	switch {
	case start == 0 && rep.Start != nil:
		f.t.Errorf("VerifyChain().Start = %+v, want none (never pruned)", rep.Start)
	case start > 0 && (rep.Start == nil || rep.Start.Seq != start || rep.Start.Reason == ""):
		f.t.Errorf("VerifyChain().Start = %+v, want seq %d with its reason", rep.Start, start)
	}
	if brk, _, err := store.VerifyCheckpoints(f.t.Context(), f.st, f.pub, nil); err != nil || len(brk) != 0 {
		f.t.Errorf("VerifyCheckpoints() = %+v, %v; want every checkpoint holding", brk, err)
	}
	return rep
}

// unchanged fails unless the store holds exactly the receipts of before and its head.
func (f *retentionFixture) unchanged(what string, before []receipt.Sealed) {
	f.t.Helper()
	after := f.receipts(store.ReceiptFilter{})
	if len(after) != len(before) || after[0].Seq != before[0].Seq || f.head().Seq != before[len(before)-1].Seq {
		f.t.Errorf("%s wrote: %d receipts from seq %d (head %d), want the %d from seq %d as before", what, len(after), after[0].Seq,
			f.head().Seq, len(before), before[0].Seq)
	}
}

// testRetention: a prune removes the receipts below a signed checkpoint and nothing a kept record
// needs, keeps the checkpoint's receipt as the start, and leaves a chain (and a state) that
// verifies; it is refused, writing nothing, with no checkpoint, over an active hold, or over a
// chain that does not verify below; a hold and its release are chained; pruning twice works.
func testRetention(t *testing.T, b Backend) {
	f := newRetentionFixture(t, b)
	ctx := t.Context()
	f.run(newCall("ret-first"), t0, store.Committed)
	if _, err := f.rs.Prune(ctx, &store.PruneRequest{Now: t0, By: "cli:ops", BeforeSeq: 100}); !errors.Is(err, store.ErrNoCheckpoint) {
		t.Fatalf("Prune with no checkpoint = %v, want ErrNoCheckpoint", err)
	}

	// Every kind of row a prune must keep or may remove, all before the checkpoint.
	old := newCall("ret-old")
	f.run(old, t0, store.Committed)
	f.run(newCall("ret-failed"), t0, store.Failed)
	f.run(newCall("ret-ambiguous"), t0, store.Ambiguous)
	spent := newCall("ret-spent")
	a := f.granted(spent.Hash)
	spent.ApprovalID = a.ID
	f.run(spent, t0.Add(2*time.Minute), store.Committed)
	open := f.granted(hashOf("open"))
	pending := f.createApproval(hashOf("pending"), t0)
	for i := range 4 {
		f.record(receiptOnly(newCall(""), t0.Add(time.Duration(i)*time.Second), "denied"))
	}
	ds := f.st.(store.DelegationStore)
	dlg := &store.Delegation{ID: newID("dlg_"), Parent: "alice-payments", Grant: []byte("actions: [x]\n"), CreatedBy: "alice", CreatedAt: t0}
	if err := ds.CreateDelegation(ctx, dlg, nil); err != nil {
		t.Fatal(err)
	}
	hold, err := f.rs.PlaceHold(ctx, &store.HoldRequest{Now: t0, From: 2, To: 3, Reason: "litigation: case 4411", By: "cli:legal"})
	if err != nil || hold.ID == "" || !hold.Active() {
		t.Fatalf("PlaceHold = %+v, %v", hold, err)
	}
	cp := f.checkpoint(t0.Add(time.Hour))
	f.run(newCall("ret-new"), t0.Add(2*time.Hour), store.Committed)
	f.verifyFrom(0)

	// Refused, writing nothing: over the hold (naming it and its reason), and as a dry run.
	before := f.receipts(store.ReceiptFilter{})
	_, err = f.rs.Prune(ctx, &store.PruneRequest{Now: t0.Add(3 * time.Hour), By: "cli:ops", BeforeSeq: cp.Seq})
	var he *store.HoldError
	if !errors.As(err, &he) || he.Hold.ID != hold.ID || he.Hold.Reason != "litigation: case 4411" || !errors.Is(err, store.ErrHeld) {
		t.Fatalf("Prune over a hold = %v, want a HoldError naming %s", err, hold.ID)
	}
	f.unchanged("a prune refused by a hold", before)
	if _, err := f.rs.ReleaseHold(ctx, &store.ReleaseRequest{Now: t0.Add(3 * time.Hour), ID: hold.ID, By: "cli:legal"}); err == nil {
		t.Errorf("ReleaseHold without a reason succeeded")
	}
	released, err := f.rs.ReleaseHold(ctx, &store.ReleaseRequest{Now: t0.Add(3 * time.Hour), ID: hold.ID, Reason: "case closed", By: "cli:legal"})
	if err != nil || released.Active() || released.ReleasedBy != "cli:legal" || released.ReleaseReason != "case closed" {
		t.Fatalf("ReleaseHold = %+v, %v", released, err)
	}
	if _, err := f.rs.ReleaseHold(ctx, &store.ReleaseRequest{Now: t0, ID: hold.ID, Reason: "again", By: "cli:legal"}); !errors.Is(err, store.ErrHoldReleased) {
		t.Errorf("ReleaseHold twice = %v, want ErrHoldReleased", err)
	}
	if _, err := f.rs.ReleaseHold(ctx, &store.ReleaseRequest{Now: t0, ID: "hold_missing", Reason: "x", By: "cli:legal"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReleaseHold(unknown) = %v, want ErrNotFound", err)
	}
	holds, err := f.rs.Holds(ctx)
	if err != nil || len(holds) != 1 || holds[0].Active() || holds[0].Reason != "litigation: case 4411" {
		t.Fatalf("Holds = %+v, %v; want the released hold, listed", holds, err)
	}
	before = f.receipts(store.ReceiptFilter{})
	dry, err := f.rs.Prune(ctx, &store.PruneRequest{Now: t0.Add(3 * time.Hour), By: "cli:ops", BeforeSeq: cp.Seq, DryRun: true})
	if err != nil || !dry.DryRun || dry.Receipts != cp.Seq-1 || dry.Start.Seq != cp.Seq {
		t.Fatalf("Prune(dry run) = %+v, %v; want %d receipts to remove", dry, err, cp.Seq-1)
	}
	f.unchanged("a dry run", before)
	f.approval(a.ID) // the spent approval a prune removes is still there after a dry run

	// The prune: everything below the checkpoint goes; the rows still referenced stay.
	res, err := f.rs.Prune(ctx, &store.PruneRequest{Now: t0.Add(3 * time.Hour), By: "cli:ops", BeforeSeq: f.head().Seq})
	if err != nil {
		t.Fatalf("Prune = %v", err)
	}
	if res.Receipts != cp.Seq-1 || res.Start.Seq != cp.Seq || res.Start.Hash != cp.Hash || res.Start.Checkpoint.Signature != cp.Signature ||
		res.Approvals != 1 || res.Effects != 0 || res.Start.Carried == 0 {
		t.Fatalf("Prune = %+v, want %d receipts and the spent approval removed, the chain starting at %d", res, cp.Seq-1, cp.Seq)
	}
	if rows := f.receipts(store.ReceiptFilter{}); rows[0].Seq != cp.Seq || rows[0].Hash != cp.Hash {
		t.Errorf("first receipt after the prune = seq %d %s, want the checkpoint's %d %s", rows[0].Seq, rows[0].Hash, cp.Seq, cp.Hash)
	}
	cs, err := f.rs.ChainStart(ctx)
	if err != nil || cs == nil || cs.Seq != cp.Seq || cs.RecordSeq != f.head().Seq || cs.By != "cli:ops" {
		t.Errorf("ChainStart = %+v, %v; want seq %d, recorded at the head", cs, err, cp.Seq)
	}
	rep := f.verifyFrom(cp.Seq)
	if rep.State == nil || rep.State.Effects != 6 || rep.State.Approvals != 2 || rep.State.Delegations != 1 {
		t.Errorf("VerifyChain().State = %+v, want the 6 effects, 2 approvals and 1 delegation kept, checked", rep.State)
	}
	for _, key := range []string{"ret-first", "ret-old", "ret-failed", "ret-ambiguous", "ret-spent"} {
		f.effect(key) // kept: no age limit
	}
	f.approval(open.ID)
	f.approval(pending.ID)
	if _, err := f.st.Approval(ctx, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the spent approval after the prune: %v, want it removed", err)
	}
	if res := f.reserve(old.retry().reserve(t0.Add(4 * time.Hour))); res.Reserved || res.Refusal == nil || res.Refusal.Reason != "committed" {
		t.Errorf("a duplicate of a kept committed effect = %+v, want refused committed", res)
	}
	if _, err := f.rs.Prune(ctx, &store.PruneRequest{Now: t0.Add(4 * time.Hour), By: "cli:ops", BeforeSeq: f.head().Seq}); !errors.Is(err, store.ErrNothingToPrune) {
		t.Errorf("Prune again below the same checkpoint = %v, want ErrNothingToPrune", err)
	}
	if _, err := f.rs.PlaceHold(ctx, &store.HoldRequest{Now: t0, From: 1, To: cp.Seq - 1, Reason: "late", By: "cli:legal"}); err == nil ||
		!strings.Contains(err.Error(), "pruned already") {
		t.Errorf("PlaceHold over a pruned range = %v, want refused: pruned already", err)
	}
	if holds, err := f.rs.Holds(ctx); err != nil || len(holds) != 1 {
		t.Errorf("Holds after a refused hold = %+v, %v; want only the first", holds, err)
	}

	// Twice, by time, with an age limit: settled effects older than it go, the ambiguous stays.
	f.run(newCall("ret-later"), t0.Add(5*time.Hour), store.Committed)
	cp2 := f.checkpoint(t0.Add(6 * time.Hour))
	f.run(newCall("ret-last"), t0.Add(7*time.Hour), store.Committed)
	now := t0.Add(30 * 24 * time.Hour)
	res, err = f.rs.Prune(ctx, &store.PruneRequest{Now: now, By: "cli:ops", Before: cp2.SignedAt.Add(time.Millisecond), KeepSettled: 24 * time.Hour,
		Check: func(c *receipt.Checkpoint) error { return c.VerifySignature(f.pub) }})
	if err != nil || res.Start.Seq != cp2.Seq || res.Receipts != cp2.Seq-cp.Seq {
		t.Fatalf("second Prune = %+v, %v; want the chain starting at %d", res, err, cp2.Seq)
	}
	f.verifyFrom(cp2.Seq)
	for _, key := range []string{"ret-first", "ret-old", "ret-failed", "ret-spent", "ret-new"} {
		f.noEffect(key)
	}
	f.effect("ret-ambiguous")
	f.effect("ret-later")        // its receipt is the checkpoint's, the start
	f.effect("ret-last")         // its receipt is past the checkpoint
	f.reserved(old.retry(), now) // past the age limit, the key runs again: what the policy asked for
}

// testPruneWhileWriting: a prune runs while workers append; the chain and the state verify after.
func testPruneWhileWriting(t *testing.T, b Backend) {
	f := newRetentionFixture(t, b)
	for i := range 20 {
		f.run(newCall(newID("ret-")), t0.Add(time.Duration(i)*time.Second), store.Committed)
	}
	cp := f.checkpoint(t0.Add(time.Minute))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				c := newCall(newID("ret-w-"))
				now := t0.Add(time.Hour + time.Duration(w*100+i)*time.Second)
				res, err := f.st.Reserve(t.Context(), c.reserve(now))
				if err != nil || !res.Reserved {
					t.Errorf("Reserve while pruning = %+v, %v", res, err)
					return
				}
				if _, err := f.st.Record(t.Context(), c.record(now.Add(time.Second), 1, store.Committed)); err != nil {
					t.Errorf("Record while pruning = %v", err)
					return
				}
			}
		}()
	}
	if _, err := f.rs.Prune(t.Context(), &store.PruneRequest{Now: t0.Add(2 * time.Hour), By: "cli:ops", BeforeSeq: cp.Seq}); err != nil {
		t.Errorf("Prune while writing = %v", err)
	}
	wg.Wait()
	f.verifyFrom(cp.Seq)
}

// testPruneWhileProcessesWrite: a prune in one OS process while four others append: every
// write lands, the prune removes exactly what was below its checkpoint, and the chain and the
// state verify from the checkpoint's receipt.
func testPruneWhileProcessesWrite(t *testing.T, b Backend) {
	f := newRetentionFixture(t, b)
	for i := range 20 {
		f.run(newCall(fmt.Sprintf("ret-%d", i)), t0.Add(time.Duration(i)*time.Second), store.Committed)
	}
	cp := f.checkpoint(t0.Add(time.Minute))
	dir := t.TempDir()
	specs := []childSpec{{Role: rolePrune, URL: f.url, Dir: dir, Name: "pruner", Now: t0.Add(time.Hour).UnixNano(), Before: cp.Seq}}
	for i := range 4 {
		specs = append(specs, childSpec{Role: roleCommit, URL: f.url, Dir: dir, Name: fmt.Sprint("writer-", i),
			Key: fmt.Sprintf("ret-w%d", i), Now: t0.Add(time.Hour).UnixNano()})
	}
	out := runChildren(t, specs)
	if got := out.outcomes["pruner"]; got != fmt.Sprintf("pruned %d", cp.Seq-1) {
		t.Errorf("pruner: %q, want pruned %d", got, cp.Seq-1)
	}
	for i := range 4 {
		if got := out.outcomes[fmt.Sprint("writer-", i)]; got != "committed" {
			t.Errorf("writer %d: %q, want committed", i, got)
		}
		for j := 1; j <= 5; j++ {
			k := fmt.Sprintf("ret-w%d", i)
			if j > 1 {
				k = fmt.Sprintf("%s-%d", k, j)
			}
			if e := f.effect(k); e.State != store.Committed {
				t.Errorf("effect %s = %s, want committed", k, e.State)
			}
		}
	}
	// The 20 receipts below and the checkpoint's kept, 4 × 5 written, the prune's own record.
	rep := f.verifyFrom(cp.Seq)
	if want := f.head().Seq - cp.Seq + 1; rep.Verified != want || f.head().Seq != cp.Seq+20+1 {
		t.Errorf("after the race: %d receipts verified from %d, head %d; want %d, head %d", rep.Verified, cp.Seq, f.head().Seq, want, cp.Seq+21)
	}
}
