package identity

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch"
)

// pinned writes the three fixture public keys to a temp dir and returns a config pinning them,
// with the clock at t0.
func pinned(t *testing.T) *Config {
	t.Helper()
	k := keys()
	dir := t.TempDir()
	return &Config{
		Issuer:   testIssuer,
		Audience: testAudience,
		KeyFiles: []string{
			writePEM(t, dir, "rsa.pem", k.rsa.Public()),
			writePEM(t, dir, "ec.pem", k.ec.Public()),
			writePEM(t, dir, "ed.pem", k.ed.Public()),
		},
		Now: func() time.Time { return t0 },
	}
}

func TestVerifyPinned(t *testing.T) {
	t.Parallel()
	k := keys()
	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := claims()
		edit(c)
		return c
	}
	// The HMAC "secret" an algorithm-confusion attacker would use: the verifier's public key.
	rsaPEM := pemBytes(t, k.rsa.Public())

	tests := []struct {
		name       string
		method     jwt.SigningMethod
		key        any
		claims     jwt.MapClaims
		header     map[string]any
		cfg        func(t *testing.T, c *Config)
		token      string // overrides the signed token
		wantAgent  string
		wantReason string
		wantMsg    string
	}{
		{name: "RS256", method: jwt.SigningMethodRS256, key: k.rsa, claims: claims(), wantAgent: "agent-1"},
		{name: "ES256", method: jwt.SigningMethodES256, key: k.ec, claims: claims(), wantAgent: "agent-1"},
		{name: "EdDSA", method: jwt.SigningMethodEdDSA, key: k.ed, claims: claims(), wantAgent: "agent-1"},
		{name: "RS256 wrong key", method: jwt.SigningMethodRS256, key: k.rsa2, claims: claims(),
			wantReason: "signature", wantMsg: "invalid signature"},
		{name: "ES256 wrong key", method: jwt.SigningMethodES256, key: k.ec2, claims: claims(),
			wantReason: "signature", wantMsg: "invalid signature"},
		{name: "EdDSA wrong key", method: jwt.SigningMethodEdDSA, key: k.ed2, claims: claims(),
			wantReason: "signature", wantMsg: "invalid signature"},
		{name: "alg none", method: jwt.SigningMethodNone, key: jwt.UnsafeAllowNoneSignatureType, claims: claims(),
			wantReason: "algorithm", wantMsg: `algorithm "none" not accepted`},
		{name: "HS256 keyed with the public key", method: jwt.SigningMethodHS256, key: rsaPEM, claims: claims(),
			wantReason: "algorithm", wantMsg: `algorithm "HS256" not accepted`},
		{name: "RS384 not accepted", method: jwt.SigningMethodRS384, key: k.rsa, claims: claims(),
			wantReason: "algorithm", wantMsg: `algorithm "RS384" not accepted`},
		{name: "algorithm outside the configured subset", method: jwt.SigningMethodRS256, key: k.rsa, claims: claims(),
			cfg:        func(t *testing.T, c *Config) { c.Algorithms = []string{"ES256"} },
			wantReason: "algorithm", wantMsg: `algorithm "RS256" not accepted`},
		{name: "RS256 against an EC key only", method: jwt.SigningMethodRS256, key: k.rsa, claims: claims(),
			cfg: func(t *testing.T, c *Config) {
				c.KeyFiles = []string{writePEM(t, t.TempDir(), "ec.pem", k.ec.Public())}
			},
			wantReason: "no_key", wantMsg: "no key for algorithm RS256"},
		{name: "RS256 naming an EC key's kid", method: jwt.SigningMethodRS256, key: k.rsa, claims: claims(),
			header: map[string]any{"kid": "ec"},
			cfg: func(t *testing.T, c *Config) {
				c.KeyIDs = []string{"rsa", "ec", "ed"}
			},
			wantReason: "no_key", wantMsg: `key "ec" does not fit algorithm RS256`},
		{name: "ES256 against an Ed25519 key only", method: jwt.SigningMethodES256, key: k.ec, claims: claims(),
			cfg: func(t *testing.T, c *Config) {
				c.KeyFiles = []string{writePEM(t, t.TempDir(), "ed.pem", k.ed.Public())}
			},
			wantReason: "no_key", wantMsg: "no key for algorithm ES256"},
		{name: "kid matches a labelled key", method: jwt.SigningMethodES256, key: k.ec, claims: claims(),
			header:    map[string]any{"kid": "ec"},
			cfg:       func(t *testing.T, c *Config) { c.KeyIDs = []string{"rsa", "ec", "ed"} },
			wantAgent: "agent-1"},
		{name: "unknown kid with labelled keys", method: jwt.SigningMethodES256, key: k.ec, claims: claims(),
			header:     map[string]any{"kid": "k2"},
			cfg:        func(t *testing.T, c *Config) { c.KeyIDs = []string{"rsa", "ec", "ed"} },
			wantReason: "unknown_key", wantMsg: `unknown key id "k2"`},
		{name: "kid with unlabelled keys", method: jwt.SigningMethodES256, key: k.ec, claims: claims(),
			header: map[string]any{"kid": "whatever-the-issuer-calls-it"}, wantAgent: "agent-1"},
		{name: "no kid with labelled keys", method: jwt.SigningMethodEdDSA, key: k.ed, claims: claims(),
			cfg:       func(t *testing.T, c *Config) { c.KeyIDs = []string{"rsa", "ec", "ed"} },
			wantAgent: "agent-1"},
		{name: "kid not a string", method: jwt.SigningMethodEdDSA, key: k.ed, claims: claims(),
			header:     map[string]any{"kid": 7},
			wantReason: "malformed", wantMsg: "key id is not a string"},
		{name: "crit header", method: jwt.SigningMethodEdDSA, key: k.ed, claims: claims(),
			header:     map[string]any{"crit": []string{"exp-ext"}},
			wantReason: "malformed", wantMsg: "critical header extensions not supported"},
		{name: "wrong issuer", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }),
			wantReason: "issuer", wantMsg: `issuer "https://evil.example" not accepted`},
		{name: "issuer differs by a trailing slash", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["iss"] = testIssuer + "/" }),
			wantReason: "issuer", wantMsg: `issuer "https://issuer.example/" not accepted`},
		{name: "no issuer", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { delete(c, "iss") }),
			wantReason: "issuer", wantMsg: "token has no issuer"},
		{name: "wrong audience", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["aud"] = "x" }),
			wantReason: "audience", wantMsg: `audience "x" not accepted`},
		{name: "audience list containing ours", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:    with(func(c jwt.MapClaims) { c["aud"] = []string{"other", testAudience} }),
			wantAgent: "agent-1"},
		{name: "audience list without ours", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["aud"] = []string{"a", "b"} }),
			wantReason: "audience", wantMsg: `audience ["a", "b"] not accepted`},
		{name: "no audience", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { delete(c, "aud") }),
			wantReason: "audience", wantMsg: "token has no audience"},
		{name: "missing exp", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { delete(c, "exp") }),
			wantReason: "no_expiry", wantMsg: "token has no expiry (exp)"},
		{name: "exp not a number", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["exp"] = "tomorrow" }),
			wantReason: "no_expiry", wantMsg: "exp is not a number"},
		{name: "nbf not a number", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["nbf"] = "now" }),
			wantReason: "malformed", wantMsg: "a time claim (nbf, iat) is not a number"},
		{name: "issuer not a string", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["iss"] = 1 }),
			wantReason: "issuer", wantMsg: "issuer is not a string"},
		{name: "audience list of numbers", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["aud"] = []int{1} }),
			wantReason: "audience", wantMsg: "audience is not a string or a list of strings"},
		{name: "expired", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Hour).Unix() }),
			wantReason: "expired", wantMsg: "token expired at 2026-11-29T08:00:00Z"},
		{name: "nbf in the future", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["nbf"] = t0.Add(time.Minute).Unix() }),
			wantReason: "not_yet_valid", wantMsg: "token not valid before 2026-11-29T09:01:00Z"},
		{name: "nbf within the leeway", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:    with(func(c jwt.MapClaims) { c["nbf"] = t0.Add(30 * time.Second).Unix() }),
			wantAgent: "agent-1"},
		{name: "nbf one second beyond the leeway", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["nbf"] = t0.Add(31 * time.Second).Unix() }),
			wantReason: "not_yet_valid", wantMsg: "token not valid before 2026-11-29T09:00:31Z"},
		{name: "iat in the future", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["iat"] = t0.Add(time.Minute).Unix() }),
			wantReason: "issued_in_future", wantMsg: "token issued in the future, at 2026-11-29T09:01:00Z"},
		{name: "iat absent", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:    with(func(c jwt.MapClaims) { delete(c, "iat") }),
			wantAgent: "agent-1"},
		{name: "missing agent claim", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { delete(c, "sub") }),
			wantReason: "agent_claim", wantMsg: `agent claim "sub" missing`},
		{name: "empty agent claim", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["sub"] = "" }),
			wantReason: "agent_claim", wantMsg: `agent claim "sub" is not a non-empty string`},
		{name: "agent claim not a string", method: jwt.SigningMethodEdDSA, key: k.ed,
			claims:     with(func(c jwt.MapClaims) { c["sub"] = 42 }),
			wantReason: "agent_claim", wantMsg: `agent claim "sub" is not a non-empty string`},
		{name: "not a JWT", token: "not-a-jwt",
			wantReason: "malformed", wantMsg: "malformed token"},
		{name: "garbage segments", token: "a.b.c",
			wantReason: "malformed", wantMsg: "malformed token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := pinned(t)
			if tt.cfg != nil {
				tt.cfg(t, cfg)
			}
			j := newJWT(t, cfg)
			token := tt.token
			if token == "" {
				token = sign(t, tt.method, tt.key, tt.claims, tt.header)
			}
			p, err := j.Verify(t.Context(), token)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("Verify = %v, want agent %q", err, tt.wantAgent)
				}
				if p.Agent != tt.wantAgent {
					t.Errorf("Verify agent = %q, want %q", p.Agent, tt.wantAgent)
				}
				return
			}
			if got := reasonOf(err); got != tt.wantReason {
				t.Fatalf("Verify = %v (reason %q), want reason %q", err, got, tt.wantReason)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("Verify error = %q, want %q", err.Error(), tt.wantMsg)
			}
			if p.Agent != "" || p.Claims != nil {
				t.Errorf("Verify returned principal %+v with an error", p)
			}
			for _, part := range strings.Split(token, ".") {
				if len(part) >= 8 && strings.Contains(err.Error(), part) {
					t.Errorf("Verify error %q echoes the token", err.Error())
				}
			}
		})
	}
}

// TestVerifyTamperedPayload swaps in another payload under a valid signature.
func TestVerifyTamperedPayload(t *testing.T) {
	t.Parallel()
	k := keys()
	j := newJWT(t, pinned(t))
	good := strings.Split(sign(t, jwt.SigningMethodES256, k.ec, claims(), nil), ".")
	c := claims()
	c["sub"] = "admin"
	evil := strings.Split(sign(t, jwt.SigningMethodES256, k.ec2, c, nil), ".")
	_, err := j.Verify(t.Context(), good[0]+"."+evil[1]+"."+good[2])
	if reasonOf(err) != "signature" {
		t.Fatalf("Verify(tampered) = %v, want reason signature", err)
	}
}

// TestExpiryBoundary walks the clock across exp+leeway. RFC 7519 §4.1.4: the token is valid
// only *before* exp, so with the leeway it is valid strictly before exp+leeway.
func TestExpiryBoundary(t *testing.T) {
	t.Parallel()
	k := keys()
	exp := t0.Add(time.Hour)
	token := sign(t, jwt.SigningMethodEdDSA, k.ed, claims(), nil)
	tests := []struct {
		name   string
		leeway time.Duration // 0: default 30s
		at     time.Time
		ok     bool
	}{
		{"well before exp", 0, exp.Add(-time.Minute), true},
		{"at exp, inside the leeway", 0, exp, true},
		{"last second inside the leeway", 0, exp.Add(29 * time.Second), true},
		{"last instant inside the leeway", 0, exp.Add(30*time.Second - time.Nanosecond), true},
		{"exactly at exp+leeway", 0, exp.Add(30 * time.Second), false},
		{"one second outside the leeway", 0, exp.Add(31 * time.Second), false},
		{"5m leeway, inside", 5 * time.Minute, exp.Add(5*time.Minute - time.Second), true},
		{"5m leeway, one second outside", 5 * time.Minute, exp.Add(5*time.Minute + time.Second), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := pinned(t)
			cfg.Leeway = tt.leeway
			clk := newClock(tt.at)
			cfg.Now = clk.Now
			p, err := newJWT(t, cfg).Verify(t.Context(), token)
			if tt.ok {
				if err != nil {
					t.Fatalf("Verify at exp%+v = %v, want ok", tt.at.Sub(exp), err)
				}
				if !p.ExpiresAt.Equal(exp) {
					t.Errorf("ExpiresAt = %v, want %v", p.ExpiresAt, exp)
				}
				return
			}
			if reasonOf(err) != "expired" || err.Error() != "token expired at 2026-11-29T10:00:00Z" {
				t.Fatalf("Verify at exp%+v = %v, want token expired at 2026-11-29T10:00:00Z", tt.at.Sub(exp), err)
			}
		})
	}
}

func TestClaimMapping(t *testing.T) {
	t.Parallel()
	k := keys()
	tests := []struct {
		name       string
		agentClaim string
		userClaim  string
		edit       func(jwt.MapClaims)
		wantAgent  string
		wantUser   string
		wantReason string
		wantMsg    string
	}{
		{name: "defaults: sub, no user", wantAgent: "agent-1"},
		{name: "custom agent claim", agentClaim: "client_id",
			edit:      func(c jwt.MapClaims) { c["client_id"] = "billing-worker" },
			wantAgent: "billing-worker"},
		{name: "user from a dotted path", userClaim: "act.sub",
			edit:      func(c jwt.MapClaims) { c["act"] = map[string]any{"sub": "alice"} },
			wantAgent: "agent-1", wantUser: "alice"},
		{name: "agent from a dotted path, user from sub", agentClaim: "act.sub", userClaim: "sub",
			edit:      func(c jwt.MapClaims) { c["act"] = map[string]any{"sub": "agent-7"}; c["sub"] = "bob" },
			wantAgent: "agent-7", wantUser: "bob"},
		{name: "deep path", agentClaim: "ext.agent.id",
			edit:      func(c jwt.MapClaims) { c["ext"] = map[string]any{"agent": map[string]any{"id": "deep"}} },
			wantAgent: "deep"},
		{name: "a top-level name containing dots wins", agentClaim: "https://example.com/agent",
			edit:      func(c jwt.MapClaims) { c["https://example.com/agent"] = "namespaced" },
			wantAgent: "namespaced"},
		{name: "user claim absent: no user", userClaim: "act.sub", wantAgent: "agent-1"},
		{name: "user claim not a string", userClaim: "act.sub",
			edit:       func(c jwt.MapClaims) { c["act"] = map[string]any{"sub": 5} },
			wantReason: "user_claim", wantMsg: `user claim "act.sub" is not a string`},
		{name: "dotted agent path through a non-object", agentClaim: "act.sub",
			edit:       func(c jwt.MapClaims) { c["act"] = "flat" },
			wantReason: "agent_claim", wantMsg: `agent claim "act.sub" missing`},
		{name: "custom agent claim empty", agentClaim: "client_id",
			edit:       func(c jwt.MapClaims) { c["client_id"] = "" },
			wantReason: "agent_claim", wantMsg: `agent claim "client_id" is not a non-empty string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := pinned(t)
			cfg.AgentClaim, cfg.UserClaim = tt.agentClaim, tt.userClaim
			c := claims()
			if tt.edit != nil {
				tt.edit(c)
			}
			p, err := newJWT(t, cfg).Verify(t.Context(), sign(t, jwt.SigningMethodES256, k.ec, c, nil))
			if tt.wantReason != "" {
				if reasonOf(err) != tt.wantReason || err.Error() != tt.wantMsg {
					t.Fatalf("Verify = %v, want %s: %s", err, tt.wantReason, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify = %v", err)
			}
			// Claims come back as JSON decodes them: numbers are float64.
			wantClaims := map[string]any{}
			for name, v := range c {
				wantClaims[name] = v
			}
			wantClaims["iat"] = float64(t0.Unix())
			wantClaims["exp"] = float64(t0.Add(time.Hour).Unix())
			want := latch.Principal{
				Agent:     tt.wantAgent,
				User:      tt.wantUser,
				Issuer:    testIssuer,
				Claims:    wantClaims,
				ExpiresAt: t0.Add(time.Hour),
			}
			if diff := cmp.Diff(want, p); diff != "" {
				t.Errorf("Verify principal mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrincipalFromContext(t *testing.T) {
	t.Parallel()
	k := keys()
	j := newJWT(t, pinned(t))
	token := sign(t, jwt.SigningMethodEdDSA, k.ed, claims(), nil)
	tests := []struct {
		name       string
		credential *string // nil: no credential in the context at all
		wantReason string
		wantMsg    string
	}{
		{name: "bare token", credential: new(token)},
		{name: "Bearer prefix", credential: new("Bearer " + token)},
		{name: "lowercase scheme", credential: new("bearer " + token)},
		{name: "extra spaces", credential: new("  Bearer   " + token + " ")},
		{name: "nothing in the context", wantReason: "no_credential", wantMsg: "no credential"},
		{name: "empty credential", credential: new(""), wantReason: "no_credential", wantMsg: "no credential"},
		{name: "blank credential", credential: new("   "), wantReason: "no_credential", wantMsg: "no credential"},
		{name: "Bearer and nothing", credential: new("Bearer "), wantReason: "no_credential", wantMsg: "no credential"},
		{name: "Bearer alone", credential: new("Bearer"), wantReason: "no_credential", wantMsg: "no credential"},
		{name: "another scheme", credential: new("Basic " + token), wantReason: "malformed", wantMsg: "credential is not a bearer token"},
		{name: "oversized", credential: new(strings.Repeat("a", maxTokenBytes+1)), wantReason: "malformed",
			wantMsg: "token of 65537 bytes exceeds 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			if tt.credential != nil {
				ctx = latch.WithCredential(ctx, *tt.credential)
			}
			p, err := j.Principal(ctx)
			if tt.wantReason != "" {
				if reasonOf(err) != tt.wantReason || err.Error() != tt.wantMsg {
					t.Fatalf("Principal = %v, want %s: %s", err, tt.wantReason, tt.wantMsg)
				}
				return
			}
			if err != nil || p.Agent != "agent-1" {
				t.Fatalf("Principal = %+v, %v; want agent-1", p, err)
			}
		})
	}
}

func TestNewJWTConfig(t *testing.T) {
	t.Parallel()
	k := keys()
	dir := t.TempDir()
	ecPath := writePEM(t, dir, "ec.pem", k.ec.Public())
	edPath := writePEM(t, dir, "ed.pem", k.ed.Public())
	weakPath := writePEM(t, dir, "weak.pem", k.rsaWeak.Public())
	p384Path := writePEM(t, dir, "p384.pem", k.ecP384.Public())
	der, err := x509.MarshalPKCS8PrivateKey(k.ec)
	if err != nil {
		t.Fatal(err)
	}
	privPath := writeFile(t, dir, "priv.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	twoPath := writeFile(t, dir, "two.pem", append(pemBytes(t, k.ec.Public()), pemBytes(t, k.ed.Public())...))
	pkcs1Path := writeFile(t, dir, "pkcs1.pem", pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.rsa.PublicKey)}))
	junkPath := writeFile(t, dir, "junk.pem", []byte("not pem"))

	base := func() Config {
		return Config{Issuer: testIssuer, Audience: testAudience, KeyFiles: []string{ecPath}}
	}
	tests := []struct {
		name    string
		edit    func(c *Config)
		wantErr string // "" = valid
	}{
		{name: "minimal"},
		{name: "jwks over https", edit: func(c *Config) { c.KeyFiles = nil; c.JWKSURL = "https://issuer.example/.well-known/jwks.json" }},
		{name: "jwks over loopback http", edit: func(c *Config) { c.KeyFiles = nil; c.JWKSURL = "http://127.0.0.1:8080/jwks" }},
		{name: "jwks over localhost http", edit: func(c *Config) { c.KeyFiles = nil; c.JWKSURL = "http://localhost/jwks" }},
		{name: "subset of algorithms", edit: func(c *Config) { c.Algorithms = []string{"EdDSA"} }},
		{name: "5m leeway", edit: func(c *Config) { c.Leeway = 5 * time.Minute }},
		{name: "key ids", edit: func(c *Config) { c.KeyFiles = []string{ecPath, edPath}; c.KeyIDs = []string{"a", ""} }},
		{name: "no issuer", edit: func(c *Config) { c.Issuer = "" }, wantErr: "identity: issuer required"},
		{name: "no audience", edit: func(c *Config) { c.Audience = "" }, wantErr: "identity: audience required"},
		{name: "no keys", edit: func(c *Config) { c.KeyFiles = nil }, wantErr: "identity: keys required: key files or a jwks url"},
		{name: "two key sources", edit: func(c *Config) { c.JWKSURL = "https://issuer.example/jwks" },
			wantErr: "identity: key files and a jwks url are exclusive: choose one key source"},
		{name: "none", edit: func(c *Config) { c.Algorithms = []string{"ES256", "none"} },
			wantErr: `identity: algorithm "none" refused: tokens must be signed`},
		{name: "HS256", edit: func(c *Config) { c.Algorithms = []string{"HS256"} },
			wantErr: `identity: algorithm "HS256" refused: symmetric algorithms would let a public key act as a shared secret`},
		{name: "hs512 lowercase", edit: func(c *Config) { c.Algorithms = []string{"hs512"} },
			wantErr: `identity: algorithm "hs512" refused: symmetric algorithms would let a public key act as a shared secret`},
		{name: "unsupported algorithm", edit: func(c *Config) { c.Algorithms = []string{"PS256"} },
			wantErr: `identity: algorithm "PS256" not supported (supported: RS256, ES256, EdDSA)`},
		{name: "negative leeway", edit: func(c *Config) { c.Leeway = -time.Second }, wantErr: "identity: leeway -1s is negative"},
		{name: "leeway over 5m", edit: func(c *Config) { c.Leeway = 6 * time.Minute }, wantErr: "identity: leeway 6m0s exceeds 5m0s"},
		{name: "key ids length", edit: func(c *Config) { c.KeyIDs = []string{"a", "b"} }, wantErr: "identity: 2 key ids for 1 key files"},
		{name: "duplicate key ids", edit: func(c *Config) { c.KeyFiles = []string{ecPath, edPath}; c.KeyIDs = []string{"a", "a"} },
			wantErr: `identity: key ids: duplicate key id "a"`},
		{name: "missing key file", edit: func(c *Config) { c.KeyFiles = []string{dir + "/missing.pem"} },
			wantErr: "identity: key file " + dir + "/missing.pem: open " + dir + "/missing.pem: no such file or directory"},
		{name: "not PEM", edit: func(c *Config) { c.KeyFiles = []string{junkPath} },
			wantErr: "identity: key file " + junkPath + ": no PEM block"},
		{name: "private key file", edit: func(c *Config) { c.KeyFiles = []string{privPath} },
			wantErr: "identity: key file " + privPath + ": holds a private key (PRIVATE KEY): pin the public key only"},
		{name: "two keys in one file", edit: func(c *Config) { c.KeyFiles = []string{twoPath} },
			wantErr: "identity: key file " + twoPath + ": more than one PEM block: pin one key per file"},
		{name: "PKCS#1 block", edit: func(c *Config) { c.KeyFiles = []string{pkcs1Path} },
			wantErr: "identity: key file " + pkcs1Path + `: PEM block is "RSA PUBLIC KEY", want "PUBLIC KEY"`},
		{name: "weak RSA key", edit: func(c *Config) { c.KeyFiles = []string{weakPath} },
			wantErr: "identity: key file " + weakPath + ": rsa key has 1024 bits, need at least 2048"},
		{name: "P-384 key", edit: func(c *Config) { c.KeyFiles = []string{p384Path} },
			wantErr: "identity: key file " + p384Path + ": ec key on P-384, want P-256"},
		{name: "jwks over plain http", edit: func(c *Config) { c.KeyFiles = nil; c.JWKSURL = "http://issuer.example/jwks" },
			wantErr: `identity: jwks url "http://issuer.example/jwks" must be https (http only for loopback hosts)`},
		{name: "jwks url without host", edit: func(c *Config) { c.KeyFiles = nil; c.JWKSURL = "/jwks" },
			wantErr: `identity: jwks url "/jwks" has no host`},
		{name: "cache ttl below refresh interval", edit: func(c *Config) { c.KeyFiles = nil; c.JWKSURL = "https://i.example/j"; c.CacheTTL = 10 * time.Second },
			wantErr: "identity: cache ttl 10s is below the 30s refresh interval"},
		{name: "empty claim path segment", edit: func(c *Config) { c.UserClaim = "act..sub" },
			wantErr: `identity: user claim: "act..sub" has an empty path segment`},
		{name: "trailing dot in agent claim", edit: func(c *Config) { c.AgentClaim = "act." },
			wantErr: `identity: agent claim: "act." has an empty path segment`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := base()
			if tt.edit != nil {
				tt.edit(&cfg)
			}
			_, err := NewJWT(&cfg)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("NewJWT = %q, want %q", got, tt.wantErr)
			}
		})
	}

	t.Run("nil config", func(t *testing.T) {
		t.Parallel()
		if _, err := NewJWT(nil); err == nil {
			t.Error("NewJWT(nil) = nil error, want one")
		}
	})
}

func TestNewJWTDefaultsAndCopy(t *testing.T) {
	t.Parallel()
	cfg := pinned(t)
	cfg.Now = nil
	j := newJWT(t, cfg)
	got := struct {
		Leeway     time.Duration
		CacheTTL   time.Duration
		Algorithms []string
		AgentClaim string
		UserClaim  string
	}{j.cfg.Leeway, j.cfg.CacheTTL, j.cfg.Algorithms, j.cfg.AgentClaim, j.cfg.UserClaim}
	want := got
	want.Leeway, want.CacheTTL, want.Algorithms, want.AgentClaim, want.UserClaim = 30*time.Second, 10*time.Minute, []string{"RS256", "ES256", "EdDSA"}, "sub", ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if j.cfg.Now == nil {
		t.Error("Now not defaulted")
	}

	// NewJWT copies its config: later edits by the caller change nothing.
	cfg = pinned(t)
	cfg.Algorithms = []string{"ES256"}
	j = newJWT(t, cfg)
	cfg.Algorithms[0] = "EdDSA"
	cfg.Issuer = "changed"
	if _, err := j.Verify(t.Context(), sign(t, jwt.SigningMethodES256, keys().ec, claims(), nil)); err != nil {
		t.Errorf("Verify after editing the caller's config = %v, want ok", err)
	}
}

// TestKeyFits pins the algorithm-to-key-type table that prevents algorithm confusion.
func TestKeyFits(t *testing.T) {
	t.Parallel()
	k := keys()
	pubs := map[string]any{
		"rsa":     &k.rsa.PublicKey,
		"rsaWeak": &k.rsaWeak.PublicKey,
		"ec":      k.ec.Public(),
		"ecP384":  k.ecP384.Public(),
		"ed":      k.ed.Public(),
	}
	want := map[string][]string{ // key → the algorithms it fits
		"rsa":     {"RS256"},
		"rsaWeak": nil,
		"ec":      {"ES256"},
		"ecP384":  nil,
		"ed":      {"EdDSA"},
	}
	for name, pub := range pubs {
		var got []string
		for _, alg := range []string{"RS256", "RS384", "PS256", "ES256", "ES384", "EdDSA", "HS256", "none"} {
			if (key{pub: pub}).fits(alg) {
				got = append(got, alg)
			}
		}
		if diff := cmp.Diff(want[name], got); diff != "" {
			t.Errorf("%s fits (-want +got):\n%s", name, diff)
		}
	}
	if (key{pub: k.ec.Public(), alg: "ES384"}).fits("ES256") {
		t.Error("a key whose JWK alg is ES384 fits ES256")
	}
}

// TestErrorUnwrap checks a keys_unavailable error keeps its cause.
func TestErrorUnwrap(t *testing.T) {
	t.Parallel()
	cause := os.ErrDeadlineExceeded
	e := &Error{Reason: "keys_unavailable", Msg: "fetch jwks", Err: cause}
	if got := e.Error(); got != "fetch jwks: "+cause.Error() {
		t.Errorf("Error() = %q", got)
	}
	if e.Unwrap() != cause {
		t.Errorf("Unwrap() = %v, want %v", e.Unwrap(), cause)
	}
}
