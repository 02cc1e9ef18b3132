package latchasynq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/latchkit/latch"
	latchasynq "github.com/latchkit/latch/integrations/asynq"
	"github.com/latchkit/latch/latchtest"
)

// TestConformance runs latch's adapter conformance kit against the middleware on the test
// Redis: each call is a task of the action's type with no retries (the kit's next step is its
// retry), and its outcome is what the handler chain returned to asynq — nil, a *TaskError, or
// latch's error passed through for asynq to retry.
func TestConformance(t *testing.T) {
	t.Parallel()
	redis := asynq.RedisClientOpt{Addr: redisAddr(t)}
	latchtest.Run(t, latchtest.Harness{Start: func(t testing.TB, g *latch.Guard, h latchtest.Handler) latchtest.Invoke {
		var b [6]byte
		_, _ = rand.Read(b[:])
		queue := "latch_kit_" + hex.EncodeToString(b[:])
		var mu sync.Mutex
		done := map[string]chan error{}
		wait := func(id string) chan error {
			mu.Lock()
			defer mu.Unlock()
			if done[id] == nil {
				done[id] = make(chan error, 1)
			}
			return done[id]
		}
		mux := asynq.NewServeMux()
		mux.Use(func(next asynq.Handler) asynq.Handler { // what asynq is handed, per task
			return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
				err := next.ProcessTask(ctx, task)
				id, _ := asynq.GetTaskID(ctx)
				wait(id) <- err
				return err
			})
		}, latchasynq.Middleware(g, &latchasynq.Config{Principal: latchtest.Principal()}))
		mux.HandleFunc("kit.", func(ctx context.Context, task *asynq.Task) error {
			var a latchtest.Args
			if err := json.Unmarshal(task.Payload(), &a); err != nil {
				return latch.NotExecuted(err)
			}
			a.Action = task.Type()
			_, err := h(ctx, a)
			return err
		})
		srv := asynq.NewServer(redis, asynq.Config{
			Concurrency: 2, Queues: map[string]int{queue: 1}, TaskCheckInterval: 20 * time.Millisecond,
			LogLevel: asynq.FatalLevel, ShutdownTimeout: 5 * time.Second,
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
		return func(ctx context.Context, a latchtest.Args) latchtest.Outcome {
			info, err := client.Enqueue(asynq.NewTask(a.Action, a.Arguments()), asynq.Queue(queue), asynq.MaxRetry(0), asynq.Retention(time.Hour))
			if err != nil {
				return latchtest.Outcome{Err: err}
			}
			select {
			case err = <-wait(info.ID):
			case <-time.After(30 * time.Second):
				return latchtest.Outcome{Err: errors.New("the task was not handled within 30s")}
			}
			var te *latchasynq.TaskError
			switch {
			case err == nil:
				return latchtest.Outcome{}
			case errors.As(err, &te):
				return latchtest.Outcome{Refusal: &latch.Refusal{Kind: latch.Reason(te.Reason).Kind(), Reason: latch.Reason(te.Reason),
					EffectKey: te.Key, ApprovalID: te.ApprovalID}}
			}
			return latchtest.Outcome{Err: err}
		}
	}})
}
