package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestHashToken: what the store keeps of a secret is "sha256:" and the lower-case hex SHA-256
// of the secret's bytes, exactly (tokens created before are looked up by it).
func TestHashToken(t *testing.T) {
	t.Parallel()
	if got, want := HashToken(""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Errorf("HashToken(%q) = %q, want %q", "", got, want)
	}
	for _, secret := range []string{"latch_x", TokenPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "é\x00\xff"} {
		sum := sha256.Sum256([]byte(secret))
		if got, want := HashToken(secret), "sha256:"+hex.EncodeToString(sum[:]); got != want {
			t.Errorf("HashToken(%q) = %q, want %q", secret, got, want)
		}
	}
}
