package cli_test

import (
	"encoding/json"
	"io"
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
	latchBin, policyPath := latchDir(t, sweepPolicy)
	dir := filepath.Dir(policyPath)
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

	token := createToken(t, latchBin, nil, policyPath, "--agent", "billing-worker")
	// Without a secret, a json notifier is refused before anything starts.
	cmd := exec.Command(latchBin, "--policy", policyPath, "serve", "--notify", recv.URL)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "needs a secret") {
		t.Errorf("serve --notify without a secret = %v\n%s", err, out)
	}

	p := startServe(t, latchBin, nil, "--policy", policyPath, "serve", "--notify", recv.URL, "--notify-secret-file", secretFile)
	srv, stderr, base := p.cmd, p.stderr, p.base
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; {
		req, _ := http.NewRequest("POST", base+"/v1/actions", strings.NewReader(`{"action":"billing.charge","arguments":{"invoice_id":"inv_9","amount":90000}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer: %v\n%s", err, stderr)
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
		t.Fatalf("no alert\n%s", stderr)
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
		t.Errorf("serve: %v\n%s", err, stderr)
	}
}
