package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

// revocationGuard is a guard whose principals come from j, counting the executor's runs and
// the receipts written.
type revocationGuard struct {
	t    *testing.T
	g    *latch.Guard
	runs int
}

func newRevocationGuard(t *testing.T, j *JWT, now func() time.Time) *revocationGuard {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte("schema: latch.policy/v1\nactions:\n  report.read:\n    decision: allow\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + t.TempDir() + "/s.db", Identity: j, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return &revocationGuard{t: t, g: g}
}

func (rg *revocationGuard) call(token string) error {
	_, err := rg.g.Execute(latch.WithCredential(rg.t.Context(), "Bearer "+token), &latch.Call{Action: "report.read"},
		func(context.Context, json.RawMessage) (any, error) { rg.runs++; return nil, nil })
	return err
}

func (rg *revocationGuard) head() int64 {
	h, err := rg.g.Store().Head(rg.t.Context())
	if err != nil {
		rg.t.Fatal(err)
	}
	return h.Seq
}

// wantRefused checks err is an identity refusal of reason, with ErrIdentity, and that nothing ran
// and no receipt was written since head.
func (rg *revocationGuard) wantRefused(err error, reason latch.Reason, runs int, head int64) {
	rg.t.Helper()
	if !errors.Is(err, latch.ErrIdentity) {
		rg.t.Fatalf("err = %v, want ErrIdentity", err)
	}
	if r := latch.RefusalOf(err); r.Kind != latch.KindIdentity || r.Reason != reason {
		rg.t.Fatalf("RefusalOf(%v) = %s/%s, want identity/%s", err, r.Kind, r.Reason, reason)
	}
	if rg.runs != runs {
		rg.t.Errorf("the executor ran %d times, want %d", rg.runs, runs)
	}
	if h := rg.head(); h != head {
		rg.t.Errorf("receipt head moved from %d to %d: an identity refusal writes nothing", head, h)
	}
}

// TestRevocationFileRefusesBeforeExp revokes through a real file the feed re-reads: by jti, by
// subject, and by subject for tokens issued at or before a time; each revoked token is refused
// credential_revoked long before its exp, and nothing runs or is recorded. A token the file does
// not name still runs.
func TestRevocationFileRefusesBeforeExp(t *testing.T) {
	t.Parallel()
	k := keys()
	clk := newClock(t0)
	dir := t.TempDir()
	list := writeFile(t, dir, "revoked.txt", []byte("# nothing revoked yet\n"))
	feed, err := NewRevocationFeed(&RevocationConfig{Source: list, Poll: time.Second, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	j := newJWT(t, &Config{Issuer: testIssuer, Audience: testAudience, KeyFiles: []string{writePEM(t, dir, "ed.pem", k.ed.Public())},
		Revocations: feed, Now: clk.Now})
	rg := newRevocationGuard(t, j, clk.Now)

	mint := func(sub, jti string, iat time.Time) string {
		c := claims()
		c["sub"], c["jti"], c["iat"] = sub, jti, iat.Unix()
		return sign(t, jwt.SigningMethodEdDSA, k.ed, c, nil)
	}
	a1 := mint("agent-1", "a1", t0)
	a2 := mint("agent-1", "a2", t0)
	b1 := mint("agent-2", "b1", t0)
	c1 := mint("agent-3", "c1", t0.Add(-time.Minute))
	for _, tok := range []string{a1, a2, b1, c1} {
		if err := rg.call(tok); err != nil {
			t.Fatalf("before any revocation: %v", err)
		}
	}
	runs, head := rg.runs, rg.head()

	// Revoke a1 by jti, agent-2 wholly, and agent-3's tokens issued at or before t0-30s.
	writeFile(t, dir, "revoked.txt", []byte(fmt.Sprintf("iss %s\njti a1\nsub agent-2\nsub agent-3 %s\n", testIssuer, t0.Add(-30*time.Second).Format(time.RFC3339))))
	if err := rg.call(a1); err != nil {
		t.Fatalf("within the poll interval the last read stands: %v", err)
	}
	runs++
	head = rg.head()
	clk.Set(t0.Add(2 * time.Second)) // past Poll: the next check reads the file again
	rg.wantRefused(rg.call(a1), latch.ReasonCredentialRevoked, runs, head)
	rg.wantRefused(rg.call(b1), latch.ReasonCredentialRevoked, runs, head)
	rg.wantRefused(rg.call(c1), latch.ReasonCredentialRevoked, runs, head)
	if err := rg.call(a2); err != nil {
		t.Errorf("a2, same subject, another jti: %v", err)
	}
	if err := rg.call(mint("agent-3", "c2", t0)); err != nil {
		t.Errorf("agent-3's token issued after the revocation time: %v", err)
	}
	if _, err := j.Verify(t.Context(), a1); reasonOf(err) != "credential_revoked" || !strings.Contains(err.Error(), `jti "a1"`) {
		t.Errorf("Verify(a1) = %v, want credential_revoked naming the jti", err)
	}

	// A file that no longer parses keeps the last good list: a1 stays revoked.
	writeFile(t, dir, "revoked.txt", []byte("jti a1\n"))
	clk.Set(t0.Add(4 * time.Second))
	if _, err := j.Verify(t.Context(), a1); reasonOf(err) != "credential_revoked" {
		t.Errorf("after a malformed rewrite Verify(a1) = %v, want the last good list's credential_revoked", err)
	}
	if got := feed.Refreshed(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("Refreshed() = %v, want the last good read at %v", got, t0.Add(2*time.Second))
	}
	// Taking a1 off the list lets it through again.
	writeFile(t, dir, "revoked.txt", []byte("iss "+testIssuer+"\nsub agent-2\n"))
	clk.Set(t0.Add(6 * time.Second))
	if _, err := j.Verify(t.Context(), a1); err != nil {
		t.Errorf("a1 taken off the list: %v", err)
	}
}

// TestRevocationURLEventsAndStaleness reads CAEP events from a real HTTP feed on 127.0.0.1:
// session-revoked by jwt_id and credential-change by iss_sub revoke; a failing feed keeps its
// last good state and ages from its last successful read, and past MaxStaleness refuses every
// token of the issuer it covers revocation_feed_stale, while a verifier of an issuer it does not
// cover is unaffected. A feed back in service is fresh again.
func TestRevocationURLEventsAndStaleness(t *testing.T) {
	t.Parallel()
	k := keys()
	clk := newClock(t0)
	dir := t.TempDir()
	events := func(sets ...map[string]any) []byte {
		b, err := json.Marshal(map[string]any{"events": sets})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	srv := newJWKSServer(t, events())
	const otherIssuer = "https://other.example"
	feed, err := NewRevocationFeed(&RevocationConfig{Source: srv.URL + "/revocations", Issuers: []string{testIssuer},
		Poll: 10 * time.Second, MaxStaleness: time.Minute, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	pemPath := writePEM(t, dir, "ed.pem", k.ed.Public())
	j := newJWT(t, &Config{Issuer: testIssuer, Audience: testAudience, KeyFiles: []string{pemPath}, Revocations: feed, Now: clk.Now})
	other := newJWT(t, &Config{Issuer: otherIssuer, Audience: testAudience, KeyFiles: []string{pemPath}, Revocations: feed, Now: clk.Now})
	rg := newRevocationGuard(t, j, clk.Now)
	mint := func(iss, sub, jti string) string {
		c := claims()
		c["iss"], c["sub"], c["jti"] = iss, sub, jti
		return sign(t, jwt.SigningMethodEdDSA, k.ed, c, nil)
	}
	x1, x2, y1 := mint(testIssuer, "agent-1", "x1"), mint(testIssuer, "agent-1", "x2"), mint(testIssuer, "agent-9", "y1")
	o1 := mint(otherIssuer, "agent-9", "o1")
	for _, tok := range []string{x1, x2, y1} {
		if err := rg.call(tok); err != nil {
			t.Fatalf("before any revocation: %v", err)
		}
	}

	srv.serve(http.StatusOK, events(
		map[string]any{"iss": "https://transmitter.example", "iat": t0.Unix(), "events": map[string]any{
			EventSessionRevoked: map[string]any{"subject": map[string]any{"format": "jwt_id", "iss": testIssuer, "jti": "x1"}, "event_timestamp": t0.Unix()}}},
		map[string]any{"iss": "https://transmitter.example", "iat": t0.Unix(), "events": map[string]any{
			EventCredentialChange: map[string]any{"subject": map[string]any{"format": "iss_sub", "iss": testIssuer, "sub": "agent-9"},
				"change_type": "revoke", "credential_type": "x509", "event_timestamp": t0.Unix()}}},
		// An update is not a revocation, and an unknown event type is ignored.
		map[string]any{"events": map[string]any{
			EventCredentialChange:         map[string]any{"subject": map[string]any{"format": "iss_sub", "iss": testIssuer, "sub": "agent-1"}, "change_type": "update"},
			"https://example.com/unknown": map[string]any{"anything": true}}},
	))
	clk.Set(t0.Add(11 * time.Second))
	runs, head := rg.runs, rg.head()
	rg.wantRefused(rg.call(x1), latch.ReasonCredentialRevoked, runs, head)
	rg.wantRefused(rg.call(y1), latch.ReasonCredentialRevoked, runs, head)
	if err := rg.call(x2); err != nil {
		t.Fatalf("x2 (another jti of agent-1; its update event is no revocation): %v", err)
	}
	if _, err := other.Verify(t.Context(), o1); err != nil {
		t.Errorf("agent-9 of another issuer: %v", err)
	}

	// The feed fails: the last good state stays, and the feed ages from its last good read.
	srv.serve(http.StatusInternalServerError, []byte("down"))
	clk.Set(t0.Add(50 * time.Second))
	if _, err := j.Verify(t.Context(), x1); reasonOf(err) != "credential_revoked" {
		t.Errorf("feed down, Verify(x1) = %v, want credential_revoked from the last good state", err)
	}
	if _, err := j.Verify(t.Context(), x2); err != nil {
		t.Errorf("feed down within max staleness, Verify(x2) = %v", err)
	}
	clk.Set(t0.Add(72 * time.Second)) // 61s after the last good read at t0+11s
	runs, head = rg.runs, rg.head()
	rg.wantRefused(rg.call(x2), latch.ReasonRevocationFeedStale, runs, head)
	if _, err := other.Verify(t.Context(), o1); err != nil {
		t.Errorf("a stale feed refuses only the issuers it covers; another issuer's token: %v", err)
	}

	// A body past MaxBytes is a failed read too; then the feed recovers.
	srv.serve(http.StatusOK, []byte(strings.Repeat(" ", defaultRevocationBytes+1)))
	clk.Set(t0.Add(90 * time.Second))
	if _, err := j.Verify(t.Context(), x2); reasonOf(err) != "revocation_feed_stale" {
		t.Errorf("oversized feed, Verify(x2) = %v, want revocation_feed_stale", err)
	}
	srv.serve(http.StatusOK, events())
	clk.Set(t0.Add(101 * time.Second))
	if _, err := j.Verify(t.Context(), x1); err != nil {
		t.Errorf("feed back, nothing revoked any more, Verify(x1) = %v", err)
	}
}

// TestRevocationNeverRead: with a bound, a feed never read refuses its issuers; without one it
// changes no decision.
func TestRevocationNeverRead(t *testing.T) {
	t.Parallel()
	k := keys()
	dir := t.TempDir()
	missing := filepath.Join(dir, "absent.txt")
	tok := sign(t, jwt.SigningMethodEdDSA, k.ed, claims(), nil)
	for _, tc := range []struct {
		bound time.Duration
		want  string
	}{{0, ""}, {time.Minute, "revocation_feed_stale"}} {
		feed, err := NewRevocationFeed(&RevocationConfig{Source: missing, MaxStaleness: tc.bound, Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		if err := feed.Refresh(t.Context()); err == nil || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Refresh of a missing file = %v, want not exist", err)
		}
		j := newJWT(t, &Config{Issuer: testIssuer, Audience: testAudience, KeyFiles: []string{writePEM(t, dir, "ed.pem", k.ed.Public())},
			Revocations: feed, Now: func() time.Time { return t0 }})
		if _, err := j.Verify(t.Context(), tok); reasonOf(err) != tc.want {
			t.Errorf("max staleness %s: Verify = %v, want %q", tc.bound, err, tc.want)
		}
	}
}

// TestRevocationPush: pushed revocations refuse, pushing again changes nothing, a push keeps a
// push-only feed fresh, and a bad document is refused naming what is wrong.
func TestRevocationPush(t *testing.T) {
	t.Parallel()
	clk := newClock(t0)
	feed, err := NewRevocationFeed(&RevocationConfig{MaxStaleness: time.Minute, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.Check(t.Context(), testIssuer, "agent-1", "j1", t0); reasonOf(err) != "revocation_feed_stale" {
		t.Errorf("never pushed to: %v, want revocation_feed_stale", err)
	}
	doc := []byte("iss " + testIssuer + "\njti j1\n")
	for range 2 {
		if n, err := feed.Push(doc); err != nil || n != 1 {
			t.Fatalf("Push = %d, %v", n, err)
		}
	}
	if err := feed.Check(t.Context(), testIssuer, "agent-1", "j1", t0); reasonOf(err) != "credential_revoked" {
		t.Errorf("pushed jti: %v, want credential_revoked", err)
	}
	if err := feed.Check(t.Context(), testIssuer, "agent-1", "j2", t0); err != nil {
		t.Errorf("another jti: %v", err)
	}
	clk.Set(t0.Add(2 * time.Minute))
	if err := feed.Check(t.Context(), testIssuer, "agent-1", "j2", t0); reasonOf(err) != "revocation_feed_stale" {
		t.Errorf("no push for 2m: %v, want revocation_feed_stale", err)
	}
	if _, err := feed.Push([]byte(`{"events": []}`)); err != nil {
		t.Fatal(err)
	}
	if err := feed.Check(t.Context(), testIssuer, "agent-1", "j2", t0); err != nil {
		t.Errorf("after a heartbeat push: %v", err)
	}
	for _, bad := range []struct{ doc, want string }{
		{"jti j1\n", "line 1: jti before any iss line"},
		{"iss x\nsub a not-a-time\n", `line 2: "not-a-time" is not an RFC 3339 time`},
		{"iss x\nrevoke a\n", `line 2: "revoke" is not iss, jti or sub`},
		{`{"events": [{"events": {"` + EventSessionRevoked + `": {"subject": {"format": "email", "iss": "x"}}}}]}`, `/events/0/events/https:~1~1schemas.openid.net~1secevent~1caep~1event-type~1session-revoked: subject format "email"`},
		{`{"events": [{"events": {"` + EventSessionRevoked + `": {}}}]}`, "no subject"},
		{`{"events": 3}`, "revocation events"},
	} {
		if _, err := feed.Push([]byte(bad.doc)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Push(%q) = %v, want an error containing %q", bad.doc, err, bad.want)
		}
	}
}

// TestRevocationConfig refuses a feed an on-path attacker could substitute and bounds that
// cannot hold.
func TestRevocationConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  RevocationConfig
		want string
	}{
		{RevocationConfig{Source: "http://idp.example/revoked"}, "must be https"},
		{RevocationConfig{Source: "https://idp.example/r", Poll: time.Minute, MaxStaleness: 30 * time.Second}, "exceeds max staleness"},
		{RevocationConfig{MaxStaleness: -time.Second}, "negative"},
	} {
		if _, err := NewRevocationFeed(&tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewRevocationFeed(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := NewRevocationFeed(&RevocationConfig{Source: "http://127.0.0.1:9/revoked"}); err != nil {
		t.Errorf("http on loopback: %v", err)
	}
}
