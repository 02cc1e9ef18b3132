package sqlite

import (
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
