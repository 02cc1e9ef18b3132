package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/store"
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

// budgetAlertPolicy budgets the ops grant at five calls a day.
const budgetAlertPolicy = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
authority:
  grants:
    - id: ops
      subject: {agent: billing-worker}
      actions: [billing.*]
      budgets:
        - {metric: count, limit: 5, window: P1D}
`

// TestServeBudgetAlert: `latch serve --notify URL --notify-budget-share 0.6` alerts once when a
// budget's consumption reaches 60% of its limit — not again on the next refreshes while it stays
// there — and again after it fell below (an ambiguous charge resolved failed is released) and
// reached it again: two alerts, counted at a real receiver that verifies each signature. The
// gauge latch_budget_consumption_ratio shows the consumption, and the server stops cleanly.
func TestServeBudgetAlert(t *testing.T) {
	t.Parallel()
	latchBin, policyPath := latchDir(t, budgetAlertPolicy)
	dir := filepath.Dir(policyPath)
	secretFile := filepath.Join(dir, "notify.key")
	if err := os.WriteFile(secretFile, []byte("k3y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	recv := newAlertReceiver(t, "k3y")
	count := recv.count
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); count() < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the receiver got %d alerts, want %d", count(), n)
			}
		}
		time.Sleep(600 * time.Millisecond) // several refreshes: no alert more
		if c := count(); c != n {
			t.Fatalf("the receiver got %d alerts, want %d", c, n)
		}
	}

	storeURL := "sqlite:" + filepath.Join(dir, "state.db")
	p := startServe(t, latchBin, nil, "--policy", policyPath, "--store", storeURL, "serve", "--notify", recv.url, "--notify-secret-file", secretFile,
		"--budget-refresh", "100ms", "--notify-budget-share", "0.6")
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: policyPath, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	call := func(inv string, fail error) {
		t.Helper()
		ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"})
		_, err := g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"` + inv + `"}`)},
			func(context.Context, json.RawMessage) (any, error) { return nil, fail })
		if (err != nil) != (fail != nil) {
			t.Fatalf("call %s = %v", inv, err)
		}
	}
	call("i1", nil)
	call("i2", nil)
	time.Sleep(400 * time.Millisecond) // 40%: refreshed, below the share
	if c := count(); c != 0 {
		t.Fatalf("alerts at 40%%: %d, want none", c)
	}
	call("i3", errors.New("connection reset")) // ambiguous: held, 60%
	waitFor(1)
	if _, err := g.Resolve(t.Context(), "charge:i3", store.Failed, "cli:ana"); err != nil { // released: 40%
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	call("i4", nil) // 60% again: a new crossing
	waitFor(2)
	got, deliveries := recv.alerts()
	for _, a := range got {
		if a.Alert != notify.KindBudgetThreshold || !strings.Contains(a.Text, "Budget ops (grant count) is 60% consumed: 3 of 5") {
			t.Errorf("alert = %+v", a)
		}
	}
	if deliveries[0] == deliveries[1] || !strings.HasPrefix(deliveries[0], "budget:ops:count:") {
		t.Errorf("deliveries %q: want one id per crossing", deliveries)
	}

	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `latch_budget_consumption_ratio{budget="ops",kind="grant",metric="count"} 0.6`) {
		t.Errorf("/metrics lacks the budget's ratio:\n%s", body)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("serve: %v\n%s", err, p.stderr)
	}
}

// breakGlassAlertPolicy has one envelope carol, on call, may open.
const breakGlassAlertPolicy = `schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    decision: allow
approvers:
  roles:
    oncall: [carol]
authority:
  grants: []
  break_glass:
    - id: incident
      subject: {agent: "ops-*"}
      actions: [payments.refund]
      max_ttl: 2h
      openers: [oncall]
`

// TestBreakGlassCLINotify: `latch break-glass --notify URL` posts one signed break_glass_opened
// alert for the opening it makes, before it exits; a refused opening posts none.
func TestBreakGlassCLINotify(t *testing.T) {
	t.Parallel()
	latchBin, policyPath := latchDir(t, breakGlassAlertPolicy)
	dir := filepath.Dir(policyPath)
	secretFile := filepath.Join(dir, "notify.key")
	if err := os.WriteFile(secretFile, []byte("k3y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	recv := newAlertReceiver(t, "k3y")
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(latchBin, append([]string{"--policy", policyPath}, args...)...)
		cmd.Env = append(cleanEnv(), "LATCH_APPROVER=")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("s3cret-pass\n", "approver", "add", "carol", "--role", "oncall"); err != nil {
		t.Fatalf("approver add: %v\n%s", err, out)
	}
	// Refused (beyond max_ttl): no grant, no alert.
	if out, err := run("s3cret-pass\n", "break-glass", "--envelope", "incident", "--for", "ops-bot", "--ttl", "3h",
		"--reason", "INC-7", "--as", "carol", "--notify", recv.url, "--notify-secret-file", secretFile); err == nil {
		t.Fatalf("break-glass beyond max_ttl succeeded:\n%s", out)
	}
	out, err := run("s3cret-pass\n", "break-glass", "--envelope", "incident", "--for", "ops-bot", "--ttl", "1h",
		"--reason", "INC-7: refunds stuck", "--as", "carol", "--notify", recv.url, "--notify-secret-file", secretFile)
	if err != nil {
		t.Fatalf("break-glass: %v\n%s", err, out)
	}
	got, _ := recv.alerts()
	if len(got) != 1 {
		t.Fatalf("alerts received by the time break-glass exited = %d, want 1: %+v\n%s", len(got), got, out)
	}
	if a := got[0]; a.Alert != notify.KindBreakGlassOpened || !strings.Contains(a.Text, "INC-7: refunds stuck") || !strings.Contains(a.Text, "ops-bot") {
		t.Errorf("alert = %+v, want break_glass_opened naming ops-bot and the reason", a)
	}
}

// alertReceiver is a real HTTP receiver of latch's alerts that verifies each signature with key
// and keeps what it got, in order.
type alertReceiver struct {
	url        string
	mu         sync.Mutex
	got        []notify.Alert
	deliveries []string // each alert's delivery id
}

func newAlertReceiver(t *testing.T, key string) *alertReceiver {
	t.Helper()
	ar := &alertReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := notify.Verify([]byte(key), r.Header.Get(notify.HeaderTimestamp), r.Header.Get(notify.HeaderSignature), body, time.Now(), time.Minute); err != nil {
			t.Errorf("alert signature: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var a notify.Alert
		if err := json.Unmarshal(body, &a); err != nil {
			t.Errorf("alert body: %v", err)
		}
		ar.mu.Lock()
		ar.got = append(ar.got, a)
		ar.deliveries = append(ar.deliveries, r.Header.Get(notify.HeaderDelivery))
		ar.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	ar.url = srv.URL
	return ar
}

// alerts returns what the receiver got so far, and their delivery ids.
func (ar *alertReceiver) alerts() ([]notify.Alert, []string) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return slices.Clone(ar.got), slices.Clone(ar.deliveries)
}

func (ar *alertReceiver) count() int {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return len(ar.got)
}
