// Command example runs a River worker protected by latch on the PostgreSQL database at
// $DATABASE_URL (an optional schema=NAME parameter puts River's tables and latch's in that
// schema). It charges one invoice, enqueues the same charge again, then charges a second invoice
// whose reply is lost and retries that job. It exits 0 only if the processor charged each
// invoice once: the duplicate completed without charging, and the job with the lost reply was
// cancelled, naming its effect, instead of being retried.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go run ./example
package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/latchkit/latch"
	latchriver "github.com/latchkit/latch/integrations/river"
	"github.com/latchkit/latch/policy"
	_ "github.com/latchkit/latch/store/postgres" // latch.Open opens postgres:// stores once this is linked in
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
)

//go:embed latch.yaml
var policyFile []byte

// ChargeArgs is the job: its JSON fields are the action's arguments.
type ChargeArgs struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
}

// Kind names the job for River.
func (ChargeArgs) Kind() string { return "charge_invoice" }

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

// ChargeWorker is an ordinary River worker; latchriver.Wrap protects it.
type ChargeWorker struct {
	river.WorkerDefaults[ChargeArgs]
	proc *processor
}

// Work charges the invoice.
func (w *ChargeWorker) Work(ctx context.Context, job *river.Job[ChargeArgs]) error {
	return w.proc.Charge(ctx, job.Args.InvoiceID)
}

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	dbURL, schema, err := database(os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	pol, err := policy.Parse("latch.yaml", policyFile)
	if err != nil {
		return err
	}
	storeURL := dbURL
	if schema != "" {
		storeURL = withSchema(dbURL, schema)
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: storeURL})
	if err != nil {
		return err
	}
	defer g.Close()

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}

	proc := &processor{charges: map[string]int{}, loseNext: map[string]bool{"inv_2": true}}
	workers := river.NewWorkers()
	// The lines latch adds: the worker, wrapped as the policy's billing.charge action.
	river.AddWorker(workers, latchriver.Wrap(g, "billing.charge", river.Worker[ChargeArgs](&ChargeWorker{proc: proc}),
		&latchriver.Config{Principal: latch.Principal{Agent: "billing-worker"}}))
	if err := g.Check(); err != nil {
		return err // the policy and the job's fields agree, or nothing starts
	}

	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            schema,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers:           workers,
		FetchPollInterval: 100 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer client.Stop(context.Background())

	work := func(what string, id int64) (*rivertype.JobRow, error) {
		row, err := settle(ctx, client, id)
		if err != nil {
			return nil, err
		}
		fmt.Printf("%-32s job %d %s\n", what+":", id, row.State)
		if row.State == rivertype.JobStateCancelled {
			fmt.Printf("  %s\n", row.Errors[len(row.Errors)-1].Error)
		}
		return row, nil
	}
	insert := func(args ChargeArgs) (int64, error) {
		res, err := client.Insert(ctx, args, nil)
		if err != nil {
			return 0, err
		}
		return res.Job.ID, nil
	}

	id1, err := insert(ChargeArgs{InvoiceID: "inv_1", Amount: 24900})
	if err != nil {
		return err
	}
	if _, err := work("charge inv_1", id1); err != nil {
		return err
	}
	id2, err := insert(ChargeArgs{InvoiceID: "inv_1", Amount: 24900})
	if err != nil {
		return err
	}
	if _, err := work("charge inv_1 again", id2); err != nil {
		return err
	}
	id3, err := insert(ChargeArgs{InvoiceID: "inv_2", Amount: 1200})
	if err != nil {
		return err
	}
	if _, err := work("charge inv_2 (reply lost)", id3); err != nil {
		return err
	}
	if _, err := client.JobRetry(ctx, id3); err != nil {
		return err
	}
	last, err := work("retry of that job", id3)
	if err != nil {
		return err
	}

	proc.mu.Lock()
	c1, c2 := proc.charges["inv_1"], proc.charges["inv_2"]
	proc.mu.Unlock()
	fmt.Printf("processor charges: inv_1=%d inv_2=%d\n", c1, c2)
	if c1 != 1 || c2 != 1 || last.State != rivertype.JobStateCancelled {
		return fmt.Errorf("want one charge per invoice and the retried job cancelled")
	}
	fmt.Println("next: latch resolve charge:inv_2 --committed (or --failed), then retry the job")
	return nil
}

// settle waits until the job is completed, cancelled or discarded.
func settle(ctx context.Context, client *river.Client[pgx.Tx], id int64) (*rivertype.JobRow, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		row, err := client.JobGet(ctx, id)
		if err != nil {
			return nil, err
		}
		switch row.State {
		case rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
			return row, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("job %d still %s after 30s", id, row.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// database splits an optional schema=NAME parameter off the URL: pgx would send it to the
// server as a setting, while River and latch take the schema as their own option.
func database(raw string) (dbURL, schema string, err error) {
	if raw == "" {
		return "", "", errors.New("DATABASE_URL is unset: set it to a PostgreSQL URL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("DATABASE_URL: %w", err)
	}
	q := u.Query()
	schema = q.Get("schema")
	q.Del("schema")
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

func withSchema(dbURL, schema string) string {
	u, _ := url.Parse(dbURL) // parsed once already
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
