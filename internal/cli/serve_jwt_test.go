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
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestServeJWT: `latch serve --jwt-issuer … --jwt-audience … --jwt-key FILE` takes the call's
// principal from a verified JWT; a JWT signed with another key is refused 401 and writes nothing.
// With --jwt-approver-claim latch_role=approver, the agent's JWT still cannot resolve its own
// ambiguous effect, a JWT carrying the mark cannot propose, and it resolves as the person its
// sub names.
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
	sign := func(key ed25519.PrivateKey, sub string, extra jwt.MapClaims) string {
		now := time.Now()
		c := jwt.MapClaims{"iss": "https://issuer.test", "aud": "latch", "sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		for k, v := range extra {
			c[k] = v
		}
		tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	p := startServe(t, latchBin, nil, "--policy", policyPath, "serve",
		"--jwt-issuer", "https://issuer.test", "--jwt-audience", "latch", "--jwt-key", keyFile,
		"--jwt-approver-claim", "latch_role=approver")
	srv, stderr := p.cmd, p.stderr
	do := func(bearer, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", p.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v\n%s", path, err, stderr)
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
	agent, person := sign(priv, "billing-worker", nil), sign(priv, "dana", jwt.MapClaims{"latch_role": "approver"})
	status, body := do(agent, "/v1/actions", charge("inv_1"))
	if status != 200 || body["principal"].(map[string]any)["agent"] != "billing-worker" {
		t.Fatalf("with a verified JWT: %d %v", status, body)
	}
	if status, body := do(sign(other, "billing-worker", nil), "/v1/actions", charge("inv_2")); status != 401 {
		t.Errorf("with a forged JWT: %d %v, want 401", status, body)
	}
	if status, body := do(person, "/v1/actions", charge("inv_3")); status != 403 || body["reason"] != "forbidden" {
		t.Errorf("a person's JWT proposing: %d %v, want 403 forbidden", status, body)
	}
	if status, body := do(agent, "/v1/actions/"+body["action_id"].(string)+"/outcome", `{"outcome":"unknown"}`); status != 200 || body["result"] != "ambiguous" {
		t.Fatalf("outcome unknown: %d %v", status, body)
	}
	if status, body := do(agent, "/v1/effects/charge:inv_1/resolve", `{"to":"failed"}`); status != 403 || body["reason"] != "forbidden" {
		t.Errorf("the agent's JWT resolving its own effect: %d %v, want 403 forbidden", status, body)
	}
	if status, body := do(person, "/v1/effects/charge:inv_1/resolve", `{"to":"failed"}`); status != 200 || body["resolved_by"] != "http:dana" {
		t.Errorf("a person's JWT resolving: %d %v, want resolved by http:dana", status, body)
	}
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("serve: %v\n%s", err, stderr)
	}
	// Only the verified agent's call was written.
	out := runLatch(t, latchBin, nil, "--policy", policyPath, "effects", "--json")
	if n := strings.Count(string(out), "\n"); n != 1 || !strings.Contains(string(out), "charge:inv_1") || !strings.Contains(string(out), `"failed"`) {
		t.Errorf("latch effects --json:\n%s\nwant only charge:inv_1, failed", out)
	}
}

// TestJWTFlagsUsage: the approver marks are checked before anything starts (exit 2), and
// mcp-operator, which serves people only, refuses JWT flags that mark no person's JWT.
func TestJWTFlagsUsage(t *testing.T) {
	t.Parallel()
	latchBin, policyPath := latchDir(t, sweepPolicy)
	jwtArgs := []string{"--jwt-issuer", "https://issuer.test", "--jwt-audience", "latch", "--jwt-key", policyPath}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{append([]string{"mcp-operator"}, jwtArgs...), "--jwt-approver-claim CLAIM=VALUE or --jwt-approver-audience AUD"},
		{append([]string{"serve", "--jwt-approver-claim", "latch_role"}, jwtArgs...), "want CLAIM=VALUE"},
		{append([]string{"mcp-operator", "--jwt-approver-name-claim", "email"}, jwtArgs...), "--jwt-approver-name-claim goes with"},
		{[]string{"serve", "--jwt-approver-audience", "people"}, "--jwt-issuer and --jwt-audience"},
	} {
		cmd := exec.Command(latchBin, append([]string{"--policy", policyPath}, tt.args...)...)
		cmd.Env = cleanEnv()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("latch %v = %v, %q; want exit 2 saying %q", tt.args, err, stderr.String(), tt.want)
		}
	}
}
