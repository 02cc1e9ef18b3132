package server_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/server"
)

// eventually polls cond every 20ms for up to 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 5s", what)
}

// TestRevokedJWTOverHTTP: latch serve with a revocation feed read from a real file refuses a JWT
// revoked by jti, and a subject's JWTs, 401 credential_revoked long before their exp, writing
// nothing; a person's open event stream ends with a closed event saying credential_revoked. The
// push route takes revocations only with its own secret, and a pushed revocation refuses too.
func TestRevokedJWTOverHTTP(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			list := filepath.Join(t.TempDir(), "revoked.txt")
			if err := os.WriteFile(list, []byte("iss https://sso.test\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			feed, err := identity.NewRevocationFeed(&identity.RevocationConfig{Source: list, Poll: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			v := iss.verifier(func(c *identity.Config) {
				c.ApproverClaim, c.ApproverValue, c.Revocations = "latch_role", "approver", feed
			})
			s := start(t, backend, &server.Config{Identity: v, Revocations: feed, RevocationSecret: []byte("push-secret")})
			j1 := iss.sign("jwt-worker", map[string]any{"jti": "j1"})
			j2 := iss.sign("jwt-worker", map[string]any{"jti": "j2"})
			other := iss.sign("other-worker", map[string]any{"jti": "o1"})
			pushed := iss.sign("pushed-worker", map[string]any{"jti": "p1"})
			dana := iss.sign("dana", map[string]any{"jti": "d1", "latch_role": "approver"})
			for i, tok := range []string{j1, j2, other, pushed} {
				if r := s.do("POST", "/v1/actions", tok, map[string]any{"action": "report.read"}); r.status != 200 {
					t.Fatalf("token %d before any revocation = %d %s", i, r.status, r.raw)
				}
			}
			ch, resp := subscribe(t, s, dana, "")
			if resp.StatusCode != 200 {
				t.Fatalf("subscribe = %d", resp.StatusCode)
			}

			if err := os.WriteFile(list, []byte("iss https://sso.test\njti j1\nsub other-worker\nsub dana\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			maxID := lastEventID(t, s)
			wantClosed(t, ch, maxID, "credential_revoked")
			eventually(t, "j1 refused", func() bool {
				return s.do("GET", "/v1/approvals", dana, nil).status == 401
			})
			before := s.footprint()
			wantProblem(t, "revoked by jti", s.do("POST", "/v1/actions", j1, charge("inv_1", 100)), 401, "credential_revoked")
			wantProblem(t, "revoked by subject", s.do("POST", "/v1/actions", other, charge("inv_2", 100)), 401, "credential_revoked")
			wantProblem(t, "a person revoked by subject", s.do("GET", "/v1/approvals", dana, nil), 401, "credential_revoked")
			if after := s.footprint(); after != before {
				t.Errorf("refused calls wrote: %+v → %+v", before, after)
			}
			if r := s.do("POST", "/v1/actions", j2, map[string]any{"action": "report.read"}); r.status != 200 {
				t.Errorf("j2, same subject as j1, not revoked = %d %s", r.status, r.raw)
			}

			doc := "iss https://sso.test\njti p1\n"
			wantProblem(t, "a push without the secret", s.do("POST", "/v1/revocations", "", doc), 401, "unauthenticated")
			wantProblem(t, "a push with an agent's JWT", s.do("POST", "/v1/revocations", j2, doc), 401, "invalid_token")
			wantProblem(t, "a push with an API token", s.do("POST", "/v1/revocations", s.approver, doc), 401, "invalid_token")
			if r := s.do("POST", "/v1/actions", pushed, map[string]any{"action": "report.read"}); r.status != 200 {
				t.Fatalf("refused pushes revoked nothing, want 200: %d %s", r.status, r.raw)
			}
			wantProblem(t, "a push that does not read", s.do("POST", "/v1/revocations", "push-secret", "jti p1\n"), 400, "invalid_revocations")
			for range 2 { // idempotent
				if r := s.do("POST", "/v1/revocations", "push-secret", doc); r.status != 200 || r.body["accepted"] != float64(1) {
					t.Fatalf("push = %d %s", r.status, r.raw)
				}
			}
			wantProblem(t, "revoked by a push", s.do("POST", "/v1/actions", pushed, map[string]any{"action": "report.read"}), 401, "credential_revoked")
		})
	}
}

// TestStaleRevocationFeedOverHTTP: a feed polled from a real HTTP server on 127.0.0.1 that
// starts failing keeps its last good list, and once its last good read is older than its max
// staleness every JWT of its issuer is 401 revocation_feed_stale; it recovers when the feed
// answers again. API tokens are not JWTs and are unaffected.
func TestStaleRevocationFeedOverHTTP(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t)
	var down atomic.Bool
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		w.Write([]byte(`{"events": [{"events": {"` + identity.EventSessionRevoked + `": {"subject": {"format": "jwt_id", "iss": "https://sso.test", "jti": "r1"}}}}]}`))
	}))
	t.Cleanup(src.Close)
	feed, err := identity.NewRevocationFeed(&identity.RevocationConfig{Source: src.URL, Poll: 20 * time.Millisecond, MaxStaleness: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	v := iss.verifier(func(c *identity.Config) { c.Revocations = feed })
	s := start(t, "sqlite", &server.Config{Identity: v})
	ok := iss.sign("jwt-worker", map[string]any{"jti": "k1"})
	if r := s.do("POST", "/v1/actions", ok, map[string]any{"action": "report.read"}); r.status != 200 {
		t.Fatalf("fresh feed = %d %s", r.status, r.raw)
	}
	wantProblem(t, "revoked by a CAEP event", s.do("POST", "/v1/actions", iss.sign("jwt-worker", map[string]any{"jti": "r1"}), map[string]any{"action": "report.read"}), 401, "credential_revoked")
	down.Store(true)
	eventually(t, "the feed goes stale", func() bool {
		return s.do("POST", "/v1/actions", ok, map[string]any{"action": "report.read"}).status == 401
	})
	wantProblem(t, "stale feed", s.do("POST", "/v1/actions", ok, map[string]any{"action": "report.read"}), 401, "revocation_feed_stale")
	if r := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "report.read"}); r.status != 200 {
		t.Errorf("an API token while the JWT feed is stale = %d %s", r.status, r.raw)
	}
	down.Store(false)
	eventually(t, "the feed recovers", func() bool {
		return s.do("POST", "/v1/actions", ok, map[string]any{"action": "report.read"}).status == 200
	})
}
