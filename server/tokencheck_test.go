package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/postgres"
	"github.com/latchkit/latch/store/sqlite"
)

// tokenReads counts the token reads made outside a write transaction: TokenByHash, each a read
// transaction (SQLite) or a round trip (Postgres) of its own. The rest is the real store.
type tokenReads struct{ n atomic.Int64 }

type sqliteCounting struct {
	*sqlite.Store
	reads *tokenReads
}

func (s sqliteCounting) TokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	s.reads.n.Add(1)
	return s.Store.TokenByHash(ctx, hash)
}

type postgresCounting struct {
	*postgres.Store
	reads *tokenReads
}

func (s postgresCounting) TokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	s.reads.n.Add(1)
	return s.Store.TokenByHash(ctx, hash)
}

// startCounting starts a server as start does, over a store whose token reads are counted; it
// returns the server and the count.
func startCounting(t *testing.T, backend string) (*srv, *tokenReads) {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	u := storeURL(t, backend)
	st, err := store.Open(t.Context(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	reads := &tokenReads{}
	var wrapped store.Store
	switch s := st.(type) {
	case *sqlite.Store:
		wrapped = sqliteCounting{s, reads}
	case *postgres.Store:
		wrapped = postgresCounting{s, reads}
	default:
		t.Fatalf("store %T", st)
	}
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, Store: wrapped, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	s, err := server.New(g, &server.Config{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &srv{t: t, url: "http://" + ln.Addr().String(), g: g, clock: c, cancel: cancel, done: make(chan error, 1), storeURL: u}
	go func() { out.done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-out.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return out, reads
}

// TestHotRoutesReadNoToken: once the server has read an agent's token from the store, the two
// requests of a call read it no more on their own: the transactions that reserve and record
// confirm it. N calls read the token once, where a read per request made 2N. On both stores.
func TestHotRoutesReadNoToken(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s, reads := startCounting(t, backend)
			secret, _, err := auth.CreateToken(t.Context(), s.g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			const calls = 5
			for i := range calls {
				inv := "inv_" + string(rune('a'+i))
				r := s.do("POST", "/v1/actions", secret, charge(inv, 100))
				if r.status != 200 || r.body["status"] != "reserved" {
					t.Fatalf("POST /v1/actions = %d %s", r.status, r.raw)
				}
				o := s.do("POST", "/v1/actions/"+r.body["action_id"].(string)+"/outcome", secret, map[string]any{"outcome": "committed"})
				if o.status != 200 || o.body["result"] != "committed" {
					t.Fatalf("POST outcome = %d %s", o.status, o.raw)
				}
			}
			if n := reads.n.Load(); n != 1 {
				t.Errorf("%d calls read the token %d times outside their writes, want once (the first request)", calls, n)
			}
		})
	}
}

// TestRevokedTokenRefusedInWrite: a token the server holds as verified, revoked through another
// handle on the store (what another process does), is refused 401 token_revoked by the next
// request of each kind — whether a write of the request found it revoked in its transaction
// (a reservation, an outcome, a refusal's receipt, an approval request) or the request wrote
// nothing (a bad body) — and nothing is written. On both stores.
func TestRevokedTokenRefusedInWrite(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s, _ := startCounting(t, backend)
			other, err := store.Open(t.Context(), s.storeURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			n := 0
			for _, tc := range []struct {
				name string
				// request makes the request after the revocation; held is an action id the
				// token reserved before it.
				request func(secret, held string) *response
			}{
				{"begin", func(secret, _ string) *response { return s.do("POST", "/v1/actions", secret, charge("inv_new", 100)) }},
				{"outcome", func(secret, held string) *response {
					return s.do("POST", "/v1/actions/"+held+"/outcome", secret, map[string]any{"outcome": "committed"})
				}},
				{"outcome not executed", func(secret, held string) *response {
					return s.do("POST", "/v1/actions/"+held+"/outcome", secret, map[string]any{"outcome": "not_executed"})
				}},
				{"denied", func(secret, _ string) *response {
					return s.do("POST", "/v1/actions", secret, map[string]any{"action": "payout.send"})
				}},
				{"approval request", func(secret, _ string) *response {
					return s.do("POST", "/v1/actions", secret, charge("inv_big", 90000))
				}},
				{"bad body", func(secret, _ string) *response { return s.do("POST", "/v1/actions", secret, `{"action":`) }},
			} {
				n++
				secret, tk, err := auth.CreateToken(t.Context(), s.g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}, s.clock.Now())
				if err != nil {
					t.Fatal(err)
				}
				// The server verifies the token (a read), then takes it from memory (a call
				// confirmed in its writes), and holds a reservation made with it.
				var held string
				for i := range 2 {
					r := s.do("POST", "/v1/actions", secret, charge("inv_"+tk.ID+string(rune('a'+i)), 100))
					if r.status != 200 {
						t.Fatalf("%s: POST /v1/actions = %d %s", tc.name, r.status, r.raw)
					}
					held = r.body["action_id"].(string)
				}
				if _, err := other.(store.TokenStore).RevokeToken(t.Context(), tk.ID, s.clock.Now()); err != nil {
					t.Fatal(err)
				}
				before := s.footprint()
				approvals, err := s.g.Store().Approvals(t.Context(), store.ApprovalFilter{})
				if err != nil {
					t.Fatal(err)
				}
				wantProblem(t, tc.name+" after the revocation", tc.request(secret, held), 401, "token_revoked")
				if after := s.footprint(); after != before {
					t.Errorf("%s: the refused request wrote: store %+v, was %+v", tc.name, after, before)
				}
				if after, err := s.g.Store().Approvals(t.Context(), store.ApprovalFilter{}); err != nil || len(after) != len(approvals) {
					t.Errorf("%s: approvals %d (%v), were %d", tc.name, len(after), err, len(approvals))
				}
				e, err := s.g.Store().Effect(t.Context(), "charge:inv_"+tk.ID+"b")
				if err != nil || e.State != store.Executing {
					t.Errorf("%s: the held reservation = %+v (%v), want still executing", tc.name, e, err)
				}
				// Refused once, the token is read from the store again: still refused.
				wantProblem(t, tc.name+", again", tc.request(secret, held), 401, "token_revoked")
			}
		})
	}
}

// TestRevokedTokenRefusedInBatch: requests in flight together, their writes sharing group
// commits, half made with a token revoked (through another handle) after the server verified
// it: each of those is refused 401 and reserves nothing, each of the others is reserved. On both
// stores.
func TestRevokedTokenRefusedInBatch(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s, _ := startCounting(t, backend)
			ts := s.g.Store().(store.TokenStore)
			revoked, tk, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			valid, _, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenAgent, Agent: "other-worker"}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			for _, secret := range []string{revoked, valid} {
				if r := s.do("POST", "/v1/actions", secret, map[string]any{"action": "report.read", "arguments": map[string]any{}}); r.status != 200 {
					t.Fatalf("first request = %d %s", r.status, r.raw)
				}
			}
			other, err := store.Open(t.Context(), s.storeURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if _, err := other.(store.TokenStore).RevokeToken(t.Context(), tk.ID, s.clock.Now()); err != nil {
				t.Fatal(err)
			}
			const each = 8
			type answer struct {
				revoked bool
				key     string
				r       *response
			}
			answers := make(chan answer, 2*each)
			var wg sync.WaitGroup
			for round := range 3 {
				for i := range 2 * each {
					wg.Add(1)
					go func() {
						defer wg.Done()
						inv := fmt.Sprintf("inv_%d_%d", round, i)
						secret := valid
						if i%2 == 0 {
							secret = revoked
						}
						answers <- answer{revoked: i%2 == 0, key: "charge:" + inv, r: s.do("POST", "/v1/actions", secret, charge(inv, 100))}
					}()
				}
				wg.Wait()
				for range 2 * each {
					a := <-answers
					_, err := s.g.Store().Effect(t.Context(), a.key)
					switch {
					case a.revoked:
						wantProblem(t, a.key, a.r, 401, "token_revoked")
						if !errors.Is(err, store.ErrNotFound) {
							t.Errorf("%s, begun with the revoked token: effect read %v, want none", a.key, err)
						}
					case a.r.status != 200 || a.r.body["status"] != "reserved":
						t.Errorf("%s, begun with a valid token: %d %s", a.key, a.r.status, a.r.raw)
					case err != nil:
						t.Errorf("%s, begun with a valid token: %v", a.key, err)
					}
				}
			}
		})
	}
}

// TestExpiredTokenRefusedFromMemory: a token the server holds as verified is refused
// token_expired on both routes of a call from the moment it expires, with nothing written —
// its expiry is checked on every request, never trusted from memory. On both stores.
func TestExpiredTokenRefusedFromMemory(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s, reads := startCounting(t, backend)
			secret, _, err := auth.CreateToken(t.Context(), s.g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker", TTL: time.Minute}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			var held string
			for i := range 2 {
				r := s.do("POST", "/v1/actions", secret, charge(fmt.Sprintf("inv_exp_%d", i), 100))
				if r.status != 200 {
					t.Fatalf("POST /v1/actions = %d %s", r.status, r.raw)
				}
				held = r.body["action_id"].(string)
			}
			if n := reads.n.Load(); n != 1 {
				t.Fatalf("two begins read the token %d times, want once", n)
			}
			s.clock.Add(2 * time.Minute)
			before := s.footprint()
			wantProblem(t, "begin after expiry", s.do("POST", "/v1/actions", secret, charge("inv_exp_new", 100)), 401, "token_expired")
			wantProblem(t, "outcome after expiry", s.do("POST", "/v1/actions/"+held+"/outcome", secret, map[string]any{"outcome": "committed"}), 401, "token_expired")
			if after := s.footprint(); after != before {
				t.Errorf("the refused requests wrote: store %+v, was %+v", after, before)
			}
		})
	}
}
