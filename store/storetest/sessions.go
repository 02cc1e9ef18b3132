package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch/store"
)

// testSessions: console sessions are found by the hash of their secret only, read back as
// written by another handle on the store (a replica, a restarted server), touched forward only,
// ended one at a time (a logout), all of one name at once under any spelling of it, swept when
// expired or idle, and ended with their account when it is removed, in the same write.
func testSessions(t *testing.T, b Backend) {
	f := newFixture(t, b)
	ss, ok := f.st.(store.SessionStore)
	if !ok {
		t.Fatalf("backend %s does not keep console sessions (store.SessionStore)", b.Name)
	}
	ctx := t.Context()
	session := func(name, method string, created time.Time) *store.Session {
		return &store.Session{Hash: store.SessionHash(newID("secret")), Name: name, Method: method,
			CreatedAt: created, SeenAt: created, ExpiresAt: created.Add(8 * time.Hour)}
	}
	alice := session("Alice", store.MethodSession, t0)
	alice2 := session("alice", store.MethodSession, t0.Add(time.Minute))
	bob := session("bob", store.MethodProxy, t0)
	for _, s := range []*store.Session{alice, alice2, bob} {
		if err := ss.CreateSession(ctx, s); err != nil {
			t.Fatalf("CreateSession(%s): %v", s.Name, err)
		}
	}
	if err := ss.CreateSession(ctx, &store.Session{Hash: alice.Hash, Name: "mallory", Method: store.MethodSession,
		CreatedAt: t0, SeenAt: t0, ExpiresAt: t0.Add(time.Hour)}); err == nil {
		t.Errorf("CreateSession with an existing hash succeeded")
	}
	long := strings.Repeat("x", store.MaxText+1)
	for name, bad := range map[string]store.Session{
		"no hash":         {Name: "a", Method: store.MethodSession, CreatedAt: t0, SeenAt: t0, ExpiresAt: t0.Add(time.Hour)},
		"no name":         {Hash: "sha256:1", Method: store.MethodSession, CreatedAt: t0, SeenAt: t0, ExpiresAt: t0.Add(time.Hour)},
		"NUL in name":     {Hash: "sha256:2", Name: "a\x00b", Method: store.MethodSession, CreatedAt: t0, SeenAt: t0, ExpiresAt: t0.Add(time.Hour)},
		"long hash":       {Hash: long, Name: "a", Method: store.MethodSession, CreatedAt: t0, SeenAt: t0, ExpiresAt: t0.Add(time.Hour)},
		"unknown method":  {Hash: "sha256:3", Name: "a", Method: "token", CreatedAt: t0, SeenAt: t0, ExpiresAt: t0.Add(time.Hour)},
		"expired already": {Hash: "sha256:4", Name: "a", Method: store.MethodSession, CreatedAt: t0, SeenAt: t0, ExpiresAt: t0},
		"no times":        {Hash: "sha256:5", Name: "a", Method: store.MethodSession},
	} {
		if err := ss.CreateSession(ctx, &bad); !errors.Is(err, store.ErrInvalidInput) {
			t.Errorf("CreateSession(%s) err = %v, want ErrInvalidInput", name, err)
		}
	}
	if _, err := ss.Session(ctx, "sha256:\x00"); !errors.Is(err, store.ErrInvalidInput) {
		t.Errorf("Session(NUL) err = %v, want ErrInvalidInput", err)
	}
	if _, err := ss.Session(ctx, store.SessionHash("never issued")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Session(unknown) err = %v, want ErrNotFound", err)
	}

	// Another handle — a replica, or the server after a restart — reads them as written.
	other := openStore(t, b, f.url).(store.SessionStore)
	for _, s := range []*store.Session{alice, alice2, bob} {
		got, err := other.Session(ctx, s.Hash)
		if err != nil || !cmp.Equal(got, s) {
			t.Errorf("another handle's Session(%s) = %+v, %v; want %+v", s.Name, got, err, s)
		}
	}
	// Touched forward, never back.
	if err := ss.TouchSession(ctx, alice.Hash, t0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := other.TouchSession(ctx, alice.Hash, t0.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := ss.Session(ctx, alice.Hash); err != nil || !got.SeenAt.Equal(t0.Add(10*time.Minute)) {
		t.Errorf("after touches at +10m and +5m, SeenAt = %v, %v; want +10m", got, err)
	}
	if err := ss.TouchSession(ctx, store.SessionHash("never issued"), t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TouchSession(unknown) err = %v, want ErrNotFound", err)
	}

	// A logout on one handle is seen at once by the other.
	if err := other.EndSession(ctx, alice2.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Session(ctx, alice2.Hash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after EndSession on another handle Session = %v, want ErrNotFound", err)
	}
	if err := ss.EndSession(ctx, alice2.Hash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("EndSession again err = %v, want ErrNotFound", err)
	}
	if _, err := ss.Session(ctx, alice.Hash); err != nil {
		t.Errorf("ending one of alice's sessions ended another: %v", err)
	}

	// All of a name's sessions, under any spelling of it.
	more := []*store.Session{session("alice", store.MethodProxy, t0), session("carol", store.MethodSession, t0)}
	for _, s := range more {
		if err := ss.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := ss.EndSessions(ctx, " ALICE "); err != nil || n != 2 {
		t.Errorf("EndSessions(ALICE) = %d, %v; want 2", n, err)
	}
	for _, s := range []*store.Session{alice, more[0]} {
		if _, err := ss.Session(ctx, s.Hash); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after EndSessions(ALICE) a session of %s remains: %v", s.Name, err)
		}
	}
	for _, s := range []*store.Session{bob, more[1]} {
		if _, err := ss.Session(ctx, s.Hash); err != nil {
			t.Errorf("EndSessions(ALICE) ended %s's session: %v", s.Name, err)
		}
	}

	// Swept: expired ones (bob's, carol's at +8h) and idle ones (dave's, unseen since +1h).
	live := session("erin", store.MethodSession, t0.Add(7*time.Hour))
	idle := session("dave", store.MethodSession, t0.Add(time.Hour))
	for _, s := range []*store.Session{live, idle} {
		if err := ss.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := ss.SweepSessions(ctx, t0.Add(8*time.Hour), t0.Add(7*time.Hour+30*time.Minute-time.Hour)); err != nil || n != 3 {
		t.Errorf("SweepSessions = %d, %v; want 3 (two expired, one idle)", n, err)
	}
	if _, err := ss.Session(ctx, live.Hash); err != nil {
		t.Errorf("the sweep removed a live session: %v", err)
	}
	for _, s := range []*store.Session{bob, more[1], idle} {
		if _, err := ss.Session(ctx, s.Hash); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the sweep left %s's session: %v", s.Name, err)
		}
	}

	// An account's removal ends its sessions in the same write.
	as, ok := f.st.(store.AccountStore)
	if !ok {
		t.Fatalf("backend %s keeps sessions but no accounts", b.Name)
	}
	if err := as.CreateAccount(ctx, &store.Account{Name: "Erin", PasswordHash: "$2a$10$" + newID(""), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	frank := session("frank", store.MethodSession, t0.Add(7*time.Hour))
	if err := ss.CreateSession(ctx, frank); err != nil {
		t.Fatal(err)
	}
	if _, err := as.RemoveAccount(ctx, "erin"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Session(ctx, live.Hash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after RemoveAccount(erin) her session remains: %v", err)
	}
	if _, err := ss.Session(ctx, frank.Hash); err != nil {
		t.Errorf("RemoveAccount(erin) ended frank's session: %v", err)
	}
}
