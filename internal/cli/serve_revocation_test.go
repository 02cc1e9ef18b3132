package cli_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestServeJWTRevocations: a real `latch serve --jwt-revocations FILE` process refuses a JWT the
// file revokes by jti, and a subject's JWTs, 401 credential_revoked before their exp, writing
// nothing; `--revocation-push-secret-file` takes pushes to POST /v1/revocations only with its
// secret, and a pushed revocation refuses too.
func TestServeJWTRevocations(t *testing.T) {
	t.Parallel()
	latchBin, policyPath := latchDir(t, sweepPolicy)
	dir := filepath.Dir(policyPath)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "issuer.pem")
	list := filepath.Join(dir, "revoked.txt")
	secretFile := filepath.Join(dir, "push.secret")
	for path, data := range map[string][]byte{
		keyFile:    pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		list:       []byte("iss https://issuer.test\n"),
		secretFile: []byte("s3cret-push\n"),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sign := func(sub, jti string) string {
		now := time.Now()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": "https://issuer.test", "aud": "latch", "sub": sub, "jti": jti,
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}).SignedString(priv)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	p := startServe(t, latchBin, nil, "--policy", policyPath, "serve",
		"--jwt-issuer", "https://issuer.test", "--jwt-audience", "latch", "--jwt-key", keyFile,
		"--jwt-revocations", list, "--jwt-revocations-poll", "50ms", "--revocation-push-secret-file", secretFile)
	do := func(bearer, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", p.base+path, strings.NewReader(body))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v\n%s", path, err, p.stderr)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var v map[string]any
		_ = json.Unmarshal(b, &v)
		return resp.StatusCode, v
	}
	charge := func(invoice string) string {
		return `{"action":"billing.charge","arguments":{"invoice_id":"` + invoice + `","amount":100}}`
	}
	j1, j2, w1, q1 := sign("billing-worker", "j1"), sign("billing-worker", "j2"), sign("other-worker", "w1"), sign("queue-worker", "q1")
	if status, body := do(j1, "/v1/actions", charge("inv_1")); status != 200 {
		t.Fatalf("before any revocation: %d %v", status, body)
	}
	if err := os.WriteFile(list, []byte("iss https://issuer.test\njti j1\nsub other-worker\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // past --jwt-revocations-poll
	for name, tok := range map[string]string{"by jti": j1, "by subject": w1} {
		if status, body := do(tok, "/v1/actions", charge("inv_"+name)); status != 401 || body["reason"] != "credential_revoked" {
			t.Errorf("revoked %s: %d %v, want 401 credential_revoked", name, status, body)
		}
	}
	if status, body := do(j2, "/v1/actions", charge("inv_2")); status != 200 {
		t.Errorf("another jti of the same subject: %d %v", status, body)
	}
	push := "iss https://issuer.test\nsub queue-worker\n"
	for _, bad := range []string{"", "wrong-secret", j2} {
		if status, body := do(bad, "/v1/revocations", push); status != 401 {
			t.Errorf("a push with %q: %d %v, want 401", bad, status, body)
		}
	}
	if status, body := do(q1, "/v1/actions", charge("inv_q1")); status != 200 {
		t.Fatalf("refused pushes revoked nothing: %d %v", status, body)
	}
	if status, body := do("s3cret-push", "/v1/revocations", push); status != 200 || body["accepted"] != float64(1) {
		t.Fatalf("push: %d %v", status, body)
	}
	if status, body := do(q1, "/v1/actions", charge("inv_q2")); status != 401 || body["reason"] != "credential_revoked" {
		t.Errorf("pushed revocation: %d %v, want 401 credential_revoked", status, body)
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	out := runLatch(t, latchBin, nil, "--policy", policyPath, "effects", "--json")
	for _, refused := range []string{"inv_by jti", "inv_by subject", "inv_q2"} {
		if strings.Contains(string(out), refused) {
			t.Errorf("a refused call was written (%s):\n%s", refused, out)
		}
	}
}

// TestJWTRevocationFlagsUsage: the revocation flags are checked before anything starts, and an
// unreadable feed stops the command.
func TestJWTRevocationFlagsUsage(t *testing.T) {
	t.Parallel()
	latchBin, policyPath := latchDir(t, sweepPolicy)
	jwtArgs := []string{"--jwt-issuer", "https://issuer.test", "--jwt-audience", "latch", "--jwt-key", policyPath}
	missing := filepath.Join(t.TempDir(), "absent.txt")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{append([]string{"serve", "--jwt-revocations-max-staleness", "1m"}, jwtArgs...), 2, "go with --jwt-revocations FILE|URL"},
		{[]string{"serve", "--revocation-push-secret-file", policyPath}, 2, "give --jwt-issuer too"},
		{append([]string{"gateway", "--jwt-revocations", "http://idp.example/revoked"}, jwtArgs...), 2, "must be https"},
		{append([]string{"mcp-operator", "--jwt-approver-claim", "r=a", "--jwt-revocations", missing}, jwtArgs...), 1, "no such file"},
	} {
		cmd := exec.Command(latchBin, append([]string{"--policy", policyPath}, tt.args...)...)
		cmd.Env = cleanEnv()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tt.code || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("latch %v = %v, %q; want exit %d saying %q", tt.args, err, stderr.String(), tt.code, tt.want)
		}
	}
}
