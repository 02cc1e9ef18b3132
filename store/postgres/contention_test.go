package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

// contendSpec is what one contending process is told (the JSON of $LATCH_PG_TEST_SPEC).
type contendSpec struct {
	URL      string        `json:"url"`
	Dir      string        `json:"dir"` // shared: ready-NAME, go, result-NAME
	Name     string        `json:"name"`
	Keys     int           `json:"keys"`
	Copies   int           `json:"copies"` // deliveries of each key by this process
	Workers  int           `json:"workers"`
	Executor time.Duration `json:"executor"` // how long the "executor" runs between Reserve and Record
}

// contendResult is what one contending process reports.
type contendResult struct {
	Reserved int64         `json:"reserved"`
	Refused  int64         `json:"refused"`
	Calls    int64         `json:"calls"` // store calls: Reserves and Records
	Slowest  time.Duration `json:"slowest"`
	SlowOp   string        `json:"slow_op"`
	Error    string        `json:"error,omitempty"`
}

// contentionDeadlockTimeout is the test database's deadlock_timeout: a deadlock stalls its
// waiters this long before PostgreSQL ends one of them.
const contentionDeadlockTimeout = 20 * time.Second

// contentionBound is the slowest store call the test accepts: well under the deadlock timeout,
// so that a single deadlock fails the test twice over (the counter and the bound), and well
// over what a call costs on a loaded 2-CPU machine under the race detector (where the slowest
// of these calls, the first ones, took up to 1.8 s with a load average of 26 and 2.6 s at 60).
const contentionBound = 10 * time.Second

// TestContentionNoDeadlock races OS processes over the same effect keys, each delivering every
// key twice from several goroutines at once (a redelivered webhook, received by several
// workers): reservations, refusals (whose receipts are appended in the reserving transaction),
// records, the group-commit batches of each process and their fall-back transactions all meet
// on the same effect rows and the one chain head. It runs in a database of its own, so that
// pg_stat_database's deadlock counter counts only its own transactions, and asserts that
// PostgreSQL detected no deadlock, that no store call took longer than contentionBound (a
// deadlock costs its waiters deadlock_timeout), that each key executed exactly once and that
// the chain verifies.
//
// It does not run in parallel with the package's other tests: its bound is on latency.
func TestContentionNoDeadlock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx := t.Context()
	base := serverURL(t)
	db := newDatabase(t, base)
	if err := execDirect(ctx, base, fmt.Sprintf(`ALTER DATABASE %s SET deadlock_timeout = '%dms'`,
		pgx.Identifier{db}.Sanitize(), contentionDeadlockTimeout.Milliseconds())); err != nil {
		t.Fatalf("set deadlock_timeout: %v", err)
	}
	u := withSchema(t, withDatabase(t, base, db), "latch")
	st, err := Open(ctx, u, nil) // created and migrated before the race
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	before := deadlocks(t, base, db)

	const processes, keys = 4, 100
	dir := t.TempDir()
	type exit struct {
		name string
		err  error
		out  string
	}
	exits := make(chan exit, processes)
	for i := range processes {
		spec, err := json.Marshal(contendSpec{URL: u, Dir: dir, Name: fmt.Sprint(i), Keys: keys, Copies: 2, Workers: 8,
			Executor: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=contend", "LATCH_PG_TEST_SPEC="+string(spec))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { exits <- exit{fmt.Sprint(i), cmd.Wait(), out.String()} }()
	}
	for ready := 0; ready < processes; {
		select {
		case e := <-exits:
			t.Fatalf("process %s exited before the start: %v\n%s", e.name, e.err, e.out)
		case <-time.After(time.Millisecond):
		}
		entries, err := filepath.Glob(filepath.Join(dir, "ready-*"))
		if err != nil {
			t.Fatal(err)
		}
		ready = len(entries)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for range processes {
		if e := <-exits; e.err != nil {
			t.Errorf("process %s: %v\n%s", e.name, e.err, e.out)
		}
	}
	if t.Failed() {
		return
	}

	var reserved, refused, calls int64
	for i := range processes {
		raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprint("result-", i)))
		if err != nil {
			t.Fatal(err)
		}
		var r contendResult
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if r.Error != "" {
			t.Errorf("process %d: %s", i, r.Error)
		}
		if r.Slowest >= contentionBound {
			t.Errorf("process %d: slowest call (%s) took %v, want < %v (deadlock_timeout %v)", i, r.SlowOp, r.Slowest,
				contentionBound, contentionDeadlockTimeout)
		}
		reserved, refused, calls = reserved+r.Reserved, refused+r.Refused, calls+r.Calls
		t.Logf("process %d: %d reserved, %d refused, %d store calls, slowest %v (%s)", i, r.Reserved, r.Refused, r.Calls,
			r.Slowest, r.SlowOp)
	}
	if reserved != keys || reserved+refused != processes*2*keys {
		t.Errorf("%d reserved and %d refused over %d keys delivered %d times: want %d reserved", reserved, refused, keys,
			processes*2, keys)
	}
	if n := deadlocks(t, base, db) - before; n != 0 {
		t.Errorf("pg_stat_database.deadlocks of %s rose by %d during the race, want 0", db, n)
	}
	if st, err = Open(ctx, u, &Config{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n := verifyChain(t, st); n != int(refused)+keys {
		t.Errorf("the chain holds %d receipts, want %d (one per refusal and per record)", n, int(refused)+keys)
	}
}

// contend is the part of one process in TestContentionNoDeadlock: it opens the store, says it is
// ready, waits for the start, and delivers every key Copies times with Workers goroutines, in
// the same order as every other process, so that they all meet on each key.
func contend(ctx context.Context, spec contendSpec) error {
	st, err := Open(ctx, spec.URL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Head(ctx); err != nil { // a connection in the pool before the start
		return err
	}
	if err := os.WriteFile(filepath.Join(spec.Dir, "ready-"+spec.Name), nil, 0o600); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(spec.Dir, "go")); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
	}
	var r contendResult
	var mu sync.Mutex
	timed := func(op string, fn func() error) error {
		t0 := time.Now()
		err := fn()
		d := time.Since(t0)
		mu.Lock()
		r.Calls++
		if d > r.Slowest {
			r.Slowest, r.SlowOp = d, op
		}
		mu.Unlock()
		return err
	}
	var next, reserved, refused atomic.Int64
	errs := make([]error, spec.Workers)
	var wg sync.WaitGroup
	for w := range spec.Workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= spec.Keys*spec.Copies {
					return
				}
				// Copies deliveries of a key in a row: the workers of one process meet on it too.
				key := fmt.Sprintf("charge:inv_%d", i/spec.Copies)
				sum := sha256.Sum256([]byte(key))
				c := newCutCall(key)
				c.hash = "sha256:" + hex.EncodeToString(sum[:])
				var res *store.ReserveResult
				err := timed("reserve "+key, func() (err error) {
					res, err = st.Reserve(ctx, c.reserveReq(time.Now()))
					return err
				})
				if err == nil && !res.Reserved {
					refused.Add(1)
					continue
				}
				if err == nil {
					reserved.Add(1)
					time.Sleep(spec.Executor)
					err = timed("record "+key, func() error {
						_, err := st.Record(ctx, c.recordReq(time.Now(), res.Effect.Attempt))
						return err
					})
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	r.Reserved, r.Refused = reserved.Load(), refused.Load()
	if err := errors.Join(errs...); err != nil {
		r.Error = err.Error()
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(spec.Dir, "result-"+spec.Name), raw, 0o600)
}

// newDatabase creates a database of its own for the test, dropped with t.Cleanup.
func newDatabase(t *testing.T, base string) string {
	t.Helper()
	name := "latch_test_" + randomHex(8)
	if err := execDirect(t.Context(), base, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := execDirect(ctx, base, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return name
}

// withDatabase returns raw naming database db instead of its own.
func withDatabase(t *testing.T, raw, db string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("url.Parse(LATCH_TEST_POSTGRES_URL) = %v", err)
	}
	u.Path = "/" + db
	return u.String()
}

// deadlocks reads pg_stat_database.deadlocks of db. A backend reports its counters when it
// exits (and at most once a second while it runs), so it first waits until no other session is
// connected to db: every backend that ran in it has exited and reported.
func deadlocks(t *testing.T, base, db string) int64 {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var others int64
		if err := queryDirect(ctx, base, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, []any{db}, &others); err != nil {
			t.Fatal(err)
		}
		if others == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still connected to %s after 30 s", others, db)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var n int64
	if err := queryDirect(ctx, base, `SELECT deadlocks FROM pg_stat_database WHERE datname = $1`, []any{db}, &n); err != nil {
		t.Fatalf("read pg_stat_database.deadlocks of %s: %v", db, err)
	}
	return n
}

// childContend runs contend for a re-executed test binary.
func childContend() int {
	var spec contendSpec
	if err := json.Unmarshal([]byte(os.Getenv("LATCH_PG_TEST_SPEC")), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "LATCH_PG_TEST_SPEC:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := contend(ctx, spec); err != nil {
		fmt.Fprintln(os.Stderr, strings.TrimSpace(err.Error()))
		return 1
	}
	return 0
}
