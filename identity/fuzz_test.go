package identity

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var reasonCode = regexp.MustCompile(`^[a-z][a-z_]*$`)

// FuzzVerify asserts properties of JWT verification on arbitrary and on tampered tokens: it
// never panics; every refusal is an *Error with a snake_case reason and a message; and a token
// that verifies carries, byte for byte, the header, claims and signature of a token the key
// holder signed (a flipped bit may only reach encoding slack that decodes to the same bytes),
// and maps to that token's principal.
func FuzzVerify(f *testing.F) {
	k := keys()
	dir := f.TempDir()
	var files []string
	for name, pub := range map[string]any{"ec.pem": k.ec.Public(), "ed.pem": k.ed.Public()} {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			f.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
			f.Fatal(err)
		}
		files = append(files, path)
	}
	j, err := NewJWT(&Config{Issuer: testIssuer, Audience: testAudience, KeyFiles: files, Now: func() time.Time { return t0 }})
	if err != nil {
		f.Fatal(err)
	}
	var good []string
	for _, s := range []struct {
		m   jwt.SigningMethod
		key any
	}{{jwt.SigningMethodES256, k.ec}, {jwt.SigningMethodEdDSA, k.ed}} {
		tok, err := jwt.NewWithClaims(s.m, claims()).SignedString(s.key)
		if err != nil {
			f.Fatal(err)
		}
		good = append(good, tok)
		f.Add(tok, uint16(0), byte(0))
		f.Add("Bearer "+tok, uint16(len(tok)), byte(1))
		f.Add(tok, uint16(10), byte(0x20))
	}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	f.Add(none, uint16(0), byte(0))
	f.Add("bearer", uint16(0), byte(0))
	f.Add("a.b.c", uint16(1), byte('.'))
	f.Fuzz(func(t *testing.T, token string, at uint16, flip byte) {
		if flip != 0 && len(token) > 0 {
			b := []byte(token)
			b[int(at)%len(b)] ^= flip
			token = string(b)
		}
		p, err := j.Verify(context.Background(), token)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !reasonCode.MatchString(e.Reason) || e.Msg == "" {
				t.Fatalf("Verify(%q) = %#v, want an *Error with a snake_case reason and a message", token, err)
			}
			return
		}
		compact := strings.TrimSpace(token)
		if _, rest, ok := strings.Cut(compact, " "); ok {
			compact = strings.TrimSpace(rest)
		}
		for _, g := range good {
			if sameSegments(compact, g) {
				if p.Agent != "agent-1" || p.Issuer != testIssuer {
					t.Fatalf("Verify(%q) = %+v, want agent-1 from %s", token, p, testIssuer)
				}
				return
			}
		}
		t.Fatalf("Verify(%q) = %+v: it verified, but no signed token decodes to the same bytes", token, p)
	})
}

// sameSegments reports whether two compact JWS decode to the same header, payload and signature.
func sameSegments(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	if len(as) != 3 || len(bs) != 3 {
		return false
	}
	for i := range as {
		x, errA := base64.RawURLEncoding.DecodeString(as[i])
		y, errB := base64.RawURLEncoding.DecodeString(bs[i])
		if errA != nil || errB != nil || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}
