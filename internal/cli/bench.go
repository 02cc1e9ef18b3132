package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/sqlite"
)

// benchPolicy is the policy every bench call is decided by: one allowed action with an effect
// key, so that each call costs what a protected write costs (reserve, execute, record).
const benchPolicy = `schema: latch.policy/v1
actions:
  bench.charge:
    effect: "charge:{invoice_id}"
    decision: allow
`

// benchAction is the action of every bench call.
const benchAction = "bench.charge"

// benchOptions are the flags of `latch bench`.
type benchOptions struct {
	store     string // "" = a scratch SQLite file
	workers   int
	duration  time.Duration
	asJSON    bool
	raceKeys  int
	processes int
	attempts  int
	receipts  int
	child     string // the spec of a race child (hidden)
}

func (a *app) benchCommand() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench [flags]",
		Short: "Measure protected calls per second against the bare database",
		Long: `Measure what latch costs: protected calls with distinct effect keys run through the
real pipeline (an allowed action, a trivial executor, receipts on) for --duration with
--workers goroutines, and then, in the same run, a raw baseline on the same kind of store:
the bare durable transactions a call needs (one insert, one update and one receipt-sized
insert, in two commits) with no latch logic, through the same driver and settings. It
prints calls/s, p50 and p99 latency and allocations per call for both, and the ratio.

--store defaults to a scratch SQLite file in a temporary directory, removed afterwards;
never to $LATCH_STORE or the store beside the policy. 'sqlite:?synchronous=normal' (a
sqlite: URL with no path) is a scratch file with synchronous=NORMAL. A store you name
gets real (bench.charge) receipts: name a scratch one. The baseline always runs in its
own scratch file (beside the store) or schema (postgres), and is removed afterwards.

--race-keys K --processes P races P OS processes (this binary, re-executed) over K shared
keys: each process attempts every key once (or --attempts in all, spread over the keys),
with --workers goroutines each. It reports the executions counted across processes, which
must be exactly K, and the wall time. Exit 1 if they are not. The racers share the CPUs:
each runs with GOMAXPROCS = CPUs / P (at least 1) unless $GOMAXPROCS is set, as P worker
processes on one host should.

--receipts N appends receipts of committed calls to the store until its chain holds N
(so a store can be grown from 10k to 100k to 1M), then verifies the whole chain as
'latch receipts --verify' does and reports receipts/s and the heap it used.`,
		Example: "  latch bench --workers 8 --duration 10s\n" +
			"  latch bench --store 'sqlite:?synchronous=normal' --json\n" +
			"  latch bench --race-keys 1000 --processes 8 --workers 8\n" +
			"  latch bench --store sqlite:/tmp/chain.db --receipts 1000000",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f := a.flags.Lookup("store"); f != nil && f.Changed {
				if strings.TrimSpace(a.storeFlag) == "" {
					return usagef("--store is empty")
				}
				o.store = a.storeFlag
			}
			switch {
			case o.child != "":
				return a.benchChild(o.child)
			case o.workers < 1:
				return usagef("--workers %d: want at least 1", o.workers)
			case o.receipts < 0:
				return usagef("--receipts %d: want a positive number", o.receipts)
			case o.receipts > 0:
				if o.raceKeys > 0 || o.processes > 0 {
					return usagef("--receipts and --race-keys are different benchmarks: give one")
				}
				return a.benchReceipts(o)
			case o.raceKeys > 0 || o.processes > 0:
				if o.raceKeys < 1 || o.processes < 1 {
					return usagef("--race-keys and --processes go together, each at least 1")
				}
				if o.attempts == 0 {
					o.attempts = o.raceKeys * o.processes
				}
				if o.attempts < o.raceKeys {
					return usagef("--attempts %d is fewer than --race-keys %d", o.attempts, o.raceKeys)
				}
				return a.benchRace(o)
			case o.duration <= 0:
				return usagef("--duration %v: want a positive duration", o.duration)
			}
			return a.benchCalls(o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.workers, "workers", 1, "concurrent callers (per process with --processes)")
	f.DurationVar(&o.duration, "duration", 5*time.Second, "how long each of latch and the baseline runs")
	f.BoolVar(&o.asJSON, "json", false, "print one JSON object")
	f.IntVar(&o.raceKeys, "race-keys", 0, "race mode: the number of shared effect keys")
	f.IntVar(&o.processes, "processes", 0, "race mode: the number of OS processes")
	f.IntVar(&o.attempts, "attempts", 0, "race mode: attempts in all (default race-keys × processes)")
	f.IntVar(&o.receipts, "receipts", 0, "chain mode: grow the chain to `N` receipts and time its verification")
	f.StringVar(&o.child, "race-child", "", "internal: run as one racer of a race")
	_ = f.MarkHidden("race-child")
	return cmd
}

// scratchStore returns the store URL a run uses and a function that removes what the run made:
// the given store is kept; a scratch store (none given, or 'sqlite:?…' with no path) is
// created in a temporary directory and removed.
func scratchStore(given string) (string, func(), error) {
	rest, isSQLite := strings.CutPrefix(given, "sqlite:")
	if given != "" && !(isSQLite && (rest == "" || strings.HasPrefix(rest, "?"))) {
		return given, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "latch-bench-")
	if err != nil {
		return "", nil, err
	}
	return "sqlite:" + filepath.Join(dir, "latch.db") + rest, func() { os.RemoveAll(dir) }, nil
}

// openBenchGuard opens a guard deciding by benchPolicy on storeURL.
func openBenchGuard(ctx context.Context, storeURL string) (*latch.Guard, error) {
	p, err := policy.Parse("bench.yaml", []byte(benchPolicy))
	if err != nil {
		return nil, err
	}
	return latch.Open(ctx, &latch.Config{Policy: p, StoreURL: storeURL})
}

// benchArgs appends the arguments of call n of a run: a typical five-field object whose
// invoice_id, and so whose effect key, no other call of any run shares.
func benchArgs(b []byte, run string, n int) []byte {
	b = append(b, `{"invoice_id":"`...)
	b = append(b, run...)
	b = append(b, '_')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, `","amount":24900,"currency":"EUR","customer":"cus_1","capture":true}`...)
}

// benchPrincipal attributes bench calls.
var benchPrincipal = latch.Principal{Agent: "latch-bench"}

// phase is the measurement of one side (latch or the baseline).
type phase struct {
	Calls         int64   `json:"calls"`
	Seconds       float64 `json:"seconds"`
	CallsPerSec   float64 `json:"calls_per_s"`
	P50Micros     float64 `json:"p50_us"`
	P99Micros     float64 `json:"p99_us"`
	AllocsPerCall float64 `json:"allocs_per_call"`
	// CommitsPerCall is write transactions committed per call: 2 without group commit.
	CommitsPerCall float64 `json:"commits_per_call,omitempty"`
}

// measure runs call from workers goroutines for d and times every call. call(w, n) makes the
// n-th call of worker w.
func measure(ctx context.Context, workers int, d time.Duration, call func(w, n int) error) (phase, error) {
	lat := make([][]time.Duration, workers)
	errs := make([]error, workers)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := 0; ; n++ {
				t0 := time.Now()
				if !t0.Before(deadline) || ctx.Err() != nil {
					return
				}
				if err := call(w, n); err != nil {
					errs[w] = err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err := errors.Join(errs...); err != nil {
		return phase{}, err
	}
	if err := ctx.Err(); err != nil {
		return phase{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	p := phase{Calls: int64(len(all)), Seconds: elapsed.Seconds()}
	if p.Calls == 0 {
		return p, errors.New("no call finished in the duration")
	}
	p.CallsPerSec = float64(p.Calls) / p.Seconds
	p.P50Micros = micros(all[len(all)/2])
	p.P99Micros = micros(all[min(len(all)-1, len(all)*99/100)])
	p.AllocsPerCall = float64(after.Mallocs-before.Mallocs) / float64(p.Calls)
	return p, nil
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// benchReport is the result of `latch bench` (without --race-keys).
type benchReport struct {
	Store    string  `json:"store"`
	Workers  int     `json:"workers"`
	Duration string  `json:"duration"`
	Latch    phase   `json:"latch"`
	Baseline phase   `json:"baseline"`
	Ratio    float64 `json:"ratio"` // latch calls/s ÷ baseline calls/s
}

func (a *app) benchCalls(o benchOptions) error {
	storeURL, cleanup, err := scratchStore(o.store)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer cleanup()
	rep := benchReport{Store: redact(storeURL), Workers: o.workers, Duration: o.duration.String()}

	g, err := openBenchGuard(a.ctx, storeURL)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	rep.Latch, err = benchLatch(a.ctx, g, o)
	docSize := lastReceiptSize(a.ctx, g.Store())
	if cerr := g.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("bench latch: %w", err)
	}

	base, err := openBaseline(a.ctx, storeURL)
	if err != nil {
		return fmt.Errorf("bench baseline: %w", err)
	}
	rep.Baseline, err = benchBaseline(a.ctx, base, o, docSize)
	if cerr := base.close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("bench baseline: %w", err)
	}
	rep.Ratio = rep.Latch.CallsPerSec / rep.Baseline.CallsPerSec
	if o.asJSON {
		return jsonLine(a.stdout, rep)
	}
	fmt.Fprintf(a.stdout, "store     %s\nworkers   %d\nduration  %s each\n\n", rep.Store, rep.Workers, rep.Duration)
	t := newTable(a.stdout, "", "CALLS", "CALLS/S", "P50", "P99", "ALLOCS/CALL", "COMMITS/CALL")
	for _, r := range []struct {
		name string
		p    phase
	}{{"latch", rep.Latch}, {"baseline", rep.Baseline}} {
		t.row(r.name, strconv.FormatInt(r.p.Calls, 10), fmt.Sprintf("%.0f", r.p.CallsPerSec), fmtMicros(r.p.P50Micros),
			fmtMicros(r.p.P99Micros), fmt.Sprintf("%.0f", r.p.AllocsPerCall), fmt.Sprintf("%.2f", r.p.CommitsPerCall))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nlatch/baseline  %.2f\n", rep.Ratio)
	return nil
}

func fmtMicros(us float64) string {
	if us >= 10000 {
		return fmt.Sprintf("%.1fms", us/1000)
	}
	return fmt.Sprintf("%.0fµs", us)
}

// benchLatch runs protected calls through g.
func benchLatch(ctx context.Context, g *latch.Guard, o benchOptions) (phase, error) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	pctx := latch.WithPrincipal(ctx, benchPrincipal)
	fn := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	bufs := make([][]byte, o.workers)
	call := func(w, n int) error {
		bufs[w] = benchArgs(bufs[w][:0], run, n*o.workers+w)
		_, err := g.Execute(pctx, &latch.Call{Action: benchAction, Arguments: bufs[w]}, fn)
		return err
	}
	// A short warm-up: the store's statements are prepared and its pages cached before the clock runs.
	for n := range 20 {
		bufs[0] = benchArgs(bufs[0][:0], run+"w", n)
		if _, err := g.Execute(pctx, &latch.Call{Action: benchAction, Arguments: bufs[0]}, fn); err != nil {
			return phase{}, err
		}
	}
	wc, _ := g.Store().(store.WriteCounter)
	var writes int64
	if wc != nil {
		writes = wc.WriteTransactions()
	}
	p, err := measure(ctx, o.workers, o.duration, call)
	if err != nil {
		return phase{}, err
	}
	if wc != nil {
		p.CommitsPerCall = float64(wc.WriteTransactions()-writes) / float64(p.Calls)
	}
	return p, nil
}

// lastReceiptSize is the size of the newest receipt, so that the baseline writes rows of the
// same size; 1 KiB if it cannot be read.
func lastReceiptSize(ctx context.Context, st store.Store) int {
	for r, err := range st.Receipts(ctx, store.ReceiptFilter{Last: 1}) {
		if err == nil && len(r.Doc) > 0 {
			return len(r.Doc)
		}
	}
	return 1024
}

// baseline is a bare database of the store's kind: the transactions of a call, without latch.
type baseline interface {
	// call writes one call's transactions: insert key; then update key and insert doc.
	call(ctx context.Context, key, doc string) error
	close() error
}

func benchBaseline(ctx context.Context, b baseline, o benchOptions, docSize int) (phase, error) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	doc := strings.Repeat("x", docSize)
	for n := range 20 {
		if err := b.call(ctx, run+"w"+strconv.Itoa(n), doc); err != nil {
			return phase{}, err
		}
	}
	p, err := measure(ctx, o.workers, o.duration, func(w, n int) error {
		return b.call(ctx, run+"_"+strconv.Itoa(n*o.workers+w), doc)
	})
	if err == nil {
		p.CommitsPerCall = 2
	}
	return p, err
}

// openBaseline opens a scratch database beside the store storeURL names: a file in a fresh
// directory next to a SQLite store (same disk), or a fresh schema in a Postgres database.
func openBaseline(ctx context.Context, storeURL string) (baseline, error) {
	switch {
	case strings.HasPrefix(storeURL, "sqlite:"):
		return openSQLiteBaseline(ctx, storeURL)
	case strings.HasPrefix(storeURL, "postgres://"), strings.HasPrefix(storeURL, "postgresql://"):
		return openPostgresBaseline(ctx, storeURL)
	}
	return nil, fmt.Errorf("unsupported store URL %q", storeURL)
}

type sqliteBaseline struct {
	db       *sql.DB
	dir      string
	ins, upd *sql.Stmt
	rec      *sql.Stmt
}

func openSQLiteBaseline(ctx context.Context, storeURL string) (*sqliteBaseline, error) {
	path, query, _ := strings.Cut(strings.TrimPrefix(storeURL, "sqlite:"), "?")
	dir, err := os.MkdirTemp(filepath.Dir(path), ".latch-bench-baseline-")
	if err != nil {
		return nil, err
	}
	u := "sqlite:" + filepath.Join(dir, "baseline.db")
	if query != "" {
		u += "?" + query
	}
	b := &sqliteBaseline{dir: dir}
	if b.db, err = sqlite.OpenDB(u); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for _, q := range []string{
		`CREATE TABLE effects (effect_key TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at INTEGER NOT NULL) STRICT`,
		`CREATE TABLE receipts (seq INTEGER PRIMARY KEY, doc TEXT NOT NULL) STRICT`,
	} {
		if _, err := b.db.ExecContext(ctx, q); err != nil {
			b.close()
			return nil, err
		}
	}
	for q, st := range map[string]**sql.Stmt{
		`INSERT INTO effects (effect_key, state, updated_at) VALUES (?, 'executing', ?)`: &b.ins,
		`UPDATE effects SET state = 'committed', updated_at = ? WHERE effect_key = ?`:    &b.upd,
		`INSERT INTO receipts (doc) VALUES (?)`:                                          &b.rec,
	} {
		if *st, err = b.db.PrepareContext(ctx, q); err != nil {
			b.close()
			return nil, err
		}
	}
	return b, nil
}

func (b *sqliteBaseline) call(ctx context.Context, key, doc string) error {
	// Statements run without the caller's cancellation, as latch's writes do: the driver
	// watches a cancellable context with a goroutine per statement.
	ctx = context.WithoutCancel(ctx)
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, b.ins).ExecContext(ctx, key, time.Now().UnixNano()); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if tx, err = b.db.BeginTx(ctx, nil); err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, b.upd).ExecContext(ctx, time.Now().UnixNano(), key); err != nil {
		tx.Rollback()
		return err
	}
	if _, err := tx.StmtContext(ctx, b.rec).ExecContext(ctx, doc); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (b *sqliteBaseline) close() error {
	var err error
	if b.db != nil {
		err = b.db.Close()
	}
	return errors.Join(err, os.RemoveAll(b.dir))
}

type postgresBaseline struct {
	pool   *pgxpool.Pool
	schema string
}

// openPostgresBaseline creates a scratch schema in the database storeURL names. The URL's
// schema= parameter (latch's own) is dropped: the baseline never touches latch's schema.
func openPostgresBaseline(ctx context.Context, storeURL string) (*postgresBaseline, error) {
	u, err := url.Parse(storeURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Del("schema")
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return nil, err
	}
	b := &postgresBaseline{pool: pool, schema: "latch_bench_" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	s := pgx.Identifier{b.schema}.Sanitize()
	for _, q := range []string{
		`CREATE SCHEMA ` + s,
		`CREATE TABLE ` + s + `.effects (effect_key text PRIMARY KEY, state text NOT NULL, updated_at bigint NOT NULL)`,
		`CREATE TABLE ` + s + `.receipts (seq bigserial PRIMARY KEY, doc text NOT NULL)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.close()
			return nil, err
		}
	}
	return b, nil
}

func (b *postgresBaseline) call(ctx context.Context, key, doc string) error {
	s := pgx.Identifier{b.schema}.Sanitize()
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+s+`.effects (effect_key, state, updated_at) VALUES ($1, 'executing', $2)`, key, time.Now().UnixNano())
		return err
	})
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE `+s+`.effects SET state = 'committed', updated_at = $1 WHERE effect_key = $2`, time.Now().UnixNano(), key); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+s+`.receipts (doc) VALUES ($1)`, doc)
		return err
	})
}

func (b *postgresBaseline) close() error {
	_, err := b.pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{b.schema}.Sanitize()+` CASCADE`)
	b.pool.Close()
	return err
}

// raceSpec is what one racer process is told (as the JSON of --race-child).
type raceSpec struct {
	Store    string `json:"store"`
	Dir      string `json:"dir"` // shared: ready-N, go, result-N
	Name     string `json:"name"`
	Run      string `json:"run"` // names the keys: every racer of a race shares them
	Keys     int    `json:"keys"`
	Attempts int    `json:"attempts"` // this racer's
	Workers  int    `json:"workers"`
}

// raceResult is what one racer reports.
type raceResult struct {
	Executions int64  `json:"executions"`
	Refused    int64  `json:"refused"`
	FinishedAt int64  `json:"finished_at"` // unix nanoseconds
	Error      string `json:"error,omitempty"`
}

// raceReport is the result of `latch bench --race-keys K --processes P`.
type raceReport struct {
	Store      string  `json:"store"`
	Processes  int     `json:"processes"`
	Workers    int     `json:"workers"`
	Keys       int     `json:"keys"`
	Attempts   int     `json:"attempts"`
	Executions int64   `json:"executions"`
	Refused    int64   `json:"refused"`
	Committed  int     `json:"committed"` // committed effect records in the store afterwards
	Seconds    float64 `json:"seconds"`
	PerSec     float64 `json:"attempts_per_s"`
	GOMAXPROCS string  `json:"gomaxprocs"` // of each racer
	OK         bool    `json:"ok"`
}

func (a *app) benchRace(o benchOptions) error {
	storeURL, cleanup, err := scratchStore(o.store)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer cleanup()
	dir, err := os.MkdirTemp("", "latch-race-")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	// The store is created and migrated once, before the race, so racers race calls, not migrations.
	g, err := openBenchGuard(a.ctx, storeURL)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := g.Close(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	// P processes on C CPUs: each racer schedules its goroutines on its share of them, rather
	// than every racer spinning up C threads that fight over the same cores.
	procs := a.getenv("GOMAXPROCS")
	if procs == "" {
		procs = strconv.Itoa(max(1, runtime.NumCPU()/o.processes))
	}
	env := append(os.Environ(), "GOMAXPROCS="+procs)
	type exit struct {
		name string
		err  error
		out  string
	}
	exits := make(chan exit, o.processes)
	for i := range o.processes {
		attempts := o.attempts / o.processes
		if i < o.attempts%o.processes {
			attempts++
		}
		spec, err := json.Marshal(raceSpec{Store: storeURL, Dir: dir, Name: strconv.Itoa(i), Run: run, Keys: o.raceKeys, Attempts: attempts, Workers: o.workers})
		if err != nil {
			return err
		}
		// argv[0] is kept as this process was started: a binary that dispatches on its name
		// (as test binaries do) runs latch again.
		cmd := exec.CommandContext(ctx, exe, "bench", "--race-child", string(spec))
		cmd.Args[0] = os.Args[0]
		cmd.Env = env
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("bench: start racer %d: %w", i, err)
		}
		go func() {
			err := cmd.Wait()
			exits <- exit{strconv.Itoa(i), err, out.String()}
		}()
	}
	// Every racer opens the guard first: they race calls, not process start-up.
	for ready := 0; ready < o.processes; {
		select {
		case e := <-exits:
			cancel()
			return fmt.Errorf("bench: racer %s exited before the start: %v: %s", e.name, e.err, oneLine(e.out))
		case <-time.After(time.Millisecond):
		}
		if ready, err = countFiles(dir, "ready-"); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	start := time.Now()
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	var errs []error
	for range o.processes {
		if e := <-exits; e.err != nil {
			errs = append(errs, fmt.Errorf("racer %s: %v: %s", e.name, e.err, oneLine(e.out)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	rep := raceReport{Store: redact(storeURL), Processes: o.processes, Workers: o.workers, Keys: o.raceKeys, Attempts: o.attempts, GOMAXPROCS: procs}
	var last int64
	for i := range o.processes {
		raw, err := os.ReadFile(filepath.Join(dir, "result-"+strconv.Itoa(i)))
		if err != nil {
			return fmt.Errorf("bench: racer %d: %w", i, err)
		}
		var r raceResult
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("bench: racer %d: %w", i, err)
		}
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("racer %d: %s", i, r.Error))
		}
		rep.Executions += r.Executions
		rep.Refused += r.Refused
		last = max(last, r.FinishedAt)
	}
	rep.Seconds = time.Unix(0, last).Sub(start).Seconds()
	rep.PerSec = float64(rep.Attempts) / rep.Seconds
	if rep.Committed, err = committedEffects(a.ctx, storeURL, run); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	rep.OK = len(errs) == 0 && rep.Executions == int64(rep.Keys) && rep.Committed == rep.Keys
	if o.asJSON {
		if err := jsonLine(a.stdout, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "store       %s\nprocesses   %d × %d %s (GOMAXPROCS=%s)\nkeys        %d\nattempts    %d\n",
			rep.Store, rep.Processes, rep.Workers, plural(rep.Workers, "worker", "workers"), rep.GOMAXPROCS, rep.Keys, rep.Attempts)
		fmt.Fprintf(a.stdout, "executions  %d %s\nrefused     %d\ncommitted   %d effect records\nwall time   %.3fs (%.0f attempts/s)\n",
			rep.Executions, a.mark(rep.Executions == int64(rep.Keys)), rep.Refused, rep.Committed, rep.Seconds, rep.PerSec)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if !rep.OK {
		return fmt.Errorf("bench: %d executions and %d committed effects over %d keys: want exactly %d", rep.Executions, rep.Committed, rep.Keys, rep.Keys)
	}
	return nil
}

// committedEffects counts the committed effect records of one race's keys.
func committedEffects(ctx context.Context, storeURL, run string) (int, error) {
	st, err := latch.OpenStore(ctx, storeURL, &latch.StoreOptions{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	effects, err := st.Effects(ctx, store.EffectFilter{State: store.Committed})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range effects {
		if strings.HasPrefix(e.Key, "charge:"+run+"_") {
			n++
		}
	}
	return n, nil
}

func countFiles(dir, prefix string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			n++
		}
	}
	return n, nil
}

// benchChild is one racer: it opens a guard, says it is ready, waits for the start, makes its
// attempts with its workers, counts what its executors ran and reports.
func (a *app) benchChild(raw string) error {
	var spec raceSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return usagef("--race-child: %v", err)
	}
	report := func(r raceResult) error {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(spec.Dir, "result-"+spec.Name), b, 0o600)
	}
	g, err := openBenchGuard(a.ctx, spec.Store)
	if err != nil {
		return err
	}
	defer g.Close()
	if err := os.WriteFile(filepath.Join(spec.Dir, "ready-"+spec.Name), nil, 0o600); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(spec.Dir, "go")); err == nil {
			break
		}
		select {
		case <-a.ctx.Done():
			return a.ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
	}
	var executions, refused atomic.Int64
	var next atomic.Int64
	pctx := latch.WithPrincipal(a.ctx, benchPrincipal)
	fn := func(context.Context, json.RawMessage) (any, error) {
		executions.Add(1)
		return nil, nil
	}
	errs := make([]error, spec.Workers)
	var wg sync.WaitGroup
	for w := range spec.Workers {
		wg.Go(func() {
			var buf []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= spec.Attempts {
					return
				}
				// Every racer walks the keys in the same order, so they meet on each key.
				buf = benchArgs(buf[:0], spec.Run, i%spec.Keys)
				_, err := g.Execute(pctx, &latch.Call{Action: benchAction, Arguments: buf}, fn)
				switch {
				case err == nil:
				case errors.Is(err, latch.ErrDuplicateEffect):
					refused.Add(1)
				default:
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	r := raceResult{Executions: executions.Load(), Refused: refused.Load(), FinishedAt: time.Now().UnixNano()}
	if err := errors.Join(errs...); err != nil {
		r.Error = oneLine(err.Error())
	}
	return report(r)
}

// chainReport is the result of `latch bench --receipts N`.
type chainReport struct {
	Store         string  `json:"store"`
	Receipts      int64   `json:"receipts"`
	Appended      int64   `json:"appended"`
	AppendSeconds float64 `json:"append_seconds"`
	VerifySeconds float64 `json:"verify_seconds"`
	PerSec        float64 `json:"receipts_per_s"`
	PeakHeapMiB   float64 `json:"peak_heap_mib"` // the most heap in use while verifying
	OK            bool    `json:"ok"`
}

// fillWorkers is how many appends are in flight while a chain is grown: enough for group commit
// to write them in large batches.
const fillWorkers = 64

func (a *app) benchReceipts(o benchOptions) error {
	storeURL, cleanup, err := scratchStore(o.store)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer cleanup()
	st, err := latch.OpenStore(a.ctx, storeURL, nil)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer st.Close()
	rep := chainReport{Store: redact(storeURL)}
	head, err := st.Head(a.ctx)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if missing := int64(o.receipts) - head.Seq; missing > 0 {
		start := time.Now()
		if err := appendReceipts(a.ctx, st, missing); err != nil {
			return fmt.Errorf("bench: append receipts: %w", err)
		}
		rep.Appended, rep.AppendSeconds = missing, time.Since(start).Seconds()
	}

	// The heap is sampled while the walk runs: a chain must be verified in constant memory.
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	if head, err = st.Head(a.ctx); err == nil {
		var vr receipt.Report
		vr, err = receipt.Verify(st.Receipts(a.ctx, store.ReceiptFilter{}), head)
		rep.Receipts, rep.OK = vr.Verified, vr.OK
	}
	rep.VerifySeconds = time.Since(start).Seconds()
	close(stop)
	<-sampled
	if err != nil {
		return fmt.Errorf("bench: verify: %w", err)
	}
	rep.PerSec = float64(rep.Receipts) / rep.VerifySeconds
	rep.PeakHeapMiB = float64(peak.Load()) / (1 << 20)
	if o.asJSON {
		if err := jsonLine(a.stdout, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "store       %s\n", rep.Store)
		if rep.Appended > 0 {
			fmt.Fprintf(a.stdout, "appended    %d receipts in %.1fs\n", rep.Appended, rep.AppendSeconds)
		}
		fmt.Fprintf(a.stdout, "verified    %d receipts %s in %.3fs (%.0f receipts/s)\npeak heap   %.1f MiB\n",
			rep.Receipts, a.mark(rep.OK), rep.VerifySeconds, rep.PerSec, rep.PeakHeapMiB)
	}
	if !rep.OK {
		return errors.New("bench: the chain does not verify: run latch receipts --verify")
	}
	return nil
}

// appendReceipts appends n receipts of committed calls, each in its own Record, from
// fillWorkers goroutines.
func appendReceipts(ctx context.Context, st store.Store, n int64) error {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var next atomic.Int64
	errs := make([]error, fillWorkers)
	var wg sync.WaitGroup
	for w := range fillWorkers {
		wg.Go(func() {
			var args []byte
			for {
				i := next.Add(1)
				if i > n || ctx.Err() != nil {
					return
				}
				id := fmt.Sprintf("%s%026d", run, i)
				args = benchArgs(args[:0], run, int(i))
				now := time.Now()
				rc := &receipt.Receipt{
					ReceiptID: "rcp_" + id[len(id)-32:], ActionID: "act_" + id[len(id)-32:], Action: benchAction,
					ActionHash: "sha256:" + strings.Repeat("ab", 32), Arguments: slices.Clone(args),
					Principal: receipt.Principal{Agent: benchPrincipal.Agent}, Environment: "production",
					Decision: "allow", DecisionReason: "decision", EffectKey: "charge:" + run + "_" + strconv.FormatInt(i, 10),
					Attempt: 1, IdempotencyToken: "00000000-0000-8000-8000-000000000000", Result: receipt.Committed,
					StartedAt: now, FinishedAt: now, PolicyHash: "sha256:" + strings.Repeat("cd", 32), Mode: "enforce",
				}
				if _, err := st.Record(ctx, &store.RecordRequest{Now: now, Receipt: rc}); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}
