package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeSIGTERM runs `latch serve` as a real process, sends it SIGTERM while a request is in
// flight, and checks that the request is answered and the process exits 0.
func TestServeSIGTERM(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	latchBin := filepath.Join(dir, "latch") // TestMain runs the CLI when invoked under this name
	if err := os.Symlink(exe, latchBin); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(policy, []byte("schema: latch.policy/v1\nactions:\n  refund.issue:\n    effect: \"refund:{id}\"\n    decision: approve\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(latchBin, append([]string{"--policy", policy}, args...)...)
		cmd.Env = cleanEnv()
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("latch %v: %v\n%s", args, err, errb.String())
		}
		return string(out)
	}
	var tok struct{ Token string }
	if err := json.Unmarshal([]byte(run("token", "create", "--agent", "refunder", "--json")), &tok); err != nil || tok.Token == "" {
		t.Fatalf("token create --json: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var stderr bytes.Buffer
	srv := exec.Command(latchBin, "--policy", policy, "serve", "--listen", addr)
	srv.Env = cleanEnv()
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	base := "http://" + addr
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never became ready:\n%s", stderr.String())
		}
	}
	type answer struct {
		status int
		body   string
	}
	got := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/v1/actions", strings.NewReader(`{"action":"refund.issue","arguments":{"id":"r1"},"wait_seconds":3}`))
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{0, err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- answer{resp.StatusCode, string(b)}
	}()
	time.Sleep(1 * time.Second) // the request is waiting for a human
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.status != 202 || !strings.Contains(a.body, `"status":"approval_required"`) {
		t.Errorf("request in flight at SIGTERM = %d %s, want its 202 answer", a.status, a.body)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not exit after SIGTERM:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "latch serve stopped") {
		t.Errorf("stderr lacks the stop line:\n%s", stderr.String())
	}
}

// cleanEnv is the environment without the variables that would point latch elsewhere.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LATCH_STORE=") && !strings.HasPrefix(kv, "LATCH_POLICY=") {
			env = append(env, kv)
		}
	}
	return env
}
