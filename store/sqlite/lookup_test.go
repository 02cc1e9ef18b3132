package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// TestTokenLookups: TokenByHash runs on its own connections, many at once; it sees a revocation
// written after the connection was opened at once, keeps at most lookupIdle connections idle,
// and refuses cleanly once the store is closed.
func TestTokenLookups(t *testing.T) {
	s := openClose(t, "sqlite:"+filepath.Join(t.TempDir(), "latch.db"), nil)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const n = 16
	for i := range n {
		tk := &store.Token{ID: fmt.Sprintf("tok_%032x", i), Hash: fmt.Sprintf("sha256:%064x", i), Kind: store.TokenAgent,
			Agent: fmt.Sprintf("agent:%d", i), CreatedAt: now}
		if err := s.CreateToken(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		for i := range n {
			wg.Go(func() {
				tk, err := s.TokenByHash(t.Context(), fmt.Sprintf("sha256:%064x", i))
				if err != nil || tk.Agent != fmt.Sprintf("agent:%d", i) {
					t.Errorf("TokenByHash(%d) = %+v, %v", i, tk, err)
				}
			})
		}
	}
	wg.Wait()
	if _, err := s.TokenByHash(t.Context(), fmt.Sprintf("sha256:%064x", n)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TokenByHash(unknown) = %v, want ErrNotFound", err)
	}
	s.lookups.mu.Lock()
	idle := len(s.lookups.idle)
	s.lookups.mu.Unlock()
	if idle < 1 || idle > lookupIdle {
		t.Errorf("%d idle lookup connections, want 1 to %d", idle, lookupIdle)
	}
	// A revocation by another handle on the file is seen by the next lookup, on a kept connection.
	other := open(t, s.url, nil)
	if _, err := other.RevokeToken(t.Context(), fmt.Sprintf("tok_%032x", 3), now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if tk, err := s.TokenByHash(t.Context(), fmt.Sprintf("sha256:%064x", 3)); err != nil || tk.RevokedAt.IsZero() {
		t.Errorf("TokenByHash after a revocation = %+v, %v; want it revoked", tk, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TokenByHash(t.Context(), fmt.Sprintf("sha256:%064x", 1)); err == nil {
		t.Errorf("TokenByHash after Close succeeded")
	}
}

// TestReceiptRowsEnd: Receipts reads on the direct connections; however a walk ends — the
// consumer stops, ctx ends, the consumer panics — it leaves no read transaction open (a full
// checkpoint completes), and a walk the consumer ended gives its connection back.
func TestReceiptRowsEnd(t *testing.T) {
	s := open(t, "sqlite:"+filepath.Join(t.TempDir(), "latch.db"), nil)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const n = 3000
	for i := range n {
		if _, err := s.Record(t.Context(), &store.RecordRequest{Now: now, Receipt: deniedReceipt(fmt.Sprintf("act_%d", i), now)}); err != nil {
			t.Fatal(err)
		}
	}
	idle := func() int {
		s.lookups.mu.Lock()
		defer s.lookups.mu.Unlock()
		return len(s.lookups.idle)
	}
	// A write after the walk began, then a checkpoint that must copy it: busy if a walk's read
	// transaction were still open.
	checkpointed := func(what string) {
		t.Helper()
		if _, err := s.Record(t.Context(), &store.RecordRequest{Now: now, Receipt: deniedReceipt("act_after_"+what, now)}); err != nil {
			t.Fatal(err)
		}
		// The store's own checkpointer may be running one: busy then too, but only for a moment.
		// A read transaction left open keeps every try busy.
		var busy, log, done int
		for try := 0; try < 100; try++ {
			if writerQuery(t, s, `PRAGMA wal_checkpoint(TRUNCATE)`, &busy, &log, &done); busy == 0 {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("%s: a full checkpoint stayed blocked for 2 s: a read transaction is still open", what)
	}

	var seen int64
	for r, err := range s.Receipts(t.Context(), store.ReceiptFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		if seen++; r.Seq != seen || len(r.Doc) == 0 {
			t.Fatalf("receipt %d: seq %d, %d bytes", seen, r.Seq, len(r.Doc))
		}
		if seen == 10 {
			break
		}
	}
	if idle() == 0 {
		t.Errorf("stopped walk: its connection was not kept")
	}
	checkpointed("stop")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var walked int
	var walkErr error
	for _, err := range s.Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			walkErr = err
			break
		}
		if walked++; walked == 5 {
			cancel()
		}
	}
	if !errors.Is(walkErr, context.Canceled) || walked >= n {
		t.Errorf("cancelled walk: %d receipts, then %v; want it ended with context.Canceled", walked, walkErr)
	}
	checkpointed("cancel")

	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("the consumer's panic did not reach the caller")
			}
		}()
		for range s.Receipts(t.Context(), store.ReceiptFilter{}) {
			panic("consumer")
		}
	}()
	if idle() == 0 {
		t.Errorf("a walk whose consumer panicked did not give its connection back")
	}
	checkpointed("panic")
	var read int
	for _, err := range s.Receipts(t.Context(), store.ReceiptFilter{}) {
		if err != nil {
			t.Fatalf("a walk after the panic: %v", err)
		}
		read++
	}
	if read != n+3 {
		t.Errorf("a walk after the panic read %d receipts, want %d", read, n+3)
	}
}
