// Command example runs an asynq server whose charge handler is protected by latch, on the Redis
// at $REDIS_ADDR (host:port), with latch's store in a SQLite file in a temporary directory. It
// charges one invoice, enqueues the same charge again, then charges a second invoice whose reply
// is lost and runs that archived task again. It exits 0 only if the processor charged each
// invoice once: the duplicate completed without charging, and the task with the lost reply was
// archived, naming its effect, instead of being retried.
//
//	REDIS_ADDR=127.0.0.1:6379 go run ./example
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/latchkit/latch"
	latchasynq "github.com/latchkit/latch/integrations/asynq"
	"github.com/latchkit/latch/policy"
)

//go:embed latch.yaml
var policyFile []byte

const queue = "latch_example"

// Charge is the task's payload: its JSON fields are the action's arguments.
type Charge struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
}

// processor stands in for a payment processor: it counts charges, and can lose a reply.
type processor struct {
	mu       sync.Mutex
	charges  map[string]int
	loseNext map[string]bool
}

func (p *processor) Charge(_ context.Context, invoice string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.charges[invoice]++
	if p.loseNext[invoice] {
		delete(p.loseNext, invoice)
		return errors.New("read tcp: connection reset by peer") // charged, but the reply never came
	}
	return nil
}

func (p *processor) count(invoice string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.charges[invoice]
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		return errors.New("REDIS_ADDR is unset: set it to a Redis host:port")
	}
	dir, err := os.MkdirTemp("", "latch-asynq-example-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pol, err := policy.Parse("latch.yaml", policyFile)
	if err != nil {
		return err
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(dir, "state.db")})
	if err != nil {
		return err
	}
	defer g.Close()

	proc := &processor{charges: map[string]int{}, loseNext: map[string]bool{"inv_2": true}}
	charge := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		var c Charge
		if err := json.Unmarshal(t.Payload(), &c); err != nil {
			return latch.NotExecuted(err) // nothing was charged
		}
		return proc.Charge(ctx, c.InvoiceID)
	})
	mux := asynq.NewServeMux()
	// The line latch adds: the handler, protected as the policy's billing.charge action.
	mux.Handle("charge:invoice", latchasynq.Handler(g, "billing.charge", charge,
		&latchasynq.Config{Principal: latch.Principal{Agent: "billing-worker"}}))

	redis := asynq.RedisClientOpt{Addr: addr}
	srv := asynq.NewServer(redis, asynq.Config{
		Queues:            map[string]int{queue: 1},
		TaskCheckInterval: 50 * time.Millisecond,
		LogLevel:          asynq.FatalLevel,
	})
	if err := srv.Start(mux); err != nil {
		return err
	}
	defer srv.Shutdown()
	client := asynq.NewClient(redis)
	defer client.Close()
	inspector := asynq.NewInspector(redis)
	defer inspector.Close()
	defer inspector.DeleteQueue(queue, true)

	enqueue := func(c Charge) (string, error) {
		payload, err := json.Marshal(c)
		if err != nil {
			return "", err
		}
		info, err := client.Enqueue(asynq.NewTask("charge:invoice", payload), asynq.Queue(queue), asynq.Retention(time.Hour))
		if err != nil {
			return "", err
		}
		return info.ID, nil
	}
	work := func(what, id string) (*asynq.TaskInfo, error) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			info, err := inspector.GetTaskInfo(queue, id)
			if err != nil {
				return nil, err
			}
			if info.State == asynq.TaskStateCompleted || info.State == asynq.TaskStateArchived {
				fmt.Printf("%-32s %s\n", what+":", info.State)
				if info.State == asynq.TaskStateArchived {
					fmt.Printf("  %s\n", info.LastErr)
				}
				return info, nil
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("task %s still %s after 30s", id, info.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	for _, step := range []struct {
		what string
		c    Charge
	}{
		{"charge inv_1", Charge{InvoiceID: "inv_1", Amount: 24900}},
		{"charge inv_1 again", Charge{InvoiceID: "inv_1", Amount: 24900}},
	} {
		id, err := enqueue(step.c)
		if err != nil {
			return err
		}
		if _, err := work(step.what, id); err != nil {
			return err
		}
	}
	id, err := enqueue(Charge{InvoiceID: "inv_2", Amount: 1200})
	if err != nil {
		return err
	}
	if _, err := work("charge inv_2 (reply lost)", id); err != nil {
		return err
	}
	if err := inspector.RunTask(queue, id); err != nil {
		return err
	}
	last, err := work("that task run again", id)
	if err != nil {
		return err
	}

	c1, c2 := proc.count("inv_1"), proc.count("inv_2")
	fmt.Printf("processor charges: inv_1=%d inv_2=%d\n", c1, c2)
	if c1 != 1 || c2 != 1 || last.State != asynq.TaskStateArchived {
		return errors.New("want one charge per invoice and the task run again archived")
	}
	fmt.Println("next: latch resolve charge:inv_2 --committed (or --failed), then run the task again")
	return nil
}
