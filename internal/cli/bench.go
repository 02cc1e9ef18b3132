package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/internal/bench"
)

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
	withState bool
	child     string // the spec of a race child (hidden)
	gateway   bool   // measure tool calls through the MCP gateway against direct ones
	serve     bool   // measure calls over HTTP through latch serve against in-process ones
	serveSpec string // the spec of the server process (hidden)
	tokenTTL  time.Duration
	pin       bool          // with serve: the server and the in-process phase on one CPU, the clients on the others
	serveProf string        // with serve: the server's CPU profile, written to this file
	reference string        // a command whose printed calls/s latch is compared with
	runs      int           // with reference: the runs of each, interleaved
	refLimit  time.Duration // with reference: the most one of its runs may take
	prefill   int64         // grow the store to this many receipts by its bulk path, then measure there
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
must be exactly K, the wall time, and the p50, p99 and maximum latency of the attempts;
on Postgres also how many deadlocks the server detected in the store's database meanwhile
(pg_stat_database counts for the whole database: race on a database of its own for an
exact figure). Exit 1 if the counts are not exact. The racers share the CPUs: each runs
with GOMAXPROCS = CPUs / P (at least 1) unless $GOMAXPROCS is set, as P worker processes
on one host should.

--gateway measures MCP tool calls (go-sdk clients, one session per worker, over
streamable HTTP on loopback) directly to an upstream whose tools do no work, then through
the MCP gateway with an effect key per call, then a read-only tool with no key through the
gateway; it prints calls/s, p50 and p99 of each and the gateway/direct ratio.

--serve runs --workers goroutines calling the pipeline in process for --duration, then
--workers HTTP clients each doing POST /v1/actions and POST /v1/actions/{id}/outcome
against a latch serve process (this binary, re-executed) on loopback, on the same store,
then --workers HTTP clients making each call on one request (POST /v1/calls: the action
and its outcome on one open request); it prints calls/s, p50 and p99 of the three, the
ratios, and the server's RSS and CPU per call,
with the CPU a call costs in process and the clients' own, and the CPU ratio (in-process CPU
a call ÷ the server's: the ratio where the CPU bounds both sides and the clients have CPUs of
their own). --pin (Linux, 2 CPUs or more) runs the in-process phase and the server on the
last CPU alone and the clients on the others, so that the server's own ratio is measured
with the clients on their own CPU budget. --serve-cpuprofile FILE writes the server
process's CPU profile (go tool pprof) to FILE.

--receipts N appends receipts of committed calls to the store until its chain holds N
(so a store can be grown from 10k to 100k to 1M), then verifies the whole chain, first the
hash chain alone, then as 'latch receipts --verify' does (the chain, and the state it implies
compared with the stored effects, approvals and delegations), and reports receipts/s and the
heap each used. With --with-state the chain is grown through the real pipeline with state
changes of every common kind (commits, duplicates refused, NotExecuted and renewals,
ambiguous outcomes resolved by a person, approvals requested, granted and spent), so every
receipt has the effect or approval row it speaks of.

--reference CMD compares latch with another tool on this machine in one run: CMD (run with
sh -c) is any benchmark that prints its rate — a line with "N calls/s" (or "N ops/s", "N/s";
the last one counts), or a number alone on its last line. --runs N (default 3) runs it and
latch's calls benchmark alternately, reference first, each bounded by --reference-timeout, and
prints every run, the medians and latch/reference. Give CMD the same workers and durability
as latch's run for a fair figure (--workers, and a --store with synchronous=normal if the
reference commits that way).

--prefill N grows the store to N receipts through its bulk path — many calls to a transaction,
written by the store's own write methods, so the store holds what real calls leave: mostly
committed calls under new effect keys, and denials, duplicates refused, approvals granted and
spent, failures (retried or left failed) and ambiguous outcomes (resolved by a person, or left
for one), spread over the last 30 days — then measures there, against an empty store of the same kind in the same run: calls/s
and CPU a call at 1 worker and at --workers (default 8 here), each --runs times (default 3) for
--duration, alternately on a fresh empty store and on the filled one, with the ratio of the
medians; 'latch receipts --verify' over the whole chain (receipts/s); and the latency (p50, p99)
of the operator's reads, made in process through the operator layer the surfaces call: latch
stats (all receipts, and --since 1h), the console's attention page, and GET
/v1/effects?state=ambiguous and ?state=failed. A store that holds N receipts already is measured
as it is, so one store can be grown from 1M to 5M. Name a store of its own (it is kept): a
sqlite: URL with no path is a scratch file, removed afterwards.`,
		Example: "  latch bench --workers 8 --duration 10s\n" +
			"  latch bench --store 'sqlite:?synchronous=normal' --json\n" +
			"  latch bench --race-keys 1000 --processes 8 --workers 8\n" +
			"  latch bench --store sqlite:/tmp/chain.db --receipts 1000000\n" +
			"  latch bench --store sqlite:/tmp/evidence.db --receipts 1000000 --with-state\n" +
			"  latch bench --reference './other-tool bench --workers 1' --runs 5\n" +
			"  latch bench --store 'sqlite:/tmp/big.db?synchronous=normal' --prefill 1000000",
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
				return bench.RunRacer(a.ctx, o.child)
			case o.serveSpec != "":
				return bench.RunServer(a.ctx, o.serveSpec)
			case o.workers < 1:
				return usagef("--workers %d: want at least 1", o.workers)
			case o.receipts < 0:
				return usagef("--receipts %d: want a positive number", o.receipts)
			case o.withState && o.receipts == 0:
				return usagef("--with-state grows a chain: give it with --receipts N")
			case cmd.Flags().Changed("prefill"):
				if o.prefill < 1 {
					return usagef("--prefill %d: want a number of receipts, at least 1", o.prefill)
				}
				if o.gateway || o.serve || o.raceKeys > 0 || o.processes > 0 || o.receipts > 0 || o.reference != "" {
					return usagef("--prefill is a benchmark of its own: give it without --gateway, --serve, --race-keys, --receipts or --reference")
				}
				if o.runs < 1 || o.duration <= 0 {
					return usagef("--runs %d, --duration %v: want each above 0", o.runs, o.duration)
				}
				if !cmd.Flags().Changed("workers") {
					o.workers = 8
				}
				return a.benchPrefill(o)
			case o.reference != "":
				if o.gateway || o.serve || o.raceKeys > 0 || o.processes > 0 || o.receipts > 0 || o.pin || o.serveProf != "" {
					return usagef("--reference compares the calls benchmark: give it without --gateway, --serve, --pin, --race-keys or --receipts")
				}
				if o.runs < 1 || o.duration <= 0 || o.refLimit <= 0 {
					return usagef("--runs %d, --duration %v, --reference-timeout %v: want each above 0", o.runs, o.duration, o.refLimit)
				}
				return a.benchReference(o)
			case o.serve:
				if o.gateway || o.raceKeys > 0 || o.processes > 0 || o.receipts > 0 {
					return usagef("--serve is a benchmark of its own: give it without --gateway, --race-keys or --receipts")
				}
				if o.duration <= 0 {
					return usagef("--duration %v: want a positive duration", o.duration)
				}
				if o.tokenTTL < 0 {
					return usagef("--token-cache %v: want a duration, or 0", o.tokenTTL)
				}
				return a.benchServe(o)
			case o.pin || o.serveProf != "":
				return usagef("--pin and --serve-cpuprofile go with --serve")
			case o.gateway:
				if o.raceKeys > 0 || o.processes > 0 || o.receipts > 0 {
					return usagef("--gateway is a benchmark of its own: give it without --race-keys or --receipts")
				}
				if o.duration <= 0 {
					return usagef("--duration %v: want a positive duration", o.duration)
				}
				return a.benchGateway(o)
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
	f.BoolVar(&o.withState, "with-state", false, "chain mode: grow the chain through the pipeline, with effects, approvals and resolutions")
	f.BoolVar(&o.gateway, "gateway", false, "gateway mode: MCP tool calls direct to an upstream vs through latch gateway (docs/gateway.md)")
	f.BoolVar(&o.serve, "serve", false, "serve mode: actions + outcomes over HTTP to a latch serve process (two requests a call, then one) vs the same calls in process (docs/performance.md)")
	f.StringVar(&o.reference, "reference", "", "compare mode: a `command` printing its calls/s, run alternately with latch's calls benchmark")
	f.IntVar(&o.runs, "runs", 3, "with --reference or --prefill: runs of each")
	f.Int64Var(&o.prefill, "prefill", 0, "store-size mode: grow the store to `N` receipts by its bulk path, then measure calls and reads there against an empty store")
	f.DurationVar(&o.refLimit, "reference-timeout", 5*time.Minute, "with --reference: the most one run of the command may take")
	f.StringVar(&o.serveSpec, "serve-child", "", "internal: run as the server of --serve")
	f.DurationVar(&o.tokenTTL, "token-cache", 0, "with --serve: the server's --token-cache (default 0: a token read on every request)")
	f.BoolVar(&o.pin, "pin", false, "with --serve: the in-process phase and the server on the last CPU, the clients on the others (Linux)")
	f.StringVar(&o.serveProf, "serve-cpuprofile", "", "with --serve: write the server's CPU profile to `file`")
	_ = f.MarkHidden("serve-child")
	f.StringVar(&o.child, "race-child", "", "internal: run as one racer of a race")
	_ = f.MarkHidden("race-child")
	return cmd
}

func (a *app) benchCalls(o benchOptions) error {
	rep, err := bench.Calls(a.ctx, &bench.CallsConfig{Store: o.store, Workers: o.workers, Duration: o.duration})
	if err != nil {
		return err
	}
	rep.Store = redact(rep.Store)
	if o.asJSON {
		return jsonLine(a.stdout, rep)
	}
	fmt.Fprintf(a.stdout, "store     %s\nworkers   %d\nduration  %s each\n\n", rep.Store, rep.Workers, rep.Duration)
	t := newTable(a.stdout, "", "CALLS", "CALLS/S", "P50", "P99", "ALLOCS/CALL", "COMMITS/CALL", "CPU/CALL")
	for _, r := range []struct {
		name string
		p    bench.Phase
	}{{"latch", rep.Latch}, {"baseline", rep.Baseline}} {
		t.row(r.name, strconv.FormatInt(r.p.Calls, 10), fmt.Sprintf("%.0f", r.p.CallsPerSec), fmtMicros(r.p.P50Micros),
			fmtMicros(r.p.P99Micros), fmt.Sprintf("%.0f", r.p.AllocsPerCall), fmt.Sprintf("%.2f", r.p.CommitsPerCall),
			fmtMicros(r.p.CPUMicrosPerCall))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nlatch/baseline  %.2f\n", rep.Ratio)
	return nil
}

// referenceReport is what `latch bench --reference` prints with --json.
type referenceReport struct {
	Command         string               `json:"command"`
	Store           string               `json:"store"`
	Workers         int                  `json:"workers"`
	Duration        string               `json:"duration"`
	Reference       []bench.ReferenceRun `json:"reference"`
	Latch           []float64            `json:"latch_calls_per_sec"`
	ReferenceMedian float64              `json:"reference_median"`
	LatchMedian     float64              `json:"latch_median"`
	Ratio           float64              `json:"ratio"` // latch median ÷ reference median
}

// benchReference runs the reference command and latch's calls benchmark alternately, the
// reference first, so that a machine growing busier or quieter weighs on both alike.
func (a *app) benchReference(o benchOptions) error {
	rep := referenceReport{Command: o.reference, Workers: o.workers, Duration: o.duration.String()}
	var refs []float64
	for i := range o.runs {
		run, err := bench.RunReference(a.ctx, o.reference, o.refLimit)
		if err != nil {
			return fmt.Errorf("run %d of %d: %w", i+1, o.runs, err)
		}
		rep.Reference = append(rep.Reference, run)
		refs = append(refs, run.CallsPerSec)
		calls, err := bench.Calls(a.ctx, &bench.CallsConfig{Store: o.store, Workers: o.workers, Duration: o.duration})
		if err != nil {
			return fmt.Errorf("run %d of %d: %w", i+1, o.runs, err)
		}
		rep.Store = redact(calls.Store)
		rep.Latch = append(rep.Latch, calls.Latch.CallsPerSec)
	}
	rep.ReferenceMedian, rep.LatchMedian = bench.Median(refs), bench.Median(rep.Latch)
	rep.Ratio = rep.LatchMedian / rep.ReferenceMedian
	if o.asJSON {
		return jsonLine(a.stdout, rep)
	}
	fmt.Fprintf(a.stdout, "reference %s\nstore     %s\nworkers   %d\nduration  %s a latch run\n\n", o.reference, rep.Store, rep.Workers, rep.Duration)
	t := newTable(a.stdout, "RUN", "REFERENCE CALLS/S", "LATCH CALLS/S")
	for i := range rep.Latch {
		t.row(strconv.Itoa(i+1), fmt.Sprintf("%.0f", rep.Reference[i].CallsPerSec), fmt.Sprintf("%.0f", rep.Latch[i]))
	}
	t.row("median", fmt.Sprintf("%.0f", rep.ReferenceMedian), fmt.Sprintf("%.0f", rep.LatchMedian))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nlatch/reference  %.2f\n", rep.Ratio)
	return nil
}

func (a *app) benchServe(o benchOptions) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	rep, err := bench.Serve(a.ctx, &bench.ServeConfig{Store: o.store, Workers: o.workers, Duration: o.duration, TokenCache: o.tokenTTL,
		Pin: o.pin, CPUProfile: o.serveProf,
		Command: func(ctx context.Context, spec string) *exec.Cmd {
			return exec.CommandContext(ctx, exe, "bench", "--serve-child", spec)
		}})
	if err != nil {
		return err
	}
	rep.Store = redact(rep.Store)
	if o.asJSON {
		return jsonLine(a.stdout, rep)
	}
	pinned := ""
	if rep.Pinned {
		pinned = " (pinned: in process and server on one CPU, clients on the others)"
	}
	fmt.Fprintf(a.stdout, "store     %s\nworkers   %d%s\nduration  %s each\n\n", rep.Store, rep.Workers, pinned, rep.Duration)
	t := newTable(a.stdout, "", "CALLS", "CALLS/S", "P50", "P99", "CPU/CALL")
	for _, r := range []struct {
		name string
		p    bench.Phase
	}{{"in process", rep.InProcess}, {"http, 2 requests", rep.HTTP}, {"http, 1 request", rep.OneRequest}} {
		t.row(r.name, strconv.FormatInt(r.p.Calls, 10), fmt.Sprintf("%.0f", r.p.CallsPerSec), fmtMicros(r.p.P50Micros), fmtMicros(r.p.P99Micros),
			fmtMicros(r.p.CPUMicrosPerCall))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\n%-17s%-17s%s\n", "", "2 REQUESTS", "1 REQUEST")
	fmt.Fprintf(a.stdout, "%-17s%-17.2f%.2f\n", "http/in process", rep.Ratio, rep.OneRequestRatio)
	fmt.Fprintf(a.stdout, "%-17s%-17s%s\n", "serve CPU/call", fmtMicros(rep.ServeCPUPerCall), fmtMicros(rep.OneRequestServeCPUPerCall))
	fmt.Fprintf(a.stdout, "%-17s%-17.2f%.2f\n", "CPU ratio", rep.CPURatio, rep.OneRequestCPURatio)
	fmt.Fprintf(a.stdout, "\nserve RSS        %.1f MiB (peak %.1f MiB)\n(the http rows' CPU/CALL is the clients'; CPU ratio is in-process CPU/call ÷ serve CPU/call)\n",
		float64(rep.ServeRSS)/(1<<20), float64(rep.ServePeakRSS)/(1<<20))
	return nil
}

func fmtMicros(us float64) string {
	if us >= 10000 {
		return fmt.Sprintf("%.1fms", us/1000)
	}
	return fmt.Sprintf("%.0fµs", us)
}

func (a *app) benchRace(o benchOptions) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	rep, err := bench.Race(a.ctx, &bench.RaceConfig{
		Store: o.store, Keys: o.raceKeys, Processes: o.processes, Workers: o.workers, Attempts: o.attempts,
		GOMAXPROCS: a.getenv("GOMAXPROCS"),
		Command: func(ctx context.Context, spec string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, exe, "bench", "--race-child", spec)
			// argv[0] is kept as this process was started: a binary that dispatches on its name
			// (as test binaries do) runs latch again.
			cmd.Args[0] = os.Args[0]
			return cmd
		},
	})
	if rep == nil {
		return err
	}
	rep.Store = redact(rep.Store)
	if o.asJSON {
		if jerr := jsonLine(a.stdout, rep); jerr != nil {
			return jerr
		}
		return err
	}
	fmt.Fprintf(a.stdout, "store       %s\nprocesses   %d × %d %s (GOMAXPROCS=%s)\nkeys        %d\nattempts    %d\n",
		rep.Store, rep.Processes, rep.Workers, plural(rep.Workers, "worker", "workers"), rep.GOMAXPROCS, rep.Keys, rep.Attempts)
	fmt.Fprintf(a.stdout, "executions  %d %s\nrefused     %d\ncommitted   %d effect records\nwall time   %.3fs (%.0f attempts/s)\n",
		rep.Executions, a.mark(rep.Executions == int64(rep.Keys)), rep.Refused, rep.Committed, rep.Seconds, rep.PerSec)
	fmt.Fprintf(a.stdout, "latency     p50 %s, p99 %s, max %s\n", fmtMicros(rep.P50Micros), fmtMicros(rep.P99Micros),
		fmtMicros(rep.MaxMicros))
	if rep.Deadlocks != nil {
		fmt.Fprintf(a.stdout, "deadlocks   %d %s\n", *rep.Deadlocks, a.mark(*rep.Deadlocks == 0))
	}
	return err
}

func (a *app) benchReceipts(o benchOptions) error {
	rep, err := bench.Chain(a.ctx, &bench.ChainConfig{Store: o.store, Receipts: o.receipts, State: o.withState})
	if rep == nil {
		return err
	}
	rep.Store = redact(rep.Store)
	if o.asJSON {
		if jerr := jsonLine(a.stdout, rep); jerr != nil {
			return jerr
		}
		return err
	}
	fmt.Fprintf(a.stdout, "store       %s\n", rep.Store)
	if rep.Appended > 0 {
		fmt.Fprintf(a.stdout, "appended    %d receipts in %.1fs\n", rep.Appended, rep.AppendSeconds)
	}
	fmt.Fprintf(a.stdout, "verified    %d receipts %s in %.3fs (%.0f receipts/s)\npeak heap   %.1f MiB\n",
		rep.Receipts, a.mark(rep.OK), rep.VerifySeconds, rep.PerSec, rep.PeakHeapMiB)
	fmt.Fprintf(a.stdout, "with state  %s in %.3fs (%.0f receipts/s, %d effects, %d approvals checked)\npeak heap   %.1f MiB\n",
		a.mark(rep.StateOK), rep.StateVerifySeconds, rep.StatePerSec, rep.Effects, rep.Approvals, rep.StatePeakHeapMiB)
	return err
}

func (a *app) benchPrefill(o benchOptions) error {
	workers := []int{1}
	if o.workers != 1 {
		workers = append(workers, o.workers)
	}
	cfg := &bench.PrefillConfig{Store: o.store, Receipts: o.prefill, Workers: workers, Duration: o.duration, Runs: o.runs}
	if !o.asJSON {
		cfg.Progress = func(n int64, d time.Duration) {
			fmt.Fprintf(a.stderr, "prefill: %d receipts after %.0fs\n", n, d.Seconds())
		}
	}
	rep, err := bench.Prefill(a.ctx, cfg)
	if err != nil {
		return err
	}
	rep.Store = redact(rep.Store)
	if o.asJSON {
		return jsonLine(a.stdout, rep)
	}
	fmt.Fprintf(a.stdout, "store     %s\nreceipts  %d", rep.Store, rep.Receipts)
	if rep.Filled > 0 {
		fmt.Fprintf(a.stdout, " (%d filled in %.1fs, %.0f receipts/s)", rep.Filled, rep.FillSeconds, rep.FillPerSec)
	}
	fmt.Fprintf(a.stdout, "\neffects   %s\napprovals %s\n\n", countsLine(rep.Effects), countsLine(rep.Approvals))
	t := newTable(a.stdout, "WORKERS", "RUN", "EMPTY CALLS/S", "FILLED CALLS/S", "EMPTY CPU/CALL", "FILLED CPU/CALL")
	for _, c := range rep.Calls {
		for i := range c.Empty {
			t.row(strconv.Itoa(c.Workers), strconv.Itoa(i+1), fmt.Sprintf("%.0f", c.Empty[i].CallsPerSec),
				fmt.Sprintf("%.0f", c.Filled[i].CallsPerSec), fmtMicros(c.Empty[i].CPUMicrosPerCall), fmtMicros(c.Filled[i].CPUMicrosPerCall))
		}
		t.row(strconv.Itoa(c.Workers), "median", fmt.Sprintf("%.0f", c.EmptyPerSec), fmt.Sprintf("%.0f", c.FilledPerSec),
			fmtMicros(c.EmptyCPU), fmtMicros(c.FilledCPU))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	for _, c := range rep.Calls {
		fmt.Fprintf(a.stdout, "filled/empty, %d %s  %.2f\n", c.Workers, plural(c.Workers, "worker", "workers"), c.Ratio)
	}
	fmt.Fprintf(a.stdout, "\nreceipts --verify  %d receipts %s in %.1fs (%.0f receipts/s)\n\n", rep.Verify.Receipts,
		a.mark(rep.Verify.OK), rep.Verify.Seconds, rep.Verify.PerSec)
	t = newTable(a.stdout, "READ", "ROWS", "RUNS", "P50", "P99", "MAX")
	for _, r := range rep.Reads {
		t.row(r.Name, strconv.Itoa(r.Rows), strconv.Itoa(r.Runs), fmtMicros(r.P50Micros), fmtMicros(r.P99Micros), fmtMicros(r.MaxMicros))
	}
	return t.flush()
}

// countsLine is a count per state, in the order of the keys, as "committed 12, failed 3".
func countsLine[K ~string](m map[K]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[K(k)])
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}
