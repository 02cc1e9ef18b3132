package latchasynq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/latchkit/latch"
	latchasynq "github.com/latchkit/latch/integrations/asynq"
	"github.com/latchkit/latch/internal/remotetest"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
)

const testPolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
`

// redisAddr is the address of the test's Redis: the server scripts/test.sh starts.
func redisAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("LATCH_TEST_REDIS_ADDR")
	if addr == "" {
		if os.Getenv("LATCH_REQUIRE_REDIS") == "1" {
			t.Fatal("LATCH_REQUIRE_REDIS=1 but LATCH_TEST_REDIS_ADDR is unset: run ./scripts/test.sh, which starts a server")
		}
		t.Skip("LATCH_TEST_REDIS_ADDR is unset (scripts/test.sh sets it)")
	}
	return addr
}

type fixture struct {
	guard     *latch.Guard
	client    *asynq.Client
	inspector *asynq.Inspector
	remote    *remotetest.Server
	queue     string
}

type charge struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
}

// setup starts an asynq server on a queue of its own on the test Redis, its charge handler
// protected by latch on a SQLite file.
func setup(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, func(*remotetest.Server) *latch.Options { return nil })
}

// setupWith is setup with the call options options returns for the remote the handlers use.
func setupWith(t *testing.T, options func(*remotetest.Server) *latch.Options) *fixture {
	t.Helper()
	return setupPolicy(t, testPolicy, options, false)
}

// setupPolicy is setupWith under the policy doc, with Config.TaskFromTask set to fromTask.
func setupPolicy(t *testing.T, doc string, options func(*remotetest.Server) *latch.Options, fromTask bool) *fixture {
	t.Helper()
	redis := asynq.RedisClientOpt{Addr: redisAddr(t)}
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, "sqlite", "latchasynq")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })

	var b [6]byte
	_, _ = rand.Read(b[:])
	queue := "latch_test_" + hex.EncodeToString(b[:])
	remote := remotetest.New(t)
	charge := asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		var c charge
		if err := json.Unmarshal(task.Payload(), &c); err != nil {
			return latch.NotExecuted(err)
		}
		_, err := remote.Act(ctx, c.InvoiceID)
		if errors.Is(err, remotetest.ErrRefused) {
			return latch.NotExecuted(err)
		}
		return err
	})
	refund := asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		_, err := remote.Act(ctx, "refund")
		return err
	})
	mux := asynq.NewServeMux()
	mux.Handle("charge:invoice", charge)
	mux.Handle("refund:invoice", refund)
	mux.Use(latchasynq.Middleware(g, &latchasynq.Config{
		Principal:    latch.Principal{Agent: "billing-worker"},
		Options:      options(remote),
		TaskFromTask: fromTask,
		Action: func(task *asynq.Task) string {
			return map[string]string{"charge:invoice": "billing.charge", "refund:invoice": "billing.refund"}[task.Type()]
		},
	}))
	srv := asynq.NewServer(redis, asynq.Config{
		Concurrency:              4,
		Queues:                   map[string]int{queue: 1},
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return 50 * time.Millisecond },
		TaskCheckInterval:        20 * time.Millisecond,
		DelayedTaskCheckInterval: 50 * time.Millisecond,
		LogLevel:                 asynq.FatalLevel,
		ShutdownTimeout:          5 * time.Second,
	})
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	client := asynq.NewClient(redis)
	t.Cleanup(func() { client.Close() })
	inspector := asynq.NewInspector(redis)
	t.Cleanup(func() {
		_ = inspector.DeleteQueue(queue, true)
		inspector.Close()
	})
	return &fixture{guard: g, client: client, inspector: inspector, remote: remote, queue: queue}
}

func (f *fixture) enqueue(t *testing.T, typ string, c charge) string {
	t.Helper()
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	info, err := f.client.Enqueue(asynq.NewTask(typ, payload), asynq.Queue(f.queue), asynq.MaxRetry(3), asynq.Retention(time.Hour))
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return info.ID
}

// settle waits until the task is completed or archived.
func (f *fixture) settle(t *testing.T, id string) *asynq.TaskInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := f.inspector.GetTaskInfo(f.queue, id)
		if err != nil {
			t.Fatalf("GetTaskInfo(%s): %v", id, err)
		}
		if info.State == asynq.TaskStateCompleted || info.State == asynq.TaskStateArchived {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s after 30s", id, info.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) state(t *testing.T, key string) latch.State {
	t.Helper()
	e, err := f.guard.Store().Effect(t.Context(), key)
	if err != nil {
		t.Fatalf("Effect(%s): %v", key, err)
	}
	return e.State
}

func TestAsynq(t *testing.T) {
	t.Parallel()
	f := setup(t)

	t.Run("redelivery after commit does not run again", func(t *testing.T) {
		t.Parallel()
		first := f.settle(t, f.enqueue(t, "charge:invoice", charge{InvoiceID: "inv_1", Amount: 100}))
		if first.State != asynq.TaskStateCompleted {
			t.Fatalf("first task = %s (%s), want completed", first.State, first.LastErr)
		}
		dup := f.settle(t, f.enqueue(t, "charge:invoice", charge{InvoiceID: "inv_1", Amount: 100}))
		if dup.State != asynq.TaskStateCompleted || dup.Retried != 0 {
			t.Errorf("duplicate task = %s after %d retries (%s), want completed without running", dup.State, dup.Retried, dup.LastErr)
		}
		if n := f.remote.Acts("inv_1"); n != 1 {
			t.Errorf("remote acted %d times for inv_1, want 1", n)
		}
	})

	t.Run("lost reply is ambiguous and the retried task does not run", func(t *testing.T) {
		t.Parallel()
		f.remote.Fail("inv_2", remotetest.DropReply)
		id := f.enqueue(t, "charge:invoice", charge{InvoiceID: "inv_2", Amount: 200})
		info := f.settle(t, id)
		if info.State != asynq.TaskStateArchived || info.Retried != 0 {
			t.Fatalf("task after a lost reply = %s after %d retries, want archived with no retry", info.State, info.Retried)
		}
		if !strings.Contains(info.LastErr, `effect "charge:inv_2" is ambiguous`) {
			t.Errorf("task error = %q, want it to name the ambiguous effect charge:inv_2", info.LastErr)
		}
		if s := f.state(t, "charge:inv_2"); s != latch.StateAmbiguous {
			t.Errorf("effect charge:inv_2 = %s, want ambiguous", s)
		}
		// Someone runs the archived task again: latch refuses before the handler runs.
		if err := f.inspector.RunTask(f.queue, id); err != nil {
			t.Fatal(err)
		}
		info = f.settle(t, id)
		if info.State != asynq.TaskStateArchived || !strings.Contains(info.LastErr, "latch resolve charge:inv_2") {
			t.Errorf("task run again = %s (%q), want archived again, naming the effect", info.State, info.LastErr)
		}
		if n := f.remote.Acts("inv_2"); n != 1 {
			t.Fatalf("remote acted %d times for inv_2, want 1 (the retry must not run)", n)
		}
		// A person finds the charge did happen: running the task again completes it, still once.
		if _, err := f.guard.Resolve(t.Context(), "charge:inv_2", latch.StateCommitted, "cli:test"); err != nil {
			t.Fatal(err)
		}
		if err := f.inspector.RunTask(f.queue, id); err != nil {
			t.Fatal(err)
		}
		if info = f.settle(t, id); info.State != asynq.TaskStateCompleted {
			t.Errorf("task run after resolve --committed = %s (%s), want completed", info.State, info.LastErr)
		}
		if n := f.remote.Acts("inv_2"); n != 1 {
			t.Errorf("remote acted %d times for inv_2, want 1", n)
		}
	})

	t.Run("NotExecuted is retried by asynq and runs once", func(t *testing.T) {
		t.Parallel()
		f.remote.Fail("inv_3", remotetest.Refuse)
		info := f.settle(t, f.enqueue(t, "charge:invoice", charge{InvoiceID: "inv_3", Amount: 300}))
		if info.State != asynq.TaskStateCompleted || info.Retried != 1 {
			t.Fatalf("task = %s after %d retries (%s), want completed after 1 retry", info.State, info.Retried, info.LastErr)
		}
		if !strings.Contains(info.LastErr, "not executed") {
			t.Errorf("first attempt's error = %q, want the NotExecuted error", info.LastErr)
		}
		if n := f.remote.Acts("inv_3"); n != 1 {
			t.Errorf("remote acted %d times for inv_3, want 1", n)
		}
		if s := f.state(t, "charge:inv_3"); s != latch.StateCommitted {
			t.Errorf("effect charge:inv_3 = %s, want committed", s)
		}
	})

	t.Run("denied task is archived without running", func(t *testing.T) {
		t.Parallel()
		info := f.settle(t, f.enqueue(t, "refund:invoice", charge{InvoiceID: "inv_4"}))
		if info.State != asynq.TaskStateArchived || info.Retried != 0 || !strings.Contains(info.LastErr, "denied") {
			t.Errorf("refund task = %s after %d retries (%q), want archived, denied, no retry", info.State, info.Retried, info.LastErr)
		}
		if n := f.remote.Acts("refund"); n != 0 {
			t.Errorf("remote acted %d times for the refund, want 0", n)
		}
	})
}

// TestAsynqReconcile: with a reconcile hook that asks the remote what it did, and the guard's
// sweeper running, a task whose effect went ambiguous is not archived: asynq retries it, the
// hook resolves the effect, and the retry runs the handler once ("not executed") or completes
// without running ("committed") — nobody runs an archived task or resolves anything by hand. A
// hook that never knows is retried until MaxRetry, then archived naming the effect.
func TestAsynqReconcile(t *testing.T) {
	t.Parallel()
	f := setupWith(t, func(remote *remotetest.Server) *latch.Options {
		return &latch.Options{Reconcile: latch.Reconciler(func(_ context.Context, _ *latch.Attempt, c charge) (latch.Outcome, any, error) {
			switch {
			case c.InvoiceID == "inv_9":
				return latch.OutcomeUnknown, nil, errors.New("the provider's ledger is down")
			case remote.Acts(c.InvoiceID) == 0:
				return latch.OutcomeNotExecuted, nil, nil
			}
			return latch.OutcomeCommitted, nil, nil
		})}
	})
	ctx, stop := context.WithCancel(context.Background())
	swept := make(chan error, 1)
	go func() {
		swept <- f.guard.SweepEvery(ctx, 20*time.Millisecond, &latch.SweepConfig{HookTimeout: time.Second, Backoff: 100 * time.Millisecond})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-swept; err != nil {
			t.Errorf("SweepEvery = %v", err)
		}
	})

	t.Run("not executed: the task runs again once", func(t *testing.T) {
		t.Parallel()
		f.remote.Fail("inv_7", remotetest.HangUp)
		info := f.settle(t, f.enqueue(t, "charge:invoice", charge{InvoiceID: "inv_7", Amount: 700}))
		if info.State != asynq.TaskStateCompleted || info.Retried == 0 {
			t.Fatalf("task = %s after %d retries (%s), want completed after a retry", info.State, info.Retried, info.LastErr)
		}
		if !strings.Contains(info.LastErr, "its reconcile hook may settle it") {
			t.Errorf("last error = %q, want the wait for the hook", info.LastErr)
		}
		if n := f.remote.Acts("inv_7"); n != 1 {
			t.Errorf("remote acted %d times for inv_7, want 1", n)
		}
		e, err := f.guard.Store().Effect(t.Context(), "charge:inv_7")
		if err != nil || e.State != latch.StateCommitted || e.Attempt != 2 {
			t.Errorf("effect charge:inv_7 = %+v, %v, want committed at attempt 2", e, err)
		}
	})

	t.Run("committed: the task completes without running again", func(t *testing.T) {
		t.Parallel()
		f.remote.Fail("inv_8", remotetest.DropReply)
		info := f.settle(t, f.enqueue(t, "charge:invoice", charge{InvoiceID: "inv_8", Amount: 800}))
		if info.State != asynq.TaskStateCompleted {
			t.Fatalf("task = %s (%s), want completed", info.State, info.LastErr)
		}
		if n := f.remote.Acts("inv_8"); n != 1 {
			t.Errorf("remote acted %d times for inv_8, want 1", n)
		}
		e, err := f.guard.Store().Effect(t.Context(), "charge:inv_8")
		if err != nil || e.State != latch.StateCommitted || e.Attempt != 1 || e.ResolvedBy != "reconcile:billing.charge" {
			t.Errorf("effect charge:inv_8 = %+v, %v, want committed at attempt 1 by reconcile:billing.charge", e, err)
		}
	})

	t.Run("unknown: retried until MaxRetry, then archived", func(t *testing.T) {
		t.Parallel()
		f.remote.Fail("inv_9", remotetest.HangUp)
		info := f.settle(t, f.enqueue(t, "charge:invoice", charge{InvoiceID: "inv_9", Amount: 900}))
		if info.State != asynq.TaskStateArchived || info.Retried != 3 || !strings.Contains(info.LastErr, "latch resolve charge:inv_9") {
			t.Fatalf("task = %s after %d retries (%q), want archived after MaxRetry 3, naming the effect", info.State, info.Retried, info.LastErr)
		}
		if s := f.state(t, "charge:inv_9"); s != latch.StateAmbiguous {
			t.Errorf("effect charge:inv_9 = %s, want still ambiguous", s)
		}
		if n := f.remote.Acts("inv_9"); n != 0 {
			t.Errorf("remote acted %d times for inv_9, want 0", n)
		}
	})
}

// TestTaskError pins what asynq and a caller see in the error of a stopped task.
func TestTaskError(t *testing.T) {
	t.Parallel()
	err := error(&latchasynq.TaskError{TaskID: "t1", Type: "charge:invoice", Key: "charge:inv_9", Reason: "outcome_unknown",
		Err: &latch.AmbiguousError{Key: "charge:inv_9", Err: context.DeadlineExceeded}})
	for _, target := range []error{asynq.SkipRetry, latch.ErrAmbiguous, context.DeadlineExceeded} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(%v, %v) = false, want true", err, target)
		}
	}
	if !strings.Contains(err.Error(), `effect "charge:inv_9" is ambiguous`) {
		t.Errorf("Error() = %q, want it to name the effect", err)
	}
}

// TestTaskErrorWaiting: a task waiting for a reconcile hook is retried by asynq.
func TestTaskErrorWaiting(t *testing.T) {
	t.Parallel()
	err := error(&latchasynq.TaskError{TaskID: "t1", Type: "charge:invoice", Key: "charge:inv_9", Reason: "outcome_unknown", Waiting: true,
		Err: &latch.AmbiguousError{Key: "charge:inv_9", Err: context.DeadlineExceeded}})
	if errors.Is(err, asynq.SkipRetry) || !errors.Is(err, latch.ErrAmbiguous) {
		t.Errorf("waiting TaskError: SkipRetry %t, ErrAmbiguous %t; want false, true", errors.Is(err, asynq.SkipRetry), errors.Is(err, latch.ErrAmbiguous))
	}
	if !strings.Contains(err.Error(), `effect "charge:inv_9" is ambiguous and its reconcile hook may settle it`) {
		t.Errorf("Error() = %q, want it to say the task waits for the hook", err)
	}
}
