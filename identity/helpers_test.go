package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	testIssuer   = "https://issuer.example"
	testAudience = "latch"
)

// t0 is the tests' "now": tokens are minted relative to it and the injected clock starts at it.
var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// testKeys are generated once per test binary: RSA key generation is slow.
type testKeys struct {
	rsa, rsa2 *rsa.PrivateKey
	rsaWeak   *rsa.PrivateKey // 1024 bits
	ec, ec2   *ecdsa.PrivateKey
	ecP384    *ecdsa.PrivateKey
	ed, ed2   ed25519.PrivateKey
}

var keys = sync.OnceValue(func() testKeys {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	var k testKeys
	var err error
	k.rsa, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.rsa2, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.rsaWeak, err = rsa.GenerateKey(rand.Reader, 1024)
	must(err)
	k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	k.ec2, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	k.ecP384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	must(err)
	_, k.ed, err = ed25519.GenerateKey(rand.Reader)
	must(err)
	_, k.ed2, err = ed25519.GenerateKey(rand.Reader)
	must(err)
	return k
})

// clock is an injectable clock the tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(at time.Time) *clock { return &clock{now: at} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = at
}

func pemBytes(t *testing.T, pub crypto.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatalf("MarshalPKIXPublicKey: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// writeFile writes data to name in dir and returns the path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// writePEM pins pub in a fresh PEM file and returns its path.
func writePEM(t *testing.T, dir, name string, pub crypto.PublicKey) string {
	t.Helper()
	return writeFile(t, dir, name, pemBytes(t, pub))
}

// claims returns valid claims for t0: right issuer and audience, sub, iat, an hour to live.
func claims() jwt.MapClaims {
	return jwt.MapClaims{
		"iss": testIssuer,
		"aud": testAudience,
		"sub": "agent-1",
		"iat": t0.Unix(),
		"exp": t0.Add(time.Hour).Unix(),
	}
}

// sign mints a token. header entries (such as kid) are added to the JWS header.
func sign(t *testing.T, method jwt.SigningMethod, key any, c jwt.MapClaims, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("SignedString(%s): %v", method.Alg(), err)
	}
	return s
}

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwkOf renders pub as a JWK with the given kid (omitted when "").
func jwkOf(t *testing.T, kid string, pub crypto.PublicKey) map[string]any {
	t.Helper()
	var m map[string]any
	switch p := pub.(type) {
	case *rsa.PublicKey:
		m = map[string]any{"kty": "RSA", "n": b64u(p.N.Bytes()), "e": b64u(big.NewInt(int64(p.E)).Bytes())}
	case *ecdsa.PublicKey:
		b, err := p.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		crv := p.Curve.Params().Name
		size := (len(b) - 1) / 2
		m = map[string]any{"kty": "EC", "crv": crv, "x": b64u(b[1 : 1+size]), "y": b64u(b[1+size:])}
	case ed25519.PublicKey:
		m = map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64u(p)}
	default:
		t.Fatalf("jwkOf: unsupported %T", pub)
	}
	if kid != "" {
		m["kid"] = kid
	}
	return m
}

func jwksDoc(t *testing.T, ks ...map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": ks})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jwksServer serves a JWKS document the test can swap, on loopback, counting requests.
type jwksServer struct {
	*httptest.Server
	hits atomic.Int64

	mu     sync.Mutex
	body   []byte
	status int
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{body: body, status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		body, status := s.body, s.status
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

func newJWT(t *testing.T, cfg *Config) *JWT {
	t.Helper()
	j, err := NewJWT(cfg)
	if err != nil {
		t.Fatalf("NewJWT: %v", err)
	}
	return j
}

// reasonOf returns err's *Error reason, or "" for nil, or "not an *Error".
func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := err.(*Error); ok {
		return e.Reason
	}
	return "not an *Error"
}
