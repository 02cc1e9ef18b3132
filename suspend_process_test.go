package latch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// The helper process of TestSuspendedHolderKilled: a guard that executes one refund whose
// executor appends a line to the Ran file and suspends; it prints the suspension as JSON and
// then waits to be killed. It runs instead of the tests when suspendChildEnv is set.
const suspendChildEnv = "LATCH_TEST_SUSPEND_CHILD"

func init() { children[suspendChildEnv] = suspendChild }

// suspendLease is how long the child's suspension holds its lease.
const suspendLease = 2 * time.Second

func suspendChild(spec string) error {
	var c struct{ Store, Ran string }
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		return err
	}
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing"})
	p, err := policy.Parse("latch.yaml", []byte(suspendPolicy))
	if err != nil {
		return err
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: c.Store, Lease: time.Second, SuspendLease: suspendLease})
	if err != nil {
		return err
	}
	_, err = g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: json.RawMessage(`{"refund_id":"k9","amount":10}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			if err := appendLine(c.Ran, "ran"); err != nil {
				return nil, latch.NotExecuted(err)
			}
			return nil, latch.Suspend(map[string]string{"message": "confirm?"})
		})
	var se *latch.SuspendedError
	if !errors.As(err, &se) {
		return fmt.Errorf("execute: %v, want a suspension", err)
	}
	b, _ := json.Marshal(map[string]string{"action_id": se.ActionID, "token": se.Token})
	fmt.Println(string(b))
	select {} // suspended, holding the effect, until killed
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestSuspendedHolderKilled: a real OS process executes a refund whose executor suspends, and
// is killed with SIGKILL while it holds the suspended effect. Until the suspension's lease
// lapses a duplicate is refused in_progress; after it the resume (with the exact token, by the
// same principal, from this process) is refused ambiguous, the effect is ambiguous, a retry is
// refused ambiguous, and the executor never ran a second time. Both stores.
func TestSuspendedHolderKilled(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t, backend, "latch_suspend")
			p, err := policy.Parse("latch.yaml", []byte(suspendPolicy))
			if err != nil {
				t.Fatal(err)
			}
			g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: url}) // migrates the store first
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			ranFile := filepath.Join(t.TempDir(), "ran")
			spec, _ := json.Marshal(map[string]string{"Store": url, "Ran": ranFile})
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), suspendChildEnv+"="+string(spec))
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var errOut strings.Builder
			cmd.Stderr = &errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatalf("reading the child's suspension: %v (stderr: %s)", err, errOut.String())
			}
			var s struct {
				ActionID string `json:"action_id"`
				Token    string `json:"token"`
			}
			if err := json.Unmarshal([]byte(line), &s); err != nil || s.Token == "" {
				t.Fatalf("child said %q: %v", line, err)
			}
			if err := cmd.Process.Kill(); err != nil { // SIGKILL: nothing of the child runs after it
				t.Fatal(err)
			}
			_ = cmd.Wait()
			killedAt := time.Now()

			ctx := as(t.Context(), "billing")
			var runs atomic.Int32
			args := json.RawMessage(`{"refund_id":"k9","amount":10}`)
			counting := func(context.Context, json.RawMessage) (any, error) { runs.Add(1); return "refunded", nil }
			eff, err := g.Store().Effect(t.Context(), "refund:k9")
			if err != nil || eff.State != store.Executing || !time.Now().Before(eff.LeaseExpiresAt) ||
				eff.LeaseExpiresAt.After(killedAt.Add(suspendLease)) {
				t.Fatalf("effect after the kill = %+v, %v; want executing under the suspension's live lease", eff, err)
			}
			if _, err := g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: args}, counting); reasonOf(err) != latch.ReasonInProgress {
				t.Errorf("a duplicate under the dead holder's live lease = %v, want in_progress", err)
			}
			time.Sleep(time.Until(eff.LeaseExpiresAt) + 100*time.Millisecond)
			_, err = g.Resume(ctx, &latch.ResumeRequest{ActionID: s.ActionID, Token: s.Token, Arguments: args,
				Input: map[string]json.RawMessage{"confirm": json.RawMessage("true")}}, counting)
			if kindOf(err) != latch.KindAmbiguous || !errors.Is(err, latch.ErrAmbiguousEffect) {
				t.Errorf("resume after the holder died and its lease lapsed = %v, want refused ambiguous", err)
			}
			if eff, err := g.Store().Effect(t.Context(), "refund:k9"); err != nil || eff.State != store.Ambiguous {
				t.Errorf("effect after the lease = %+v, %v; want ambiguous", eff, err)
			}
			if _, err := g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: args}, counting); reasonOf(err) != latch.ReasonAmbiguous {
				t.Errorf("a retry after the lease = %v, want ambiguous", err)
			}
			_, err = g.Resume(ctx, &latch.ResumeRequest{ActionID: s.ActionID, Token: s.Token, Arguments: args}, counting)
			if kindOf(err) != latch.KindAmbiguous {
				t.Errorf("a second resume = %v, want refused ambiguous", err)
			}
			b, err := os.ReadFile(ranFile)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(string(b), "ran"); got != 1 || runs.Load() != 0 {
				t.Errorf("the refund executed %d times in the child and %d here, want once, in the child only", got, runs.Load())
			}
			verifyChain(t, g)
		})
	}
}
