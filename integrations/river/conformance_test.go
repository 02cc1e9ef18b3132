package latchriver_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/latchkit/latch"
	latchriver "github.com/latchkit/latch/integrations/river"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/latchtest"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// kitArgs are the arguments of the conformance kit's jobs; one job kind per action of its
// table.
type kitArgs struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Mode   string `json:"mode"`
}

type (
	KitCharge   struct{ kitArgs }
	KitRefund   struct{ kitArgs }
	KitOnce     struct{ kitArgs }
	KitBlocked  struct{ kitArgs }
	KitUnlisted struct{ kitArgs }
)

func (KitCharge) Kind() string   { return "kit.charge" }
func (KitRefund) Kind() string   { return "kit.refund" }
func (KitOnce) Kind() string     { return "kit.once" }
func (KitBlocked) Kind() string  { return "kit.blocked" }
func (KitUnlisted) Kind() string { return "kit.unlisted" }

type kitJob interface {
	river.JobArgs
	args() kitArgs
}

func (a kitArgs) args() kitArgs { return a }

// kitWorker does the kit's work for one job kind.
type kitWorker[T kitJob] struct {
	river.WorkerDefaults[T]
	h latchtest.Handler
}

func (w *kitWorker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	a := job.Args.args()
	_, err := w.h(ctx, latchtest.Args{Action: job.Kind, ID: a.ID, Amount: a.Amount, Mode: a.Mode})
	return err
}

// captured is the protected worker as River runs it, recording what it returned to River.
type captured[T kitJob] struct {
	river.Worker[T]
	record func(id int64, err error)
}

func (c *captured[T]) Work(ctx context.Context, job *river.Job[T]) error {
	err := c.Worker.Work(ctx, job)
	c.record(job.ID, err)
	return err
}

func addKit[T kitJob](workers *river.Workers, g *latch.Guard, h latchtest.Handler, record func(int64, error)) {
	var zero T
	w := latchriver.Wrap(g, zero.Kind(), river.Worker[T](&kitWorker[T]{h: h}), &latchriver.Config{Principal: latchtest.Principal()})
	river.AddWorker(workers, river.Worker[T](&captured[T]{Worker: w, record: record}))
}

// TestConformance runs latch's adapter conformance kit against Wrap on the test Postgres: each
// call is a job of the action's kind with one attempt (the kit's next step is its retry), and
// its outcome is what the worker returned to River — nil, a *JobError (cancelled, or waiting for
// approval), or latch's error passed through for River to retry.
func TestConformance(t *testing.T) {
	t.Parallel()
	storeURL := testdb.PostgresURL(t, "latchriverkit")
	latchtest.Run(t, latchtest.Harness{StoreURL: storeURL, Start: func(t testing.TB, g *latch.Guard, h latchtest.Handler) latchtest.Invoke {
		ctx := context.Background()
		u, err := url.Parse(storeURL)
		if err != nil {
			t.Fatal(err)
		}
		schema := u.Query().Get("schema")
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
		var mu sync.Mutex
		done := map[int64]chan error{}
		wait := func(id int64) chan error {
			mu.Lock()
			defer mu.Unlock()
			if done[id] == nil {
				done[id] = make(chan error, 1)
			}
			return done[id]
		}
		record := func(id int64, err error) { wait(id) <- err }
		workers := river.NewWorkers()
		addKit[KitCharge](workers, g, h, record)
		addKit[KitRefund](workers, g, h, record)
		addKit[KitOnce](workers, g, h, record)
		addKit[KitBlocked](workers, g, h, record)
		addKit[KitUnlisted](workers, g, h, record)
		client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
			Schema: schema, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}}, Workers: workers,
			FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler), TestOnly: true,
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
			_ = client.Stop(ctx)
		})
		return func(ctx context.Context, a latchtest.Args) latchtest.Outcome {
			args := kitArgs{ID: a.ID, Amount: a.Amount, Mode: a.Mode}
			var job river.JobArgs
			switch a.Action {
			case "kit.charge":
				job = KitCharge{args}
			case "kit.refund":
				job = KitRefund{args}
			case "kit.once":
				job = KitOnce{args}
			case "kit.blocked":
				job = KitBlocked{args}
			default:
				job = KitUnlisted{args}
			}
			res, err := client.Insert(ctx, job, &river.InsertOpts{MaxAttempts: 1})
			if err != nil {
				return latchtest.Outcome{Err: err}
			}
			select {
			case err = <-wait(res.Job.ID):
			case <-time.After(30 * time.Second):
				return latchtest.Outcome{Err: errors.New("the job was not worked within 30s")}
			}
			var je *latchriver.JobError
			switch {
			case err == nil:
				return latchtest.Outcome{}
			case errors.As(err, &je):
				return latchtest.Outcome{Refusal: &latch.Refusal{Kind: latch.Reason(je.Reason).Kind(), Reason: latch.Reason(je.Reason),
					EffectKey: je.Key, ApprovalID: je.ApprovalID}}
			}
			return latchtest.Outcome{Err: err}
		}
	}})
}
