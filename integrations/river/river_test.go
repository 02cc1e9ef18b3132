package latchriver_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/latchkit/latch"
	latchriver "github.com/latchkit/latch/integrations/river"
	"github.com/latchkit/latch/internal/remotetest"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
)

const testPolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
`

type ChargeArgs struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
}

func (ChargeArgs) Kind() string { return "charge_invoice" }

type RefundArgs struct {
	InvoiceID string `json:"invoice_id"`
}

func (RefundArgs) Kind() string { return "refund_invoice" }

// chargeWorker charges through the remote: a refusal before acting is NotExecuted, anything
// else that is not an answer is unknown.
type chargeWorker struct {
	river.WorkerDefaults[ChargeArgs]
	remote *remotetest.Server
	mu     sync.Mutex
	holds  map[string]chan struct{} // invoice → closed when its job may go on
}

// hold makes the next job for invoice wait, holding its effect key, until release is closed.
func (w *chargeWorker) hold(invoice string, release chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holds[invoice] = release
}

func (w *chargeWorker) Work(ctx context.Context, job *river.Job[ChargeArgs]) error {
	w.mu.Lock()
	release := w.holds[job.Args.InvoiceID]
	delete(w.holds, job.Args.InvoiceID)
	w.mu.Unlock()
	if release != nil {
		select {
		case <-release:
		case <-ctx.Done():
			return latch.NotExecuted(ctx.Err())
		}
	}
	_, err := w.remote.Act(ctx, job.Args.InvoiceID)
	if errors.Is(err, remotetest.ErrRefused) {
		return latch.NotExecuted(err)
	}
	return err
}

// NextRetry retries soon, so the test does not wait for River's default backoff.
func (w *chargeWorker) NextRetry(*river.Job[ChargeArgs]) time.Time {
	return time.Now().Add(50 * time.Millisecond)
}

type refundWorker struct {
	river.WorkerDefaults[RefundArgs]
	remote *remotetest.Server
}

func (w *refundWorker) Work(ctx context.Context, job *river.Job[RefundArgs]) error {
	_, err := w.remote.Act(ctx, "refund:"+job.Args.InvoiceID)
	return err
}

type fixture struct {
	guard  *latch.Guard
	client *river.Client[pgx5Tx]
	remote *remotetest.Server
	worker *chargeWorker
}

type pgx5Tx = pgx.Tx

// setup opens a guard and a River client on one fresh schema of the test Postgres: the River
// tables beside latch's, as a deployment that shares one database would have them.
func setup(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, func(*remotetest.Server) *latchriver.Config {
		return &latchriver.Config{Principal: latch.Principal{Agent: "billing-worker"}, InProgressSnooze: 100 * time.Millisecond}
	})
}

// setupWith is setup with the configuration config returns for the remote the workers use.
func setupWith(t *testing.T, config func(*remotetest.Server) *latchriver.Config) *fixture {
	t.Helper()
	return setupPolicy(t, testPolicy, config)
}

// setupPolicy is setupWith under the policy doc.
func setupPolicy(t *testing.T, doc string, config func(*remotetest.Server) *latchriver.Config) *fixture {
	t.Helper()
	storeURL := testdb.PostgresURL(t, "latchriver")
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("schema")
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: storeURL}) // creates the schema
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })

	q := u.Query()
	q.Del("schema")
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatalf("migrate River: %v", err)
	}

	remote := remotetest.New(t)
	cfg := config(remote)
	worker := &chargeWorker{remote: remote, holds: map[string]chan struct{}{}}
	workers := river.NewWorkers()
	river.AddWorker(workers, latchriver.Wrap(g, "billing.charge", river.Worker[ChargeArgs](worker), cfg))
	// billing.refund is not in the policy: every refund is denied.
	river.AddWorker(workers, latchriver.Wrap(g, "billing.refund", river.Worker[RefundArgs](&refundWorker{remote: remote}), cfg))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            schema,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		TestOnly:          true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.Stop(ctx); err != nil {
			t.Errorf("stop River: %v", err)
		}
	})
	return &fixture{guard: g, client: client, remote: remote, worker: worker}
}

// settle waits until job id is completed, cancelled or discarded.
func (f *fixture) settle(t *testing.T, id int64) *rivertype.JobRow {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		row, err := f.client.JobGet(t.Context(), id)
		if err != nil {
			t.Fatalf("JobGet(%d): %v", id, err)
		}
		switch row.State {
		case rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d still %s after 30s", id, row.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// until waits until job id satisfies ok.
func (f *fixture) until(t *testing.T, id int64, what string, ok func(*rivertype.JobRow) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		row, err := f.client.JobGet(t.Context(), id)
		if err != nil {
			t.Fatalf("JobGet(%d): %v", id, err)
		}
		if ok(row) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d not %s after 30s: %s, metadata %s", id, what, row.State, row.Metadata)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) insert(t *testing.T, args river.JobArgs) int64 {
	t.Helper()
	res, err := f.client.Insert(t.Context(), args, nil)
	if err != nil {
		t.Fatalf("Insert(%v): %v", args, err)
	}
	return res.Job.ID
}

func (f *fixture) retry(t *testing.T, id int64) {
	t.Helper()
	if _, err := f.client.JobRetry(t.Context(), id); err != nil {
		t.Fatalf("JobRetry(%d): %v", id, err)
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

func lastError(row *rivertype.JobRow) string {
	if len(row.Errors) == 0 {
		return ""
	}
	return row.Errors[len(row.Errors)-1].Error
}

func TestRiver(t *testing.T) {
	t.Parallel()
	f := setup(t)

	t.Run("redelivery after commit does not run again", func(t *testing.T) {
		t.Parallel()
		first := f.settle(t, f.insert(t, ChargeArgs{InvoiceID: "inv_1", Amount: 100}))
		if first.State != rivertype.JobStateCompleted {
			t.Fatalf("first job = %s (%s), want completed", first.State, lastError(first))
		}
		// The same charge enqueued again (a redelivered event), and the completed job retried.
		dup := f.settle(t, f.insert(t, ChargeArgs{InvoiceID: "inv_1", Amount: 100}))
		f.retry(t, first.ID)
		again := f.settle(t, first.ID)
		for _, row := range []*rivertype.JobRow{dup, again} {
			if row.State != rivertype.JobStateCompleted {
				t.Errorf("duplicate job %d = %s (%s), want completed without running", row.ID, row.State, lastError(row))
			}
		}
		if n := f.remote.Acts("inv_1"); n != 1 {
			t.Errorf("remote acted %d times for inv_1, want 1", n)
		}
	})

	t.Run("lost reply is ambiguous and the retried job does not run", func(t *testing.T) {
		t.Parallel()
		f.remote.Fail("inv_2", remotetest.DropReply)
		id := f.insert(t, ChargeArgs{InvoiceID: "inv_2", Amount: 200})
		row := f.settle(t, id)
		if row.State != rivertype.JobStateCancelled {
			t.Fatalf("job after a lost reply = %s, want cancelled", row.State)
		}
		if msg := lastError(row); !strings.Contains(msg, `effect "charge:inv_2" is ambiguous`) {
			t.Errorf("job error = %q, want it to name the ambiguous effect charge:inv_2", msg)
		}
		if s := f.state(t, "charge:inv_2"); s != latch.StateAmbiguous {
			t.Errorf("effect charge:inv_2 = %s, want ambiguous", s)
		}
		// Someone retries the cancelled job: latch refuses before the worker runs.
		f.retry(t, id)
		row = f.settle(t, id)
		if row.State != rivertype.JobStateCancelled || !strings.Contains(lastError(row), "latch resolve charge:inv_2") {
			t.Errorf("retried job = %s (%q), want cancelled again, naming the effect", row.State, lastError(row))
		}
		if n := f.remote.Acts("inv_2"); n != 1 {
			t.Fatalf("remote acted %d times for inv_2, want 1 (the retry must not run)", n)
		}
		// A person finds the charge did not happen: the next retry runs.
		if _, err := f.guard.Resolve(t.Context(), "charge:inv_2", latch.StateFailed, "cli:test"); err != nil {
			t.Fatal(err)
		}
		f.retry(t, id)
		if row = f.settle(t, id); row.State != rivertype.JobStateCompleted {
			t.Errorf("job retried after resolve --failed = %s (%s), want completed", row.State, lastError(row))
		}
		if n := f.remote.Acts("inv_2"); n != 2 {
			t.Errorf("remote acted %d times for inv_2, want 2 (once lost, once after resolve)", n)
		}
	})

	t.Run("NotExecuted is retried by River and runs once", func(t *testing.T) {
		t.Parallel()
		f.remote.Fail("inv_3", remotetest.Refuse)
		row := f.settle(t, f.insert(t, ChargeArgs{InvoiceID: "inv_3", Amount: 300}))
		if row.State != rivertype.JobStateCompleted || row.Attempt != 2 {
			t.Fatalf("job = %s at attempt %d (%s), want completed at attempt 2", row.State, row.Attempt, lastError(row))
		}
		if msg := row.Errors[0].Error; !strings.Contains(msg, "not executed") {
			t.Errorf("first attempt's error = %q, want the NotExecuted error", msg)
		}
		if n := f.remote.Acts("inv_3"); n != 1 {
			t.Errorf("remote acted %d times for inv_3, want 1", n)
		}
		if s := f.state(t, "charge:inv_3"); s != latch.StateCommitted {
			t.Errorf("effect charge:inv_3 = %s, want committed", s)
		}
	})

	t.Run("a job meeting a live attempt is snoozed, then completes as a duplicate", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		f.worker.hold("inv_5", release)
		first := f.insert(t, ChargeArgs{InvoiceID: "inv_5", Amount: 500})
		f.until(t, first, "running", func(row *rivertype.JobRow) bool { return row.State == rivertype.JobStateRunning })
		// The same charge while the first attempt holds the key: snoozed, not run, not failed.
		second := f.insert(t, ChargeArgs{InvoiceID: "inv_5", Amount: 500})
		f.until(t, second, "snoozed", func(row *rivertype.JobRow) bool { return strings.Contains(string(row.Metadata), `"snoozes"`) })
		if n := f.remote.Acts("inv_5"); n != 0 {
			t.Fatalf("remote acted %d times for inv_5 while the first attempt held the key, want 0", n)
		}
		close(release)
		for _, id := range []int64{first, second} {
			if row := f.settle(t, id); row.State != rivertype.JobStateCompleted || len(row.Errors) != 0 {
				t.Errorf("job %d = %s with errors %v, want completed without a failure", id, row.State, row.Errors)
			}
		}
		if n := f.remote.Acts("inv_5"); n != 1 {
			t.Errorf("remote acted %d times for inv_5, want 1", n)
		}
	})

	t.Run("denied job is cancelled without running", func(t *testing.T) {
		t.Parallel()
		row := f.settle(t, f.insert(t, RefundArgs{InvoiceID: "inv_4"}))
		if row.State != rivertype.JobStateCancelled || row.Attempt != 1 || !strings.Contains(lastError(row), "denied") {
			t.Errorf("refund job = %s at attempt %d (%q), want cancelled at attempt 1, denied", row.State, row.Attempt, lastError(row))
		}
		if n := f.remote.Acts("refund:inv_4"); n != 0 {
			t.Errorf("remote acted %d times for the refund, want 0", n)
		}
	})
}

// TestRiverReconcile: with a reconcile hook that asks the remote what it did, and the guard's
// sweeper running, a job whose effect went ambiguous is not cancelled: it is snoozed, the
// sweeper resolves the effect, and the job runs again once ("not executed") or completes
// without running ("committed") — no person retries or resolves anything. A hook that never
// knows keeps the job snoozed until ReconcileFor, then it is cancelled for a person.
func TestRiverReconcile(t *testing.T) {
	t.Parallel()
	var asked sync.Map // invoice → the number of times the hook was asked
	f := setupWith(t, func(remote *remotetest.Server) *latchriver.Config {
		hook := latch.Reconciler(func(_ context.Context, _ *latch.Attempt, args ChargeArgs) (latch.Outcome, any, error) {
			n, _ := asked.LoadOrStore(args.InvoiceID, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			switch {
			case args.InvoiceID == "inv_9":
				return latch.OutcomeUnknown, nil, errors.New("the provider's ledger is down")
			case remote.Acts(args.InvoiceID) == 0:
				return latch.OutcomeNotExecuted, nil, nil
			}
			return latch.OutcomeCommitted, map[string]string{"charge": "done:" + args.InvoiceID}, nil
		})
		return &latchriver.Config{Principal: latch.Principal{Agent: "billing-worker"}, InProgressSnooze: 100 * time.Millisecond,
			Options: &latch.Options{Reconcile: hook}, ReconcileSnooze: 2 * time.Second, ReconcileFor: 5 * time.Second}
	})
	ctx, stop := context.WithCancel(context.Background())
	swept := make(chan error, 1)
	go func() {
		swept <- f.guard.SweepEvery(ctx, 50*time.Millisecond, &latch.SweepConfig{HookTimeout: time.Second, Backoff: 200 * time.Millisecond})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-swept; err != nil {
			t.Errorf("SweepEvery = %v", err)
		}
	})
	resolvedBySweeper := func(t *testing.T, key string) {
		t.Helper()
		evs, err := f.guard.Store().Events(t.Context(), store.EventFilter{EffectKey: key})
		if err != nil {
			t.Fatal(err)
		}
		asked, resolved := false, false
		for _, e := range evs {
			asked = asked || e.Kind == store.EventReconcileStarted && strings.Contains(string(e.Payload), `"trigger":"sweep"`)
			resolved = resolved || e.Kind == store.EventEffectResolved && strings.Contains(string(e.Payload), `"by":"reconcile:billing.charge"`)
		}
		if !asked || !resolved {
			t.Errorf("events of %s: asked by the sweeper %t, resolved by reconcile:billing.charge %t; want both", key, asked, resolved)
		}
	}

	t.Run("not executed: the job runs again once", func(t *testing.T) {
		t.Parallel()
		f.remote.Fail("inv_7", remotetest.HangUp) // nothing done, but the worker cannot tell
		row := f.settle(t, f.insert(t, ChargeArgs{InvoiceID: "inv_7", Amount: 700}))
		if row.State != rivertype.JobStateCompleted {
			t.Fatalf("job = %s (%s), want completed after the hook proved the first try did nothing", row.State, lastError(row))
		}
		if !strings.Contains(string(row.Metadata), `"snoozes"`) {
			t.Errorf("job metadata %s, want it snoozed while the effect was ambiguous", row.Metadata)
		}
		if n := f.remote.Acts("inv_7"); n != 1 {
			t.Errorf("remote acted %d times for inv_7, want 1", n)
		}
		e, err := f.guard.Store().Effect(t.Context(), "charge:inv_7")
		if err != nil || e.State != latch.StateCommitted || e.Attempt != 2 {
			t.Errorf("effect charge:inv_7 = %+v, %v, want committed at attempt 2", e, err)
		}
		resolvedBySweeper(t, "charge:inv_7")
	})

	t.Run("committed: the job completes without running again", func(t *testing.T) {
		t.Parallel()
		f.remote.Fail("inv_8", remotetest.DropReply) // done, the reply lost
		row := f.settle(t, f.insert(t, ChargeArgs{InvoiceID: "inv_8", Amount: 800}))
		if row.State != rivertype.JobStateCompleted {
			t.Fatalf("job = %s (%s), want completed as a duplicate of what the hook found", row.State, lastError(row))
		}
		if n := f.remote.Acts("inv_8"); n != 1 {
			t.Errorf("remote acted %d times for inv_8, want 1", n)
		}
		e, err := f.guard.Store().Effect(t.Context(), "charge:inv_8")
		if err != nil || e.State != latch.StateCommitted || e.Attempt != 1 || string(e.Result) != `{"charge":"done:inv_8"}` {
			t.Errorf("effect charge:inv_8 = %+v, %v, want committed at attempt 1 with the hook's result", e, err)
		}
		resolvedBySweeper(t, "charge:inv_8")
	})

	t.Run("unknown: snoozed, then cancelled after ReconcileFor", func(t *testing.T) {
		t.Parallel()
		f.remote.Fail("inv_9", remotetest.HangUp)
		start := time.Now()
		row := f.settle(t, f.insert(t, ChargeArgs{InvoiceID: "inv_9", Amount: 900}))
		if row.State != rivertype.JobStateCancelled || !strings.Contains(lastError(row), `effect "charge:inv_9" is ambiguous`) {
			t.Fatalf("job = %s (%s), want cancelled naming the ambiguous effect", row.State, lastError(row))
		}
		if waited := time.Since(start); waited < 5*time.Second {
			t.Errorf("cancelled after %v, want it to wait ReconcileFor (5s) for the hook", waited)
		}
		if !strings.Contains(string(row.Metadata), `"snoozes"`) {
			t.Errorf("job metadata %s, want it snoozed first", row.Metadata)
		}
		n, _ := asked.Load("inv_9")
		// The sweeper asks after 200ms, 400ms, 800ms, 1.6s, 3.2s (its backoff), the job's own runs
		// each time it comes back: a handful, never a loop.
		if got := n.(*atomic.Int32).Load(); got < 2 || got > 20 {
			t.Errorf("hook asked %d times about inv_9 in about 5s, want a few (a backoff, not a loop)", got)
		}
		if s := f.state(t, "charge:inv_9"); s != latch.StateAmbiguous {
			t.Errorf("effect charge:inv_9 = %s, want still ambiguous", s)
		}
		if n := f.remote.Acts("inv_9"); n != 0 {
			t.Errorf("remote acted %d times for inv_9, want 0", n)
		}
	})
}
