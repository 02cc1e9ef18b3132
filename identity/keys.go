package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strconv"
)

// minRSABits is the smallest RSA modulus accepted for RS256 (NIST SP 800-57: 2048 bits through
// 2030).
const minRSABits = 2048

// key is one verification key. A key with a kid is chosen only by a token naming that kid (or
// naming none); alg, when set (from a JWK's "alg"), is the only algorithm it may verify.
type key struct {
	kid string
	alg string
	pub crypto.PublicKey
}

// fits reports whether k may verify a signature made with alg: the key type is alg's own and
// strong enough. This, not the token, decides what a key checks, so a token cannot turn an RSA
// public key into an HMAC secret or the like.
func (k key) fits(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch alg {
	case "RS256":
		p, ok := k.pub.(*rsa.PublicKey)
		return ok && p.N != nil && p.N.BitLen() >= minRSABits
	case "ES256":
		p, ok := k.pub.(*ecdsa.PublicKey)
		return ok && p.Curve == elliptic.P256()
	case "EdDSA":
		p, ok := k.pub.(ed25519.PublicKey)
		return ok && len(p) == ed25519.PublicKeySize
	}
	return false
}

// keySet is an immutable set of verification keys; kids are unique.
type keySet struct {
	keys  []key
	byKid map[string]key
}

func newKeySet(keys []key) (*keySet, error) {
	s := &keySet{keys: keys, byKid: make(map[string]key)}
	for _, k := range keys {
		if k.kid == "" {
			continue
		}
		if _, dup := s.byKid[k.kid]; dup {
			return nil, fmt.Errorf("duplicate key id %q", k.kid)
		}
		s.byKid[k.kid] = k
	}
	return s, nil
}

func (s *keySet) has(kid string) bool {
	_, ok := s.byKid[kid]
	return ok
}

// candidates returns the keys that may verify a token signed with alg and naming kid (""
// when it names none). A named kid selects its key; if no key has it, the keys without a kid are
// tried (the kid is the issuer's label, which an unlabelled pinned key cannot contradict). A
// token naming no kid is tried against every key that fits. Selection only narrows: every key in
// the set is trusted.
func (s *keySet) candidates(kid, alg string) ([]crypto.PublicKey, *Error) {
	if kid != "" {
		if k, ok := s.byKid[kid]; ok {
			if !k.fits(alg) {
				return nil, refuse("no_key", fmt.Sprintf("key %s does not fit algorithm %s", quote(kid), alg))
			}
			return []crypto.PublicKey{k.pub}, nil
		}
	}
	var out []crypto.PublicKey
	for _, k := range s.keys {
		if (kid == "" || k.kid == "") && k.fits(alg) {
			out = append(out, k.pub)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	if kid != "" {
		return nil, refuse("unknown_key", fmt.Sprintf("unknown key id %s", quote(kid)))
	}
	return nil, refuse("no_key", "no key for algorithm "+alg)
}

// loadPEM reads one pinned public key: a single PKIX "PUBLIC KEY" block holding an RSA key of at
// least 2048 bits, an EC P-256 key or an Ed25519 key.
func loadPEM(path string) (crypto.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, errors.New("more than one PEM block: pin one key per file")
	}
	switch block.Type {
	case "PUBLIC KEY":
	case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
		return nil, fmt.Errorf("holds a private key (%s): pin the public key only", block.Type)
	default:
		return nil, fmt.Errorf("PEM block is %q, want \"PUBLIC KEY\"", block.Type)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	switch p := pub.(type) {
	case *rsa.PublicKey:
		if n := p.N.BitLen(); n < minRSABits {
			return nil, fmt.Errorf("rsa key has %d bits, need at least %d", n, minRSABits)
		}
	case *ecdsa.PublicKey:
		if p.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ec key on %s, want P-256", p.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("unsupported key type %T", pub)
	}
	return pub, nil
}

// jwk is the subset of RFC 7517/7518/8037 members this package reads.
type jwk struct {
	Kty string `json:"kty"`
	Use string `json:"use"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS reads a JWK Set. Keys that are not signature keys (use other than "sig"), of a type
// or curve this package does not verify with (including symmetric "oct" keys), weak, or
// malformed are skipped: a set may carry keys for other consumers, and one bad entry should not
// take the issuer's other keys down. A set whose usable keys repeat a kid, or that has no usable
// key at all, is refused.
func parseJWKS(data []byte) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decode jwks: %w", err)
	}
	var keys []key
	for _, raw := range doc.Keys {
		var j jwk
		if json.Unmarshal(raw, &j) != nil {
			continue
		}
		if j.Use != "" && j.Use != "sig" {
			continue
		}
		pub, alg, ok := j.publicKey()
		if !ok {
			continue
		}
		if j.Alg != "" && j.Alg != alg {
			continue // an alg this package does not verify with, or one that contradicts the key
		}
		keys = append(keys, key{kid: j.Kid, alg: j.Alg, pub: pub})
	}
	if len(keys) == 0 {
		return nil, errors.New("jwks has no usable signing key")
	}
	return newKeySet(keys)
}

// publicKey builds the key j describes and names the one algorithm it can verify.
func (j jwk) publicKey() (crypto.PublicKey, string, bool) {
	switch {
	case j.Kty == "RSA":
		n, err1 := b64(j.N)
		e, err2 := b64(j.E)
		if err1 != nil || err2 != nil || len(n) == 0 || n[0] == 0 || len(e) == 0 || len(e) > 4 {
			return nil, "", false
		}
		exp := new(big.Int).SetBytes(e)
		if !exp.IsInt64() || exp.Int64() < 3 || exp.Int64() > 1<<31-1 || exp.Bit(0) == 0 {
			return nil, "", false
		}
		p := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(exp.Int64())}
		if p.N.BitLen() < minRSABits {
			return nil, "", false
		}
		return p, "RS256", true
	case j.Kty == "EC" && j.Crv == "P-256":
		x, err1 := b64(j.X)
		y, err2 := b64(j.Y)
		if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			return nil, "", false
		}
		point := append(append([]byte{4}, x...), y...)
		p, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point) // checks the point is on the curve
		if err != nil {
			return nil, "", false
		}
		return p, "ES256", true
	case j.Kty == "OKP" && j.Crv == "Ed25519":
		x, err := b64(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, "", false
		}
		return ed25519.PublicKey(x), "EdDSA", true
	}
	return nil, "", false
}

func b64(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

// quote renders a value taken from a token for an error message, bounded so that a hostile
// header cannot flood logs.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}
