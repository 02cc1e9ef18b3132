package cli_test

import (
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeSIGTERM runs `latch serve` as a real process, sends it SIGTERM while a request is in
// flight, and checks that the request is answered and the process exits 0.
func TestServeSIGTERM(t *testing.T) {
	t.Parallel()
	latchBin, policy := latchDir(t, "schema: latch.policy/v1\nactions:\n  refund.issue:\n    effect: \"refund:{id}\"\n    decision: approve\n")
	token := createToken(t, latchBin, nil, policy, "--agent", "refunder")
	p := startServe(t, latchBin, nil, "--policy", policy, "serve")
	srv, stderr, base := p.cmd, p.stderr, p.base
	type answer struct {
		status int
		body   string
	}
	got := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/v1/actions", strings.NewReader(`{"action":"refund.issue","arguments":{"id":"r1"},"wait_seconds":3}`))
		req.Header.Set("Authorization", "Bearer "+token)
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
