package verify

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/latchkit/latch"
)

// The scratch issuer's names. The issuer is never fetched from: its public key is pinned from a
// file, so the host name is reserved (.invalid) to say so.
const (
	scratchIssuerName = "https://latch-verify.invalid"
	scratchAudience   = "latch-verify"
	scratchUserClaim  = "latch_verify_user"
)

// issuer is a JWT issuer made for one scenario: an Ed25519 key whose public half is written as
// a PEM file, for an identity.JWT to pin.
type issuer struct {
	key     ed25519.PrivateKey
	keyFile string
}

// newIssuer makes an issuer whose public key is written in dir.
func newIssuer(dir string) (*issuer, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("verify: issuer key: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("verify: issuer key: %w", err)
	}
	path := filepath.Join(dir, "issuer.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("verify: issuer key: %w", err)
	}
	return &issuer{key: priv, keyFile: path}, nil
}

// token is a credential for p, issued at iat and expiring at exp, with the id jti.
func (is *issuer) token(p latch.Principal, jti string, iat, exp time.Time) (string, error) {
	claims := jwt.MapClaims{
		"iss": scratchIssuerName, "aud": scratchAudience, "sub": p.Agent, "jti": jti,
		"iat": iat.Unix(), "nbf": iat.Unix(), "exp": exp.Unix(),
	}
	if p.User != "" {
		claims[scratchUserClaim] = p.User
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(is.key)
	if err != nil {
		return "", fmt.Errorf("verify: sign a token: %w", err)
	}
	return s, nil
}

// newTokenID is a jti no other run repeats.
func newTokenID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "latch-verify-" + hex.EncodeToString(b[:])
}
