package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchkit/latch/notify"
)

// TestServeNotify: `latch serve --notify URL --notify-secret-file F` posts a signed alert to a
// real receiver when a call over HTTP needs an approval; /metrics answers without a token.
func TestServeNotify(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	latchBin := filepath.Join(dir, "latch")
	if err := os.Symlink(exe, latchBin); err != nil {
		t.Fatal(err)
	}
	policyPath := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(policyPath, []byte(sweepPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	secretFile := filepath.Join(dir, "notify.key")
	if err := os.WriteFile(secretFile, []byte("k3y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	alerts := make(chan notify.Alert, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := notify.Verify([]byte("k3y"), r.Header.Get(notify.HeaderTimestamp), r.Header.Get(notify.HeaderSignature), body, time.Now(), time.Minute); err != nil {
			t.Errorf("alert signature: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var a notify.Alert
		if err := json.Unmarshal(body, &a); err != nil {
			t.Errorf("alert body: %v", err)
		}
		alerts <- a
	}))
	defer recv.Close()

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(latchBin, append([]string{"--policy", policyPath}, args...)...)
		cmd.Env = cleanEnv()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("latch %v: %v", args, err)
		}
		return string(out)
	}
	var tok struct{ Token string }
	if err := json.Unmarshal([]byte(run("token", "create", "--agent", "billing-worker", "--json")), &tok); err != nil {
		t.Fatal(err)
	}
	// Without a secret, a json notifier is refused before anything starts.
	cmd := exec.Command(latchBin, "--policy", policyPath, "serve", "--notify", recv.URL)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "needs a secret") {
		t.Errorf("serve --notify without a secret = %v\n%s", err, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var stderr bytes.Buffer
	srv := exec.Command(latchBin, "--policy", policyPath, "serve", "--listen", addr, "--notify", recv.URL, "--notify-secret-file", secretFile)
	srv.Env = cleanEnv()
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	base := "http://" + addr
	var resp *http.Response
	for deadline := time.Now().Add(20 * time.Second); ; {
		req, _ := http.NewRequest("POST", base+"/v1/actions", strings.NewReader(`{"action":"billing.charge","arguments":{"invoice_id":"inv_9","amount":90000}}`))
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer: %v\n%s", err, &stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("POST /v1/actions = %d", resp.StatusCode)
	}
	select {
	case a := <-alerts:
		if a.Alert != notify.KindApprovalRequested || a.Action != "billing.charge" || a.EffectKey != "charge:inv_9" {
			t.Errorf("alert = %+v", a)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no alert\n%s", &stderr)
	}
	m, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(m.Body)
	m.Body.Close()
	if !strings.Contains(string(body), `latch_calls_total{action="billing.charge",result="approval_required"} 1`) {
		t.Errorf("/metrics lacks the call:\n%s", body)
	}
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("serve: %v\n%s", err, &stderr)
	}
}
