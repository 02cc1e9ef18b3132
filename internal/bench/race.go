package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/storeraw"
	"github.com/latchkit/latch/store"
)

// RaceConfig configures Race.
type RaceConfig struct {
	// Store is the store raced on, as in CallsConfig.
	Store string
	// Keys is the number of shared effect keys; Processes the number of racing OS processes;
	// both at least 1.
	Keys, Processes int
	// Workers is the goroutines of each process; 0 means 1.
	Workers int
	// Attempts is the attempts of all processes together, spread evenly over them; 0 means
	// Keys × Processes (every process attempts every key once).
	Attempts int
	// Command returns the command that runs one racer: a process that calls RunRacer with spec
	// (the latch binary runs `latch bench --race-child <spec>`). Its environment is completed by
	// Race.
	Command func(ctx context.Context, spec string) *exec.Cmd
	// GOMAXPROCS is the GOMAXPROCS of each racer; "" means CPUs ÷ Processes (at least 1): P
	// processes on C CPUs each schedule their goroutines on their share of them, rather than
	// every racer spinning up C threads that fight over the same cores.
	GOMAXPROCS string
}

// RaceReport is the result of Race.
type RaceReport struct {
	Store      string  `json:"store"` // as run (not redacted)
	Processes  int     `json:"processes"`
	Workers    int     `json:"workers"`
	Keys       int     `json:"keys"`
	Attempts   int     `json:"attempts"`
	Executions int64   `json:"executions"`
	Refused    int64   `json:"refused"`
	Committed  int     `json:"committed"` // committed effect records of the race's keys afterwards
	Seconds    float64 `json:"seconds"`
	PerSec     float64 `json:"attempts_per_s"`
	// Latency is that of every attempt (a protected call, executed or refused), all racers
	// together.
	Latency
	// Deadlocks is how much pg_stat_database.deadlocks of the store's database rose during the
	// race (Postgres only; counted server-side for the whole database, so on a database of its
	// own it counts only the race).
	Deadlocks  *int64 `json:"deadlocks,omitempty"`
	GOMAXPROCS string `json:"gomaxprocs"` // of each racer
	OK         bool   `json:"ok"`         // exactly Keys executions and committed effects, no racer failed
}

// raceSpec is what one racer process is told (the JSON its command passes to RunRacer).
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
	Executions int64   `json:"executions"`
	Refused    int64   `json:"refused"`
	FinishedAt int64   `json:"finished_at"` // unix nanoseconds
	Latencies  []int64 `json:"latencies_ns"`
	Error      string  `json:"error,omitempty"`
}

// raceApplication tags the racers' sessions on a backend that counts deadlocks (on Postgres,
// their application_name): Race waits for them to end before it reads the deadlock counter,
// which a session reports when it ends.
const raceApplication = "latch-bench-racer"

// Race races Processes OS processes over Keys shared effect keys: each opens the store, waits
// for the start, and walks the keys in the same order with its Workers goroutines, so that all
// of them meet on every key. Executions are counted by each racer's executor and summed; the
// committed effect records are counted in the store afterwards; both must be exactly Keys. The
// wall time runs from the start to the last racer's last call. On Postgres it reports how many
// deadlocks the server detected meanwhile. An error after the race (a racer that failed, a count
// that is not exact) comes with the report.
func Race(ctx context.Context, cfg *RaceConfig) (*RaceReport, error) {
	c := *cfg
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.Attempts == 0 {
		c.Attempts = c.Keys * c.Processes
	}
	switch {
	case c.Keys < 1 || c.Processes < 1:
		return nil, fmt.Errorf("bench: race of %d keys and %d processes: want at least 1 of each", c.Keys, c.Processes)
	case c.Workers < 0:
		return nil, fmt.Errorf("bench: Workers %d is negative", c.Workers)
	case c.Attempts < c.Keys:
		return nil, fmt.Errorf("bench: %d attempts are fewer than the %d keys", c.Attempts, c.Keys)
	case c.Command == nil:
		return nil, errors.New("bench: RaceConfig.Command is nil")
	}
	if c.GOMAXPROCS == "" {
		c.GOMAXPROCS = strconv.Itoa(max(1, runtime.NumCPU()/c.Processes))
	}
	storeURL, cleanup, err := ScratchStore(ctx, c.Store)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer cleanup()
	dir, err := os.MkdirTemp("", "latch-race-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	// The store is created and migrated once, before the race, so racers race calls, not migrations.
	g, err := openGuard(ctx, storeURL)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := g.Close(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	racerURL := storeURL
	var deadlocksBefore int64
	dc, counts := storeraw.Deadlocks(storeURL)
	if counts {
		if racerURL, err = dc.Tagged(storeURL, raceApplication); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		if deadlocksBefore, err = dc.Deadlocks(ctx, storeURL); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}

	results, start, err := runRacers(ctx, c, racerURL, dir)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rep := &RaceReport{Store: storeURL, Processes: c.Processes, Workers: c.Workers, Keys: c.Keys, Attempts: c.Attempts,
		GOMAXPROCS: c.GOMAXPROCS}
	var errs []error
	var last int64
	var lat []time.Duration
	for i, r := range results {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("racer %d: %s", i, r.Error))
		}
		rep.Executions += r.Executions
		rep.Refused += r.Refused
		last = max(last, r.FinishedAt)
		for _, ns := range r.Latencies {
			lat = append(lat, time.Duration(ns))
		}
	}
	rep.Latency = latencyOf(lat)
	rep.Seconds = time.Unix(0, last).Sub(start).Seconds()
	rep.PerSec = float64(rep.Attempts) / rep.Seconds
	if counts {
		// A session reports its counters when it ends: wait for the racers' to end, up to 10 s.
		if err := dc.WaitUntagged(ctx, storeURL, raceApplication, 10*time.Second); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		n, err := dc.Deadlocks(ctx, storeURL)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		n -= deadlocksBefore
		rep.Deadlocks = &n
	}
	run := results[0].run
	if rep.Committed, err = committedEffects(ctx, storeURL, run); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rep.OK = len(errs) == 0 && rep.Executions == int64(rep.Keys) && rep.Committed == rep.Keys
	if !rep.OK && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%d executions and %d committed effects over %d keys: want exactly %d",
			rep.Executions, rep.Committed, rep.Keys, rep.Keys))
	}
	if err := errors.Join(errs...); err != nil {
		return rep, fmt.Errorf("bench: %w", err)
	}
	return rep, nil
}

// racerResult is a racer's report and the run it raced.
type racerResult struct {
	raceResult
	run string
}

// runRacers starts the racers, waits until every one has opened the store, starts them and
// collects their reports.
func runRacers(ctx context.Context, c RaceConfig, storeURL, dir string) ([]racerResult, time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := runID()
	type exit struct {
		name string
		err  error
		out  string
	}
	exits := make(chan exit, c.Processes)
	for i := range c.Processes {
		attempts := c.Attempts / c.Processes
		if i < c.Attempts%c.Processes {
			attempts++
		}
		spec, err := json.Marshal(raceSpec{Store: storeURL, Dir: dir, Name: strconv.Itoa(i), Run: run, Keys: c.Keys,
			Attempts: attempts, Workers: c.Workers})
		if err != nil {
			return nil, time.Time{}, err
		}
		cmd := c.Command(ctx, string(spec))
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+c.GOMAXPROCS)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return nil, time.Time{}, fmt.Errorf("start racer %d: %w", i, err)
		}
		go func() {
			err := cmd.Wait()
			exits <- exit{strconv.Itoa(i), err, out.String()}
		}()
	}
	// Every racer opens the guard first: they race calls, not process start-up.
	for ready := 0; ready < c.Processes; {
		select {
		case e := <-exits:
			cancel()
			return nil, time.Time{}, fmt.Errorf("racer %s exited before the start: %v: %s", e.name, e.err, oneLine(e.out))
		case <-time.After(time.Millisecond):
		}
		var err error
		if ready, err = countFiles(dir, "ready-"); err != nil {
			return nil, time.Time{}, err
		}
	}
	start := time.Now()
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		return nil, time.Time{}, err
	}
	var errs []error
	for range c.Processes {
		if e := <-exits; e.err != nil {
			errs = append(errs, fmt.Errorf("racer %s: %v: %s", e.name, e.err, oneLine(e.out)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, time.Time{}, err
	}
	results := make([]racerResult, c.Processes)
	for i := range results {
		raw, err := os.ReadFile(filepath.Join(dir, "result-"+strconv.Itoa(i)))
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("racer %d: %w", i, err)
		}
		if err := json.Unmarshal(raw, &results[i].raceResult); err != nil {
			return nil, time.Time{}, fmt.Errorf("racer %d: %w", i, err)
		}
		results[i].run = run
	}
	return results, start, nil
}

// RunRacer is one racer of a race: spec is what Race gave the racer's command. It opens a guard,
// says it is ready, waits for the start, makes its attempts with its workers, counts what its
// executors ran, times every call and reports to Race.
func RunRacer(ctx context.Context, spec string) error {
	var s raceSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return fmt.Errorf("race spec: %w", err)
	}
	g, err := openGuard(ctx, s.Store)
	if err != nil {
		return err
	}
	defer g.Close()
	if err := os.WriteFile(filepath.Join(s.Dir, "ready-"+s.Name), nil, 0o600); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(s.Dir, "go")); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
	}
	var executions, refused, next atomic.Int64
	pctx := latch.WithPrincipal(ctx, Principal)
	fn := func(context.Context, json.RawMessage) (any, error) {
		executions.Add(1)
		return nil, nil
	}
	errs := make([]error, s.Workers)
	lat := make([][]int64, s.Workers)
	var wg sync.WaitGroup
	for w := range s.Workers {
		wg.Go(func() {
			var buf []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= s.Attempts {
					return
				}
				// Every racer walks the keys in the same order, so they meet on each key.
				buf = Args(buf[:0], s.Run, i%s.Keys)
				t0 := time.Now()
				_, err := g.Execute(pctx, &latch.Call{Action: Action, Arguments: buf}, fn)
				lat[w] = append(lat[w], time.Since(t0).Nanoseconds())
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
	for _, l := range lat {
		r.Latencies = append(r.Latencies, l...)
	}
	if err := errors.Join(errs...); err != nil {
		r.Error = oneLine(err.Error())
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Dir, "result-"+s.Name), b, 0o600)
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

// oneLine folds a process's output into one line for an error message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")), " ")
}
