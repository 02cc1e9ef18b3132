package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/store"
	_ "github.com/latchkit/latch/store/postgres" // the Postgres race, as the latch command links it
)

// racerEnv makes a re-executed test binary a racer: its value is the spec Race gave.
const racerEnv = "LATCH_BENCH_TEST_RACER"

// serverEnv makes a re-executed test binary the server of Serve.
const serverEnv = "LATCH_BENCH_TEST_SERVER"

func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(serverEnv); ok {
		if err := RunServer(context.Background(), spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if spec, ok := os.LookupEnv(racerEnv); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := RunRacer(ctx, spec)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m) // the guards, stores and pools of every run end with it
}

// racerCommand runs this test binary as a racer.
func racerCommand(ctx context.Context, spec string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), racerEnv+"="+spec)
	return cmd
}

func TestLatencyOf(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond // unsorted: latencyOf sorts
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want Latency
	}{
		{"empty", nil, Latency{}},
		{"one", ms(3), Latency{3000, 3000, 3000}},
		{"unsorted", ms(5, 1, 9), Latency{5000, 9000, 9000}},
		{"hundred", hundred, Latency{51000, 100000, 100000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := latencyOf(tc.in); got != tc.want {
				t.Errorf("latencyOf(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, run := range []string{"a", "b"} {
		for n := range 3 {
			b := Args(nil, run, n)
			if _, err := canon.Parse(b); err != nil {
				t.Fatalf("Args(%q, %d) = %s: %v", run, n, b, err)
			}
			var v struct {
				InvoiceID string `json:"invoice_id"`
			}
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			if seen[v.InvoiceID] {
				t.Errorf("Args(%q, %d): invoice_id %q seen before", run, n, v.InvoiceID)
			}
			seen[v.InvoiceID] = true
		}
	}
}

func TestScratchStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		given   string
		scratch bool
		suffix  string
	}{
		{"", true, "/latch.db"},
		{"sqlite:", true, "/latch.db"},
		{"sqlite:?synchronous=normal", true, "/latch.db?synchronous=normal"},
		{"sqlite:/tmp/x.db", false, ""},
		{"postgres://u@h/db?schema=s", false, ""},
		{"mysql://u@h/db", false, ""}, // kept: opening it says what is wrong
	} {
		u, cleanup, err := ScratchStore(t.Context(), tc.given)
		if err != nil {
			t.Fatalf("ScratchStore(%q) = %v", tc.given, err)
		}
		if !tc.scratch {
			if u != tc.given {
				t.Errorf("ScratchStore(%q) = %q, want it unchanged", tc.given, u)
			}
			cleanup()
			continue
		}
		if !strings.HasPrefix(u, "sqlite:") || !strings.HasSuffix(u, tc.suffix) {
			t.Errorf("ScratchStore(%q) = %q, want sqlite:…%s", tc.given, u, tc.suffix)
		}
		dir := filepath.Dir(strings.TrimPrefix(strings.TrimSuffix(u, strings.TrimPrefix(tc.suffix, "/latch.db")), "sqlite:"))
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("ScratchStore(%q): directory %s: %v", tc.given, dir, err)
		}
		cleanup()
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("ScratchStore(%q): directory %s still there after cleanup (%v)", tc.given, dir, err)
		}
	}
}

func TestCalls(t *testing.T) {
	t.Parallel()
	rep, err := Calls(t.Context(), &CallsConfig{Store: "sqlite:?synchronous=normal", Workers: 2, Duration: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name string
		p    Phase
	}{{"latch", rep.Latch}, {"baseline", rep.Baseline}} {
		if p.p.Calls < 1 || p.p.CallsPerSec <= 0 || p.p.AllocsPerCall <= 0 {
			t.Errorf("%s = %+v, want calls, a rate and allocations", p.name, p.p)
		}
		if !(p.p.P50Micros > 0 && p.p.P50Micros <= p.p.P99Micros && p.p.P99Micros <= p.p.MaxMicros) {
			t.Errorf("%s latency = %+v, want 0 < p50 ≤ p99 ≤ max", p.name, p.p.Latency)
		}
	}
	if rep.Baseline.CommitsPerCall != 2 {
		t.Errorf("baseline commits per call = %v, want 2", rep.Baseline.CommitsPerCall)
	}
	if c := rep.Latch.CommitsPerCall; c <= 0 || c > 2 {
		t.Errorf("latch commits per call = %v, want (0, 2]", c)
	}
	if want := rep.Latch.CallsPerSec / rep.Baseline.CallsPerSec; rep.Ratio != want {
		t.Errorf("Ratio = %v, want %v", rep.Ratio, want)
	}
	path, _, _ := strings.Cut(strings.TrimPrefix(rep.Store, "sqlite:"), "?")
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("the scratch store's directory is still there (%v)", err)
	}
}

func TestRaceSQLite(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	rep, err := Race(t.Context(), &RaceConfig{Keys: 30, Processes: 3, Workers: 2, Command: racerCommand})
	if err != nil {
		t.Fatal(err)
	}
	checkRace(t, rep, 30, 90)
	if rep.Deadlocks != nil {
		t.Errorf("Deadlocks = %d on SQLite, want none reported", *rep.Deadlocks)
	}
}

// On Postgres the race reports the deadlocks of its database: here one of its own, so that the
// count is the race's alone.
func TestRacePostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	base := os.Getenv("LATCH_TEST_POSTGRES_URL")
	if base == "" {
		if os.Getenv("LATCH_REQUIRE_POSTGRES") == "1" {
			t.Fatal("LATCH_TEST_POSTGRES_URL is unset and LATCH_REQUIRE_POSTGRES=1")
		}
		t.Skip("LATCH_TEST_POSTGRES_URL is unset")
	}
	db := "latch_bench_test_" + runID()
	execOn(t, base, `CREATE DATABASE `+pgx.Identifier{db}.Sanitize())
	t.Cleanup(func() { execOn(t, base, `DROP DATABASE IF EXISTS `+pgx.Identifier{db}.Sanitize()+` WITH (FORCE)`) })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	q := u.Query()
	q.Set("schema", "race")
	u.RawQuery = q.Encode()

	rep, err := Race(t.Context(), &RaceConfig{Store: u.String(), Keys: 40, Processes: 3, Workers: 4, Command: racerCommand})
	if err != nil {
		t.Fatal(err)
	}
	checkRace(t, rep, 40, 120)
	if rep.Deadlocks == nil || *rep.Deadlocks != 0 {
		t.Errorf("Deadlocks = %v, want a count of 0", rep.Deadlocks)
	}
}

func checkRace(t *testing.T, rep *RaceReport, keys, attempts int) {
	t.Helper()
	if !rep.OK || rep.Executions != int64(keys) || rep.Committed != keys || rep.Refused != int64(attempts-keys) {
		t.Errorf("Race() = %+v, want %d executions, %d committed, %d refused, ok", rep, keys, keys, attempts-keys)
	}
	if !(rep.P50Micros > 0 && rep.P50Micros <= rep.P99Micros && rep.P99Micros <= rep.MaxMicros) {
		t.Errorf("latency = %+v, want 0 < p50 ≤ p99 ≤ max", rep.Latency)
	}
	if rep.MaxMicros > rep.Seconds*1e6 {
		t.Errorf("slowest call %v µs, longer than the race (%v s)", rep.MaxMicros, rep.Seconds)
	}
}

func TestRaceRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  RaceConfig
		want string
	}{
		{RaceConfig{Keys: 0, Processes: 2, Command: racerCommand}, "at least 1"},
		{RaceConfig{Keys: 5, Processes: 2, Attempts: 4, Command: racerCommand}, "fewer than the 5 keys"},
		{RaceConfig{Keys: 5, Processes: 2}, "Command is nil"},
	} {
		if _, err := Race(t.Context(), &tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Race(%+v) = %v, want an error saying %q", tc.cfg, err, tc.want)
		}
	}
}

func TestChain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	u := "sqlite:" + filepath.Join(dir, "chain.db")
	rep, err := Chain(t.Context(), &ChainConfig{Store: u, Receipts: 150})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Receipts != 150 || rep.Appended != 150 {
		t.Errorf("Chain(150) = %+v, want 150 appended and verified", rep)
	}
	rep, err = Chain(t.Context(), &ChainConfig{Store: u, Receipts: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Receipts != 150 || rep.Appended != 0 {
		t.Errorf("Chain(100) on a chain of 150 = %+v, want nothing appended and 150 verified", rep)
	}
}

// execOn runs one statement on a connection of its own to the server at raw.
func execOn(t *testing.T, raw, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestServe: HTTP clients against a server process commit every call they make, on two
// requests a call and on one, and the report carries the phases and the server's memory.
func TestServe(t *testing.T) {
	t.Parallel()
	rep, err := Serve(t.Context(), &ServeConfig{Workers: 2, Duration: 300 * time.Millisecond,
		Command: func(ctx context.Context, spec string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), serverEnv+"="+spec)
			return cmd
		}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.InProcess.Calls == 0 || rep.HTTP.Calls == 0 || rep.Committed != rep.HTTP.Calls || rep.Ratio <= 0 {
		t.Errorf("Serve = %+v", rep)
	}
	if rep.OneRequest.Calls == 0 || rep.CommittedOneRequest != rep.OneRequest.Calls || rep.OneRequestRatio <= 0 {
		t.Errorf("Serve, one request a call: %d calls, %d committed, ratio %v", rep.OneRequest.Calls, rep.CommittedOneRequest, rep.OneRequestRatio)
	}
	if runtime.GOOS == "linux" && (rep.OneRequestServeCPUPerCall <= 0 || rep.OneRequestCPURatio <= 0 || rep.OneRequest.CPUMicrosPerCall <= 0) {
		t.Errorf("CPU a call on one request: server %v µs, clients %v µs, ratio %v; want each above 0",
			rep.OneRequestServeCPUPerCall, rep.OneRequest.CPUMicrosPerCall, rep.OneRequestCPURatio)
	}
	if runtime.GOOS == "linux" && (rep.ServeRSS <= 0 || rep.ServePeakRSS < rep.ServeRSS) {
		t.Errorf("server RSS %d, peak %d", rep.ServeRSS, rep.ServePeakRSS)
	}
	if runtime.GOOS == "linux" && (rep.ServeCPUPerCall <= 0 || rep.CPURatio <= 0 || rep.HTTP.CPUMicrosPerCall <= 0) {
		t.Errorf("CPU a call: server %v µs, clients %v µs, ratio %v; want each above 0", rep.ServeCPUPerCall, rep.HTTP.CPUMicrosPerCall, rep.CPURatio)
	}
}

// TestServePinned: with Pin the in-process phase and the server run on the last CPU alone and
// the clients on the others, the server writes its CPU profile, and the process may run on
// every CPU again afterwards.
func TestServePinned(t *testing.T) {
	if runtime.GOOS != "linux" || len(allCPUs()) < 2 {
		t.Skip("pinning needs Linux and 2 CPUs")
	}
	before := allCPUs()
	prof := filepath.Join(t.TempDir(), "serve.prof")
	var serverCPUs string
	rep, err := Serve(t.Context(), &ServeConfig{Workers: 2, Duration: 300 * time.Millisecond, Pin: true, CPUProfile: prof,
		Command: func(ctx context.Context, spec string) *exec.Cmd {
			if got := allCPUs(); len(got) != len(before)-1 {
				t.Errorf("the clients run on CPUs %v, want all but the last of %v", got, before)
			}
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), serverEnv+"="+spec)
			var s serveSpec
			if err := json.Unmarshal([]byte(spec), &s); err != nil {
				t.Error(err)
			}
			serverCPUs = strconv.Itoa(s.CPU)
			return cmd
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pinned || rep.Committed != rep.HTTP.Calls || rep.CommittedOneRequest != rep.OneRequest.Calls || serverCPUs != strconv.Itoa(before[len(before)-1]) {
		t.Errorf("Serve(pinned) = %+v, server on CPU %s; want pinned, every call committed, the server on CPU %d", rep, serverCPUs, before[len(before)-1])
	}
	if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
		t.Errorf("the server's CPU profile: %v", err)
	}
	if got := allCPUs(); len(got) != len(before) {
		t.Errorf("after the run the process may run on %v, want %v again", got, before)
	}
}

// TestChainWithState grows a chain through the pipeline with every common state change: the
// chain and the state it implies verify, and the replay checked effects and approvals.
func TestChainWithState(t *testing.T) {
	t.Parallel()
	u := "sqlite:" + filepath.Join(t.TempDir(), "evidence.db")
	rep, err := Chain(t.Context(), &ChainConfig{Store: u, Receipts: 300, State: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || !rep.StateOK || rep.Receipts < 300 || rep.Receipts > 400 || rep.Appended != rep.Receipts {
		t.Errorf("Chain(300, state) = %+v, want 300 to 400 receipts appended, chain and state verified", rep)
	}
	// 300 receipts are over 200 rounds: the shares of evidenceRound give effects of each kind
	// and 20 approvals.
	if rep.Effects < 150 || rep.Approvals < 15 {
		t.Errorf("checked %d effects, %d approvals; want at least 150 and 15", rep.Effects, rep.Approvals)
	}
	g, err := latch.OpenStore(t.Context(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	states := map[store.State]int{}
	effs, err := g.Effects(t.Context(), store.EffectFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range effs {
		states[e.State]++
		if e.Attempt > 1 {
			states["renewed"]++
		}
	}
	if states[store.Committed] == 0 || states[store.Failed] == 0 || states["renewed"] == 0 {
		t.Errorf("effect states %v: want committed, failed (resolved) and renewed effects", states)
	}
}
