package storetest

import (
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// testVerifyWhileWriting runs store.VerifyChain over and over while writers append receipts:
// every walk must find the chain intact. A walk that read the head and the receipts apart saw a
// head past its last receipt and reported head_mismatch on an intact chain.
func testVerifyWhileWriting(t *testing.T, b Backend) {
	f := newFixture(t, b)
	ctx := t.Context()
	const writers, verifies = 4, 40
	var stop atomic.Bool
	var wg sync.WaitGroup
	var appended atomic.Int64
	for w := range writers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				now := t0.Add(time.Duration(w*1_000_000+i) * time.Millisecond)
				if _, err := f.st.Record(ctx, receiptOnly(newCall(""), now, receipt.Committed)); err != nil {
					t.Errorf("writer %d: Record = %v", w, err)
					return
				}
				appended.Add(1)
			}
		})
	}
	for appended.Load() < 8 && !t.Failed() {
		time.Sleep(time.Millisecond)
	}
	var walked int64
	for i := range verifies {
		rep, err := store.VerifyChain(ctx, f.st)
		if err != nil {
			t.Fatalf("VerifyChain #%d = %v", i+1, err)
		}
		if !rep.OK {
			t.Errorf("VerifyChain #%d while writers append: %+v, want an intact chain", i+1, rep.Breaks)
		}
		walked = rep.Verified
	}
	stop.Store(true)
	wg.Wait()
	if walked == 0 || appended.Load() <= walked {
		t.Logf("the last walk read %d of %d receipts", walked, appended.Load())
	}
	if n := f.verify(); n != appended.Load() {
		t.Errorf("chain holds %d receipts, writers appended %d", n, appended.Load())
	}

	// The same, made certain: a receipt appended after the head was read and before the
	// receipts are is not seen by the walk, whose head still matches its last receipt.
	cr, ok := f.st.(store.ChainReader)
	if !ok {
		return
	}
	err := cr.ReadChain(ctx, func(head *receipt.Head, rows iter.Seq2[receipt.Sealed, error]) error {
		if head == nil {
			t.Fatal("ReadChain: no head")
		}
		late := f.record(receiptOnly(newCall(""), t0.Add(time.Hour), receipt.Committed))
		if late.Receipt.Seq != head.Seq+1 {
			t.Errorf("appended seq %d inside the walk, head was %d", late.Receipt.Seq, head.Seq)
		}
		rep, err := receipt.Verify(rows, *head)
		if err != nil {
			return err
		}
		if !rep.OK || rep.Verified != head.Seq {
			t.Errorf("walk with a receipt appended after its head was read: %d verified, breaks %+v; want %d, none",
				rep.Verified, rep.Breaks, head.Seq)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ReadChain = %v", err)
	}
}
