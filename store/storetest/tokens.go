package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// testTokens: API tokens are found by the hash of their secret only, listed in creation order,
// are read alike by another handle on the store, and are revoked once, by one compare-and-set write, even under racing
// revokers.
func testTokens(t *testing.T, b Backend) {
	f := newFixture(t, b)
	ts, ok := f.st.(store.TokenStore)
	if !ok {
		t.Fatalf("backend %s does not keep tokens (store.TokenStore)", b.Name)
	}
	ctx := t.Context()
	agent := &store.Token{ID: newID("tok_"), Hash: "sha256:" + newID("")[:32] + newID("")[:32], Kind: store.TokenAgent,
		Agent: "billing-worker", User: "alice", CreatedAt: t0, ExpiresAt: t0.Add(30 * 24 * time.Hour)}
	approver := &store.Token{ID: newID("tok_"), Hash: "sha256:" + newID("")[:32] + newID("")[:32], Kind: store.TokenApprover,
		Approver: "bob", CreatedAt: t0.Add(time.Second)}
	for _, tk := range []*store.Token{agent, approver} {
		if err := ts.CreateToken(ctx, tk); err != nil {
			t.Fatalf("CreateToken(%s): %v", tk.Kind, err)
		}
	}
	dupHash := *approver
	dupHash.ID = newID("tok_")
	if err := ts.CreateToken(ctx, &dupHash); err == nil {
		t.Errorf("CreateToken with an existing hash succeeded")
	}
	dupID := *approver
	dupID.Hash = "sha256:" + newID("")[:32] + newID("")[:32]
	if err := ts.CreateToken(ctx, &dupID); err == nil {
		t.Errorf("CreateToken with an existing id succeeded")
	}

	// Values no backend keeps faithfully are refused alike, before anything is written.
	long := strings.Repeat("x", store.MaxText+1)
	for name, bad := range map[string]store.Token{
		"NUL in id":       {ID: "tok_\x00a", Hash: "sha256:" + newID(""), Kind: store.TokenAgent, Agent: "a", CreatedAt: t0},
		"long hash":       {ID: newID("tok_"), Hash: long, Kind: store.TokenAgent, Agent: "a", CreatedAt: t0},
		"NUL in approver": {ID: newID("tok_"), Hash: "sha256:" + newID(""), Kind: store.TokenApprover, Approver: "b\x00ob", CreatedAt: t0},
		"long agent":      {ID: newID("tok_"), Hash: "sha256:" + newID(""), Kind: store.TokenAgent, Agent: long, CreatedAt: t0},
		"no hash":         {ID: newID("tok_"), Kind: store.TokenAgent, Agent: "a", CreatedAt: t0},
	} {
		if err := ts.CreateToken(ctx, &bad); !errors.Is(err, store.ErrInvalidInput) {
			t.Errorf("CreateToken(%s) err = %v, want ErrInvalidInput", name, err)
		}
	}
	if _, err := ts.TokenByHash(ctx, "sha256:\x00"); !errors.Is(err, store.ErrInvalidInput) {
		t.Errorf("TokenByHash(NUL) err = %v, want ErrInvalidInput", err)
	}
	if _, err := ts.RevokeToken(ctx, long, t0); !errors.Is(err, store.ErrInvalidInput) {
		t.Errorf("RevokeToken(long id) err = %v, want ErrInvalidInput", err)
	}

	got, err := ts.TokenByHash(ctx, agent.Hash)
	if err != nil || *got != *agent {
		t.Fatalf("TokenByHash(agent) = %+v, %v; want %+v", got, err, agent)
	}
	if _, err := ts.TokenByHash(ctx, "sha256:"+newID("")[:32]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TokenByHash(unknown) err = %v, want ErrNotFound", err)
	}
	list, err := ts.Tokens(ctx)
	if err != nil || len(list) != 2 || *list[0] != *agent || *list[1] != *approver {
		t.Fatalf("Tokens = %+v, %v", list, err)
	}

	at := t0.Add(time.Hour)
	var wg sync.WaitGroup
	var mu sync.Mutex
	revoked, refused := 0, 0
	for range 4 {
		wg.Go(func() {
			_, err := ts.RevokeToken(ctx, agent.ID, at)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				revoked++
			case errors.Is(err, store.ErrRevoked):
				refused++
			default:
				t.Errorf("RevokeToken: %v", err)
			}
		})
	}
	wg.Wait()
	if revoked != 1 || refused != 3 {
		t.Errorf("4 racing revocations: %d revoked, %d refused ErrRevoked; want 1 and 3", revoked, refused)
	}
	if _, err := ts.RevokeToken(ctx, "tok_missing", at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeToken(unknown) err = %v, want ErrNotFound", err)
	}

	ts = openStore(t, b, f.url).(store.TokenStore) // another handle on the same store
	got, err = ts.TokenByHash(ctx, agent.Hash)
	if err != nil || !got.RevokedAt.Equal(at) || got.Agent != "billing-worker" {
		t.Errorf("after reopen TokenByHash(agent) = %+v, %v; want revoked at %s", got, err, at)
	}
	if got, err := ts.TokenByHash(ctx, approver.Hash); err != nil || !got.RevokedAt.IsZero() || got.Approver != "bob" {
		t.Errorf("after reopen TokenByHash(approver) = %+v, %v; want it unrevoked", got, err)
	}
}
