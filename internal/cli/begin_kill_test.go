package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptrace"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/client"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/store"
)

// The begin-kill child: one refund worker, run as its own OS process by TestBeginKillLoop. It
// begins refund.issue for $REFUND_ID through `latch serve` with the request key $REFUND_KEY,
// printing "sent" the moment its request is written, then executes the refund — appending
// "ID TOKEN" to the ledger $REFUND_LEDGER unless a line with its idempotency token is there
// already, as a payment processor honours an idempotency key — and reports it committed. A
// refund found committed already, or whose outcome the process before it reported, is done. It
// exits 0 when the refund is done, 3 otherwise.
func init() {
	if os.Getenv("LATCH_BEGIN_KILL_CHILD") != "1" {
		return
	}
	if err := refundChild(); err != nil {
		fmt.Fprintln(os.Stderr, "refund child:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

func refundChild() error {
	ctx := latch.WithRequestKey(context.Background(), os.Getenv("REFUND_KEY"))
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		os.Stdout.WriteString("sent\n") // the parent kills from here on
	}})
	c := client.New(os.Getenv("REFUND_URL"), os.Getenv("REFUND_TOKEN"))
	id := os.Getenv("REFUND_ID")
	b, err := c.Begin(ctx, "refund.issue", json.RawMessage(`{"id":"`+id+`","cents":500}`), "", 0)
	var ee *latch.EffectError
	switch {
	case errors.As(err, &ee) && ee.Reason == "committed":
		return nil // an earlier process refunded and reported it
	case err != nil:
		return fmt.Errorf("begin: %w", err)
	}
	ledger := os.Getenv("REFUND_LEDGER")
	seen, err := os.ReadFile(ledger)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if !bytes.Contains(seen, []byte(" "+b.IdempotencyToken+"\n")) {
		f, err := os.OpenFile(ledger, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		_, err = f.WriteString(id + " " + b.IdempotencyToken + "\n") // one write: a kill cannot split it
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	_, err = c.Finish(context.Background(), b.ActionID, "committed", json.RawMessage(`{"refund":"rf_`+id+`"}`), "")
	var oe *latch.OutcomeError
	switch {
	case errors.As(err, &oe) && oe.Reason == "already_recorded":
		// The process before this one reported the reservation this one continued (its
		// outcome request reached the server before it was killed): the refund is reported.
		return nil
	case err != nil:
		return fmt.Errorf("outcome: %w", err)
	}
	return nil
}

// TestBeginKillLoop runs refund workers as real OS processes against a real `latch serve`
// process. Each round, a worker begins a refund with a request key and is killed with SIGKILL at
// a random moment 0–6 ms after its begin request is written — before the server answered, after
// it reserved and answered, after the worker refunded, after it reported — and a fresh process
// then does the same refund with the same key. Across the rounds, on SQLite and on Postgres,
// every refund ends committed (no effect left ambiguous or in progress that never ran) and the
// ledger holds each refund exactly once: the second process continues the first one's
// reservation (the same attempt, so the same idempotency token) rather than meeting it as
// in_progress and leaving it to lapse into ambiguous.
func TestBeginKillLoop(t *testing.T) {
	t.Parallel()
	const rounds = 30
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			latchBin, policy := latchDir(t, "schema: latch.policy/v1\nactions:\n  refund.issue:\n    effect: \"refund:{id}\"\n    decision: allow\n")
			storeURL := testdb.URL(t, backend, "latch_cli_kill")
			token := createToken(t, latchBin, nil, policy, "--store", storeURL, "--agent", "refunder")
			p := startServe(t, latchBin, nil, "--policy", policy, "--store", storeURL, "serve", "--sweep", "0")
			ledger := t.TempDir() + "/ledger"
			run := func(id, key string, kill bool) (killedAt time.Duration, err error) {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(cleanEnv(), "LATCH_BEGIN_KILL_CHILD=1", "REFUND_URL="+p.base, "REFUND_TOKEN="+token,
					"REFUND_ID="+id, "REFUND_KEY="+key, "REFUND_LEDGER="+ledger)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.StdoutPipe()
				if err != nil {
					return 0, err
				}
				if err := cmd.Start(); err != nil {
					return 0, err
				}
				sc := bufio.NewScanner(out)
				sent := make(chan struct{})
				go func() {
					for sc.Scan() {
						if sc.Text() == "sent" {
							close(sent)
							break
						}
					}
					for sc.Scan() {
					}
				}()
				if kill {
					select {
					case <-sent:
						killedAt = time.Duration(rand.IntN(6001)) * time.Microsecond
						time.Sleep(killedAt)
						_ = cmd.Process.Signal(syscall.SIGKILL)
					case <-time.After(20 * time.Second):
						_ = cmd.Process.Kill()
						return 0, fmt.Errorf("the worker never sent its begin: %s", stderr.String())
					}
				}
				err = cmd.Wait()
				if err != nil {
					err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
				}
				return killedAt, err
			}
			st, err := latch.OpenStore(t.Context(), storeURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			// At least rounds rounds, and more (up to three times as many) until one killed a
			// worker between its reservation and its outcome.
			finished, stranded, n := 0, 0, 0
			for i := 0; i < rounds || stranded == 0 && i < 3*rounds; i++ {
				n++
				id := fmt.Sprintf("r%02d", i)
				key := fmt.Sprintf("refund-%s-%08x", id, rand.Uint32())
				at, err := run(id, key, true)
				if err == nil {
					finished++ // it finished within the 0–6 ms
				} else if !strings.Contains(err.Error(), "signal: killed") {
					t.Fatalf("round %d: the first worker failed on its own (killed at %v): %v", i, at, err)
				}
				// A reservation the killed worker left executing: the case a lost begin answer
				// used to strand until its lease lapsed into ambiguous.
				left, err := st.Effect(t.Context(), "refund:"+id)
				held := err == nil && left.State == store.Executing
				if held {
					stranded++
				}
				if _, err := run(id, key, false); err != nil {
					t.Fatalf("round %d: the second worker (first killed %v after sending) = %v", i, at, err)
				}
				if e, err := st.Effect(t.Context(), "refund:"+id); held && (err != nil || e.ActionID != left.ActionID) {
					t.Errorf("round %d: the killed worker's reservation %s was not the one continued: %+v, %v", i, left.ActionID, e, err)
				}
			}
			t.Logf("%d rounds: %d first workers finished before their kill, %d left their reservation executing", n, finished, stranded)
			if stranded == 0 {
				t.Errorf("no round killed a worker between its reservation and its outcome: the loop tested nothing")
			}
			raw, err := os.ReadFile(ledger)
			if err != nil {
				t.Fatal(err)
			}
			times := map[string]int{}
			for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
				times[strings.Fields(line)[0]]++
			}
			for i := range n {
				id := fmt.Sprintf("r%02d", i)
				e, err := st.Effect(t.Context(), "refund:"+id)
				if err != nil {
					t.Errorf("refund %s: %v", id, err)
					continue
				}
				if e.State != store.Committed || e.Attempt != 1 {
					t.Errorf("refund %s is %s at attempt %d (%s), want committed at attempt 1", id, e.State, e.Attempt, e.Error)
				}
				if times[id] != 1 {
					t.Errorf("refund %s is in the ledger %d times, want exactly once", id, times[id])
				}
			}
		})
	}
}
