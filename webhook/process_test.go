package webhook_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/webhook"
	"go.uber.org/goleak"
)

// receiverEnv makes the test binary, re-executed, a receiver process (TestMain): it serves the
// webhook on 127.0.0.1, prints its address, appends each effect to the ledger file and exits
// when its stdin closes.
const receiverEnv = "LATCH_WEBHOOK_TEST_RECEIVER"

func TestMain(m *testing.M) {
	if os.Getenv(receiverEnv) != "" {
		if err := runReceiver(os.Getenv(receiverEnv), os.Getenv(receiverEnv+"_LEDGER")); err != nil {
			fmt.Fprintln(os.Stderr, "receiver process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m) // handlers, guards and receiver processes all end with their test
}

func runReceiver(store, ledger string) error {
	pol, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		return err
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: pol, StoreURL: store})
	if err != nil {
		return err
	}
	defer g.Close()
	v, err := webhook.Stripe(&webhook.StripeConfig{Secrets: []string{stripeSecret}})
	if err != nil {
		return err
	}
	var mu sync.Mutex
	h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: v},
		func(ctx context.Context, ev *webhook.Event) (any, error) {
			time.Sleep(100 * time.Millisecond) // long enough for a concurrent delivery to meet it
			mu.Lock()
			defer mu.Unlock()
			f, err := os.OpenFile(ledger, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, latch.NotExecuted(err)
			}
			defer f.Close()
			_, err = fmt.Fprintf(f, "%s %d\n", ev.ID, os.Getpid())
			return os.Getpid(), err
		})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	fmt.Printf("listening %s\n", ln.Addr())
	bufio.NewReader(os.Stdin).ReadString('\n') // until the test closes stdin
	return srv.Close()
}

// Deliveries of one event to two receiver processes sharing a store run the effect once.
func TestTwoProcesses(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t, backend, "webhook")
			ledger := filepath.Join(t.TempDir(), "ledger")
			addrs := make([]string, 2)
			for i := range addrs {
				addrs[i] = startReceiver(t, url, ledger)
			}
			// A redelivery to the other process, after the first committed.
			a := deliver(t, t.Context(), addrs[0], "evt_p1")
			b := deliver(t, t.Context(), addrs[1], "evt_p1")
			if a.status != 200 || b.status != 200 || b.body != a.body || b.header.Get(webhook.HeaderReplayed) != "true" {
				t.Errorf("deliveries to two processes = %d %q, %d %q (replayed %q); want the second replaying the first",
					a.status, a.body, b.status, b.body, b.header.Get(webhook.HeaderReplayed))
			}
			// Two deliveries at once, one to each process.
			var wg sync.WaitGroup
			answers := make([]answer, 2)
			errs := make([]error, 2)
			for i, addr := range addrs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body, h := stripeDelivery("evt_p2")
					answers[i], errs[i] = tryPost(t.Context(), addr, body, h)
				}()
			}
			wg.Wait()
			ok := 0
			for i, a := range answers {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				switch a.status {
				case 200:
					ok++
				case 409:
				default:
					t.Errorf("concurrent delivery = %d %q, want 200 or 409", a.status, a.body)
				}
			}
			if ok == 0 {
				t.Errorf("concurrent deliveries = %d, %d; want at least one 200", answers[0].status, answers[1].status)
			}
			b2, err := os.ReadFile(ledger)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b2)), "\n")
			count := map[string]int{}
			for _, l := range lines {
				id, _, _ := strings.Cut(l, " ")
				count[id]++
			}
			if count["evt_p1"] != 1 || count["evt_p2"] != 1 || len(lines) != 2 {
				t.Errorf("ledger = %q, want evt_p1 and evt_p2 once each", lines)
			}
		})
	}
}

// startReceiver starts a receiver process on url and returns its base URL.
func startReceiver(t *testing.T, url, ledger string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), receiverEnv+"="+url, receiverEnv+"_LEDGER="+ledger)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if addr, ok := strings.CutPrefix(lines.Text(), "listening "); ok {
			go func() {
				for lines.Scan() {
				}
			}()
			return "http://" + addr
		}
	}
	t.Fatalf("receiver process did not start: %v", lines.Err())
	return ""
}
