package postgres

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Eight writers, each with its own pool, append receipts at once (reservations that are refused,
// records with and without an effect key): the chain stays gap-free and verifies.
func TestReceiptChainConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newSchemaURL(t)
	const writers, perWriter = 8, 25
	stores := make([]*Store, writers)
	for i := range stores {
		st, err := Open(ctx, u, &Config{MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stores[i] = st
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	shared := newCutCall("chain:shared")
	if res, err := stores[0].Reserve(ctx, shared.reserveReq(now)); err != nil || !res.Reserved {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seqs := map[int64]string{}
	for w, st := range stores {
		wg.Go(func() {
			for i := range perWriter {
				var sealed receipt.Sealed
				switch i % 3 {
				case 0: // a contender on the held key: refused, with a blocked receipt
					res, err := st.Reserve(ctx, newCutCall(shared.key).reserveReq(now))
					if err != nil || res.Reserved || res.Receipt == nil {
						t.Errorf("writer %d: contending Reserve = %+v, %v, want refused with a receipt", w, res, err)
						return
					}
					sealed = *res.Receipt
				case 1: // a whole call on its own key
					c := newCutCall(fmt.Sprintf("chain:%d:%d", w, i))
					res, err := st.Reserve(ctx, c.reserveReq(now))
					if err != nil || !res.Reserved {
						t.Errorf("writer %d: Reserve = %+v, %v", w, res, err)
						return
					}
					rec, err := st.Record(ctx, c.recordReq(now, res.Effect.Attempt))
					if err != nil {
						t.Errorf("writer %d: Record = %v", w, err)
						return
					}
					sealed = rec.Receipt
				case 2: // a call with no effect key: a receipt only
					c := newCutCall("")
					rq := c.recordReq(now, 0)
					rq.EffectKey, rq.Receipt.EffectKey = "", ""
					rec, err := st.Record(ctx, rq)
					if err != nil {
						t.Errorf("writer %d: Record = %v", w, err)
						return
					}
					sealed = rec.Receipt
				}
				mu.Lock()
				if prev, dup := seqs[sealed.Seq]; dup {
					t.Errorf("seq %d returned twice (%s and %s)", sealed.Seq, prev, sealed.Hash)
				}
				seqs[sealed.Seq] = sealed.Hash
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	head, err := stores[0].Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := receipt.Verify(stores[0].Receipts(ctx, store.ReceiptFilter{}), head)
	if err != nil || !rep.OK || rep.Verified != writers*perWriter {
		t.Fatalf("Verify() = %+v, %v, want %d receipts and no breaks", rep, err, writers*perWriter)
	}
	for r, err := range stores[0].Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		if seqs[r.Seq] != r.Hash {
			t.Errorf("receipt %d is %s, the writer was told %s", r.Seq, r.Hash, seqs[r.Seq])
		}
	}
}

// An allowed call with an effect key is two write transactions (SPEC §4); a refusal is one.
func TestWriteTransactions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := Open(ctx, newSchemaURL(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	c := newCutCall("wt")
	res, err := st.Reserve(ctx, c.reserveReq(now))
	if err != nil || !res.Reserved {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	if _, err := st.Record(ctx, c.recordReq(now, res.Effect.Attempt)); err != nil {
		t.Fatal(err)
	}
	if n := st.WriteTransactions(); n != 2 {
		t.Errorf("WriteTransactions() after reserve and record = %d, want 2", n)
	}
	if res, err := st.Reserve(ctx, newCutCall("wt").reserveReq(now)); err != nil || res.Reserved {
		t.Fatalf("duplicate Reserve = %+v, %v, want refused", res, err)
	}
	if n := st.WriteTransactions(); n != 3 {
		t.Errorf("WriteTransactions() after a refusal = %d, want 3", n)
	}
	// A refused extension writes nothing and is not counted.
	if _, err := st.ExtendLease(ctx, &store.ExtendRequest{Now: now, Key: "wt", ActionID: "act_other", Attempt: 1, Until: now.Add(time.Hour)}); err == nil {
		t.Errorf("ExtendLease by a non-holder succeeded")
	}
	if n := st.WriteTransactions(); n != 3 {
		t.Errorf("WriteTransactions() after a refused extension = %d, want 3", n)
	}
}
