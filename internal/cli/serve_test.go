package cli_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
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

// TestServeInFlightFlags: --max-caller-in-flight and --max-in-flight reach the server. One
// caller's begin whose body has not arrived holds 4 KiB; with both bounds at 6 KiB, the same
// caller's next begin is refused 429 naming max_caller_in_flight, and another caller's names
// max_in_flight. Bounds below 1 are exit 2.
func TestServeInFlightFlags(t *testing.T) {
	t.Parallel()
	latchBin, policy := latchDir(t, "schema: latch.policy/v1\nactions:\n  refund.issue:\n    effect: \"refund:{id}\"\n    decision: allow\n")
	for _, bad := range [][]string{{"--max-in-flight", "0"}, {"--max-caller-in-flight", "-1"}, {"--login-concurrency", "-2"}} {
		cmd := exec.Command(latchBin, append([]string{"--policy", policy, "serve", "--listen", freeAddr(t)}, bad...)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), bad[0]) {
			t.Errorf("serve %v = %v %s, want exit 2 naming %s", bad, err, out, bad[0])
		}
	}
	alice := createToken(t, latchBin, nil, policy, "--agent", "alice-worker")
	bob := createToken(t, latchBin, nil, policy, "--agent", "bob-worker")
	p := startServe(t, latchBin, nil, "--policy", policy, "serve", "--max-caller-in-flight", "6144", "--max-in-flight", "6144")
	// alice's first begin: headers and a Content-Length of 4 KiB, and no body yet.
	held, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	fmt.Fprintf(held, "POST /v1/actions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n", alice)
	begin := func(token string) (int, string) {
		req, _ := http.NewRequest("POST", p.base+"/v1/actions", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The held request is counted once the server has read its headers: until then a begin is
	// answered for what it is (400, an empty body).
	var status int
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if status, body = begin(alice); status == http.StatusTooManyRequests {
			break
		}
	}
	if status != http.StatusTooManyRequests || !strings.Contains(body, "max_caller_in_flight") || !strings.Contains(body, "6144") {
		t.Fatalf("alice's second begin = %d %s, want 429 naming max_caller_in_flight 6144", status, body)
	}
	if status, body = begin(bob); status != http.StatusTooManyRequests || !strings.Contains(body, "max_in_flight") || strings.Contains(body, "max_caller") {
		t.Errorf("bob's begin = %d %s, want 429 naming max_in_flight", status, body)
	}
	held.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if status, body = begin(bob); status != http.StatusTooManyRequests {
			break
		}
	}
	if status != http.StatusBadRequest {
		t.Errorf("bob's begin once alice's is gone = %d %s, want 400 (an empty body, decided on its own)", status, body)
	}
}

// TestServeLoginConcurrency: --login-concurrency bounds the console's password checks. Eight
// logins sent at once find the one check of --login-concurrency 1 busy (429 "Too many logins
// at once"); with --login-concurrency 8 none does.
func TestServeLoginConcurrency(t *testing.T) {
	t.Parallel()
	latchBin, policy := latchDir(t, "schema: latch.policy/v1\nactions:\n  refund.issue:\n    effect: \"refund:{id}\"\n    decision: allow\n")
	busy := func(n string) int {
		p := startServe(t, latchBin, nil, "--policy", policy, "serve", "--login-concurrency", n)
		const logins = 8
		forms := make([]func() int, logins)
		for i := range forms {
			jar, _ := cookiejar.New(nil)
			c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := c.Get(p.base + "/login")
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
			if m == nil {
				t.Fatalf("the login page has no csrf field: %s", page)
			}
			form := url.Values{"csrf": {string(m[1])}, "name": {fmt.Sprintf("nobody%d", i)}, "password": {"wrong password, surely"}}
			forms[i] = func() int {
				resp, err := c.PostForm(p.base+"/login", form)
				if err != nil {
					t.Error(err)
					return 0
				}
				resp.Body.Close()
				return resp.StatusCode
			}
		}
		var wg sync.WaitGroup
		var refused atomic.Int32
		start := make(chan struct{})
		for _, f := range forms {
			wg.Go(func() {
				<-start
				if f() == http.StatusTooManyRequests {
					refused.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		return int(refused.Load())
	}
	if n := busy("1"); n == 0 {
		t.Errorf("--login-concurrency 1: none of 8 logins at once was refused 429")
	}
	if n := busy("8"); n != 0 {
		t.Errorf("--login-concurrency 8: %d of 8 logins at once were refused 429, want none", n)
	}
}
