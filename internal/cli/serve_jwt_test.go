package cli_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestServeJWT: `latch serve --jwt-issuer … --jwt-audience … --jwt-key FILE` takes the call's
// principal from a verified JWT; a JWT signed with another key is refused 401 and writes nothing.
func TestServeJWT(t *testing.T) {
	t.Parallel()
	latchBin, policyPath := latchDir(t, sweepPolicy)
	dir := filepath.Dir(policyPath)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "issuer.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	sign := func(key ed25519.PrivateKey) string {
		now := time.Now()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": "https://issuer.test", "aud": "latch",
			"sub": "billing-worker", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	p := startServe(t, latchBin, nil, "--policy", policyPath, "serve",
		"--jwt-issuer", "https://issuer.test", "--jwt-audience", "latch", "--jwt-key", keyFile)
	srv, stderr := p.cmd, p.stderr
	post := func(bearer, invoice string) (int, map[string]any) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; {
			req, _ := http.NewRequest("POST", p.base+"/v1/actions",
				strings.NewReader(`{"action":"billing.charge","arguments":{"invoice_id":"`+invoice+`","amount":100}}`))
			req.Header.Set("Authorization", "Bearer "+bearer)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				if time.Now().After(deadline) {
					t.Fatalf("serve did not answer: %v\n%s", err, stderr)
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var v map[string]any
			_ = json.Unmarshal(b, &v)
			return resp.StatusCode, v
		}
	}
	status, body := post(sign(priv), "inv_1")
	if status != 200 || body["principal"].(map[string]any)["agent"] != "billing-worker" {
		t.Errorf("with a verified JWT: %d %v", status, body)
	}
	if status, body := post(sign(other), "inv_2"); status != 401 {
		t.Errorf("with a forged JWT: %d %v, want 401", status, body)
	}
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("serve: %v\n%s", err, stderr)
	}
	// Only the verified call was written.
	out := runLatch(t, latchBin, nil, "--policy", policyPath, "effects", "--json")
	if n := strings.Count(string(out), "\n"); n != 1 || !strings.Contains(string(out), "charge:inv_1") {
		t.Errorf("latch effects --json:\n%s\nwant only charge:inv_1", out)
	}
}
