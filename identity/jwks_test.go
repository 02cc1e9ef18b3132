package identity

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
)

// remote returns a verifier on srv's JWKS with the clock clk.
func remote(t *testing.T, srv *jwksServer, clk *clock) *JWT {
	t.Helper()
	return newJWT(t, &Config{
		Issuer:   testIssuer,
		Audience: testAudience,
		JWKSURL:  srv.URL + "/.well-known/jwks.json",
		Now:      clk.Now,
	})
}

// at re-mints the standard claims so that they are valid at clock time now.
func validAt(now time.Time) jwt.MapClaims {
	c := claims()
	c["iat"] = now.Unix()
	c["exp"] = now.Add(time.Hour).Unix()
	return c
}

func TestJWKSAlgorithms(t *testing.T) {
	t.Parallel()
	k := keys()
	srv := newJWKSServer(t, jwksDoc(t,
		jwkOf(t, "r", k.rsa.Public()),
		jwkOf(t, "e", k.ec.Public()),
		jwkOf(t, "d", k.ed.Public()),
	))
	j := remote(t, srv, newClock(t0))
	tests := []struct {
		name       string
		method     jwt.SigningMethod
		key        any
		kid        any // nil: no kid header
		wantReason string
		wantMsg    string
	}{
		{name: "RS256", method: jwt.SigningMethodRS256, key: k.rsa, kid: "r"},
		{name: "ES256", method: jwt.SigningMethodES256, key: k.ec, kid: "e"},
		{name: "EdDSA", method: jwt.SigningMethodEdDSA, key: k.ed, kid: "d"},
		{name: "no kid: tried by algorithm", method: jwt.SigningMethodES256, key: k.ec},
		{name: "wrong key under a known kid", method: jwt.SigningMethodES256, key: k.ec2, kid: "e",
			wantReason: "signature", wantMsg: "invalid signature"},
		{name: "RS256 naming the EC key", method: jwt.SigningMethodRS256, key: k.rsa, kid: "e",
			wantReason: "no_key", wantMsg: `key "e" does not fit algorithm RS256`},
		{name: "HS256 keyed with the RSA modulus", method: jwt.SigningMethodHS256, key: k.rsa.N.Bytes(), kid: "r",
			wantReason: "algorithm", wantMsg: `algorithm "HS256" not accepted`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			header := map[string]any{}
			if tt.kid != nil {
				header["kid"] = tt.kid
			}
			p, err := j.Verify(t.Context(), sign(t, tt.method, tt.key, claims(), header))
			if tt.wantReason == "" {
				if err != nil || p.Agent != "agent-1" {
					t.Fatalf("Verify = %+v, %v; want agent-1", p, err)
				}
				return
			}
			if reasonOf(err) != tt.wantReason || err.Error() != tt.wantMsg {
				t.Fatalf("Verify = %v, want %s: %s", err, tt.wantReason, tt.wantMsg)
			}
		})
	}
	t.Cleanup(func() {
		// All subtests ran on one cached fetch: nothing was stale or unknown.
		if n := srv.hits.Load(); n != 1 {
			t.Errorf("jwks fetched %d times, want 1", n)
		}
	})
}

// step is one verification at a clock time, with the server hit count expected after it.
type step struct {
	name       string
	at         time.Duration // after t0
	serve      []byte        // if set, the server switches to this document first
	status     int           // with serve: the status served (0: 200)
	kid        string
	signer     any
	method     jwt.SigningMethod
	wantReason string // "" = passes
	wantMsg    string // checked if set
	wantHits   int64
}

func runSteps(t *testing.T, srv *jwksServer, j *JWT, clk *clock, steps []step) {
	t.Helper()
	for _, s := range steps {
		if s.serve != nil {
			status := s.status
			if status == 0 {
				status = http.StatusOK
			}
			srv.serve(status, s.serve)
		}
		now := t0.Add(s.at)
		clk.Set(now)
		method := s.method
		if method == nil {
			method = jwt.SigningMethodES256
		}
		header := map[string]any{}
		if s.kid != "" {
			header["kid"] = s.kid
		}
		_, err := j.Verify(t.Context(), sign(t, method, s.signer, validAt(now), header))
		if got := reasonOf(err); got != s.wantReason {
			t.Fatalf("%s: Verify = %v (reason %q), want reason %q", s.name, err, got, s.wantReason)
		}
		if s.wantMsg != "" && err.Error() != s.wantMsg {
			t.Errorf("%s: Verify error = %q, want %q", s.name, err.Error(), s.wantMsg)
		}
		if n := srv.hits.Load(); n != s.wantHits {
			t.Fatalf("%s: jwks fetched %d times, want %d", s.name, n, s.wantHits)
		}
	}
}

func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	k := keys()
	srv := newJWKSServer(t, jwksDoc(t, jwkOf(t, "a", k.ec.Public())))
	clk := newClock(t0)
	j := remote(t, srv, clk)
	newSet := jwksDoc(t, jwkOf(t, "b", k.ec2.Public()))
	runSteps(t, srv, j, clk, []step{
		{name: "first use fetches", at: 0, kid: "a", signer: k.ec, wantHits: 1},
		{name: "cached", at: time.Second, kid: "a", signer: k.ec, wantHits: 1},
		// The issuer rotates to b. The next fetch is allowed 30s after the last one.
		{name: "new kid inside the rate-limit window", at: 10 * time.Second, serve: newSet, kid: "b", signer: k.ec2,
			wantReason: "unknown_key", wantMsg: `unknown key id "b"`, wantHits: 1},
		{name: "new kid triggers a refresh", at: 31 * time.Second, kid: "b", signer: k.ec2, wantHits: 2},
		{name: "new kid cached", at: 40 * time.Second, kid: "b", signer: k.ec2, wantHits: 2},
		{name: "retired kid is gone", at: 41 * time.Second, kid: "a", signer: k.ec,
			wantReason: "unknown_key", wantMsg: `unknown key id "a"`, wantHits: 2},
	})
}

func TestJWKSUnknownKidRateLimited(t *testing.T) {
	t.Parallel()
	k := keys()
	srv := newJWKSServer(t, jwksDoc(t, jwkOf(t, "a", k.ec.Public())))
	clk := newClock(t0)
	j := remote(t, srv, clk)
	steps := []step{{name: "known kid", at: 0, kid: "a", signer: k.ec, wantHits: 1}}
	// A flood of made-up kids within one window costs the issuer nothing.
	for i := range 5 {
		steps = append(steps, step{name: "made-up kid", at: time.Duration(i+1) * time.Second, kid: "nope", signer: k.ec,
			wantReason: "unknown_key", wantMsg: `unknown key id "nope"`, wantHits: 1})
	}
	steps = append(steps,
		step{name: "window over: one refetch", at: 30 * time.Second, kid: "nope", signer: k.ec, wantReason: "unknown_key", wantHits: 2},
		step{name: "new window", at: 31 * time.Second, kid: "nope2", signer: k.ec, wantReason: "unknown_key", wantHits: 2},
		step{name: "new window", at: 59 * time.Second, kid: "nope3", signer: k.ec, wantReason: "unknown_key", wantHits: 2},
		step{name: "known kid still served", at: 59 * time.Second, kid: "a", signer: k.ec, wantHits: 2},
		step{name: "next window", at: 60 * time.Second, kid: "nope", signer: k.ec, wantReason: "unknown_key", wantHits: 3},
	)
	runSteps(t, srv, j, clk, steps)
}

func TestJWKSCacheTTL(t *testing.T) {
	t.Parallel()
	k := keys()
	doc := jwksDoc(t, jwkOf(t, "a", k.ec.Public()))
	srv := newJWKSServer(t, doc)
	clk := newClock(t0)
	j := remote(t, srv, clk) // CacheTTL: default 10m
	runSteps(t, srv, j, clk, []step{
		{name: "first use", at: 0, kid: "a", signer: k.ec, wantHits: 1},
		{name: "just inside the ttl", at: 10*time.Minute - time.Second, kid: "a", signer: k.ec, wantHits: 1},
		{name: "at the ttl", at: 10 * time.Minute, kid: "a", signer: k.ec, wantHits: 2},
		{name: "fresh again", at: 15 * time.Minute, kid: "a", signer: k.ec, wantHits: 2},
		// The set goes stale while the server is failing: stale keys are not used.
		{name: "stale, server failing", at: 20 * time.Minute, serve: []byte("oops"), status: http.StatusInternalServerError,
			kid: "a", signer: k.ec, wantReason: "keys_unavailable", wantMsg: "fetch jwks: status 500", wantHits: 3},
		{name: "failure not retried inside the window", at: 20*time.Minute + 29*time.Second, kid: "a", signer: k.ec,
			wantReason: "keys_unavailable", wantMsg: "fetch jwks: status 500", wantHits: 3},
		{name: "server back after the window", at: 20*time.Minute + 30*time.Second, serve: doc, kid: "a", signer: k.ec, wantHits: 4},
	})
}

func TestJWKSUnavailable(t *testing.T) {
	t.Parallel()
	k := keys()
	good := jwkOf(t, "a", k.ec.Public())
	tests := []struct {
		name    string
		status  int
		body    []byte
		down    bool
		wantMsg string // prefix
	}{
		{name: "server down", down: true, wantMsg: "fetch jwks: Get "},
		{name: "status 500", status: 500, body: jwksDoc(t, good), wantMsg: "fetch jwks: status 500"},
		{name: "status 404", status: 404, wantMsg: "fetch jwks: status 404"},
		{name: "not JSON", status: 200, body: []byte("<html>"), wantMsg: "read jwks: decode jwks: "},
		{name: "too large", status: 200, body: []byte(`{"keys":[],"pad":"` + strings.Repeat("x", maxJWKSBytes) + `"}`),
			wantMsg: "jwks larger than 1048576 bytes"},
		{name: "duplicate kid", status: 200, body: jwksDoc(t, good, jwkOf(t, "a", k.ec2.Public())),
			wantMsg: `read jwks: duplicate key id "a"`},
		{name: "no usable key", status: 200,
			body:    jwksDoc(t, map[string]any{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}),
			wantMsg: "read jwks: jwks has no usable signing key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newJWKSServer(t, tt.body)
			srv.serve(tt.status, tt.body)
			if tt.down {
				srv.Close()
			}
			j := remote(t, srv, newClock(t0))
			p, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodES256, k.ec, claims(), map[string]any{"kid": "a"}))
			if err == nil {
				t.Fatalf("Verify = %+v, nil; want keys_unavailable", p)
			}
			if reasonOf(err) != "keys_unavailable" || !strings.HasPrefix(err.Error(), tt.wantMsg) {
				t.Fatalf("Verify = %v, want keys_unavailable: %s…", err, tt.wantMsg)
			}
		})
	}
}

// TestJWKSConcurrentFirstUse: callers racing on a cold cache share one fetch.
func TestJWKSConcurrentFirstUse(t *testing.T) {
	t.Parallel()
	k := keys()
	srv := newJWKSServer(t, jwksDoc(t, jwkOf(t, "a", k.ec.Public())))
	j := remote(t, srv, newClock(t0))
	token := sign(t, jwt.SigningMethodES256, k.ec, claims(), map[string]any{"kid": "a"})
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = j.Verify(t.Context(), token)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Verify #%d = %v", i, err)
		}
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("jwks fetched %d times, want 1", n)
	}
}

func TestParseJWKS(t *testing.T) {
	t.Parallel()
	k := keys()
	with := func(m map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for name, v := range m {
			out[name] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	ec := jwkOf(t, "ec", k.ec.Public())
	tests := []struct {
		name     string
		keys     []map[string]any
		wantKids []string // kids of the keys kept, in order ("" for none)
		wantErr  string
	}{
		{name: "all three types", keys: []map[string]any{jwkOf(t, "r", k.rsa.Public()), ec, jwkOf(t, "d", k.ed.Public())},
			wantKids: []string{"r", "ec", "d"}},
		{name: "use sig kept", keys: []map[string]any{with(ec, "use", "sig")}, wantKids: []string{"ec"}},
		{name: "use enc skipped", keys: []map[string]any{with(ec, "use", "enc"), jwkOf(t, "d", k.ed.Public())}, wantKids: []string{"d"}},
		{name: "key without kid kept", keys: []map[string]any{jwkOf(t, "", k.ed.Public())}, wantKids: []string{""}},
		{name: "matching alg kept", keys: []map[string]any{with(ec, "alg", "ES256")}, wantKids: []string{"ec"}},
		{name: "contradicting alg skipped", keys: []map[string]any{with(ec, "alg", "RS256"), jwkOf(t, "d", k.ed.Public())}, wantKids: []string{"d"}},
		{name: "unsupported alg skipped", keys: []map[string]any{with(jwkOf(t, "r", k.rsa.Public()), "alg", "RS384"), ec}, wantKids: []string{"ec"}},
		{name: "symmetric key skipped", keys: []map[string]any{{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}, ec}, wantKids: []string{"ec"}},
		{name: "weak RSA skipped", keys: []map[string]any{jwkOf(t, "w", k.rsaWeak.Public()), ec}, wantKids: []string{"ec"}},
		{name: "P-384 skipped", keys: []map[string]any{jwkOf(t, "p", k.ecP384.Public()), ec}, wantKids: []string{"ec"}},
		{name: "point not on the curve skipped", keys: []map[string]any{with(ec, "kid", "bad", "y", b64u(make([]byte, 32))), ec}, wantKids: []string{"ec"}},
		{name: "bad base64 skipped", keys: []map[string]any{with(ec, "kid", "bad", "x", "!!"), ec}, wantKids: []string{"ec"}},
		{name: "even RSA exponent skipped", keys: []map[string]any{with(jwkOf(t, "r", k.rsa.Public()), "e", b64u([]byte{2})), ec}, wantKids: []string{"ec"}},
		{name: "short Ed25519 skipped", keys: []map[string]any{with(jwkOf(t, "d", k.ed.Public()), "x", b64u([]byte{1, 2})), ec}, wantKids: []string{"ec"}},
		{name: "wrongly typed member skipped", keys: []map[string]any{with(ec, "kid", 7), jwkOf(t, "d", k.ed.Public())}, wantKids: []string{"d"}},
		{name: "duplicate kid refused", keys: []map[string]any{ec, with(jwkOf(t, "", k.ed.Public()), "kid", "ec")},
			wantErr: `duplicate key id "ec"`},
		{name: "duplicate kid of a skipped key allowed", keys: []map[string]any{ec, with(ec, "use", "enc")}, wantKids: []string{"ec"}},
		{name: "nothing usable", keys: []map[string]any{with(ec, "use", "enc")}, wantErr: "jwks has no usable signing key"},
		{name: "empty", keys: nil, wantErr: "jwks has no usable signing key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set, err := parseJWKS(jwksDoc(t, tt.keys...))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("parseJWKS = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseJWKS = %v", err)
			}
			var kids []string
			for _, key := range set.keys {
				kids = append(kids, key.kid)
			}
			if diff := cmp.Diff(tt.wantKids, kids); diff != "" {
				t.Errorf("parseJWKS kids (-want +got):\n%s", diff)
			}
		})
	}
}

// TestJWKSRedirectToPlainHTTP: the default client does not follow an https→http downgrade (here,
// from a loopback server to a non-loopback http URL, which is never dialled).
func TestJWKSRedirectToPlainHTTP(t *testing.T) {
	t.Parallel()
	k := keys()
	srv := httptest.NewServer(http.RedirectHandler("http://issuer.example/jwks", http.StatusFound))
	t.Cleanup(srv.Close)
	j := newJWT(t, &Config{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL, Now: newClock(t0).Now})
	_, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodES256, k.ec, claims(), nil))
	want := `jwks url "http://issuer.example/jwks" must be https (http only for loopback hosts)`
	if reasonOf(err) != "keys_unavailable" || !strings.Contains(err.Error(), want) {
		t.Fatalf("Verify = %v, want keys_unavailable …%s", err, want)
	}
}
