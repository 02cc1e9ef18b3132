package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/storeraw"
	"github.com/latchkit/latch/store"
)

// CallsConfig configures Calls.
type CallsConfig struct {
	// Store is the store the protected calls run on: "" is a scratch SQLite file in a temporary
	// directory, removed afterwards, and 'sqlite:?…' (no path) a scratch file with those
	// settings. A named store gets real bench.charge receipts.
	Store string
	// Workers is how many goroutines call at once; 0 means 1.
	Workers int
	// Duration is how long each side (latch, then the baseline) runs; 0 means 5 s.
	Duration time.Duration
}

// Phase is the measurement of one side of a Calls run (latch or the baseline).
type Phase struct {
	Calls       int64   `json:"calls"`
	Seconds     float64 `json:"seconds"`
	CallsPerSec float64 `json:"calls_per_s"`
	Latency
	AllocsPerCall float64 `json:"allocs_per_call"`
	// CommitsPerCall is write transactions committed per call: 2 without group commit.
	CommitsPerCall float64 `json:"commits_per_call,omitempty"`
	// CPUMicrosPerCall is the CPU time (user and system, every thread of the process: the
	// callers, the store's writer and checkpointer, the garbage collector) per call, in
	// microseconds, read from /proc (Linux; absent elsewhere). Unlike calls/s it hardly depends
	// on what else runs on the machine.
	CPUMicrosPerCall float64 `json:"cpu_us_per_call,omitempty"`
}

// CallsReport is the result of Calls.
type CallsReport struct {
	Store    string  `json:"store"` // the URL as run (a scratch store's included; not redacted)
	Workers  int     `json:"workers"`
	Duration string  `json:"duration"`
	Latch    Phase   `json:"latch"`
	Baseline Phase   `json:"baseline"`
	Ratio    float64 `json:"ratio"` // latch calls/s ÷ baseline calls/s
}

// Calls runs protected calls with distinct effect keys through the whole pipeline (an allowed
// action, a trivial executor, receipts on) for the configured duration, then, in the same run,
// the bare transactions a call needs on the same kind of store — one insert committed; one
// update and one receipt-sized insert committed — with the same driver and settings, and
// reports both and their ratio. cfg may be nil.
func Calls(ctx context.Context, cfg *CallsConfig) (*CallsReport, error) {
	var c CallsConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	switch {
	case c.Workers < 0:
		return nil, fmt.Errorf("bench: Workers %d is negative", c.Workers)
	case c.Duration < 0:
		return nil, fmt.Errorf("bench: Duration %v is negative", c.Duration)
	}
	storeURL, cleanup, err := ScratchStore(ctx, c.Store)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer cleanup()
	rep := &CallsReport{Store: storeURL, Workers: c.Workers, Duration: c.Duration.String()}

	g, err := openGuard(ctx, storeURL)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rep.Latch, err = benchLatch(ctx, g, c)
	docSize := lastReceiptSize(ctx, g.Store())
	if cerr := g.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("bench latch: %w", err)
	}

	base, err := storeraw.OpenBaseline(ctx, storeURL)
	if err != nil {
		return nil, fmt.Errorf("bench baseline: %w", err)
	}
	rep.Baseline, err = benchBaseline(ctx, base, c, docSize)
	if cerr := base.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("bench baseline: %w", err)
	}
	rep.Ratio = rep.Latch.CallsPerSec / rep.Baseline.CallsPerSec
	return rep, nil
}

// measure runs call from workers goroutines for d and times every call. call(w, n) makes the
// n-th call of worker w.
func measure(ctx context.Context, workers int, d time.Duration, call func(w, n int) error) (Phase, error) {
	lat := make([][]time.Duration, workers)
	errs := make([]error, workers)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cpu0 := processCPU(os.Getpid())
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
	cpu := processCPU(os.Getpid()) - cpu0
	runtime.ReadMemStats(&after)
	if err := errors.Join(errs...); err != nil {
		return Phase{}, err
	}
	if err := ctx.Err(); err != nil {
		return Phase{}, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	p := Phase{Calls: int64(len(all)), Seconds: elapsed.Seconds()}
	if p.Calls == 0 {
		return p, errors.New("no call finished in the duration")
	}
	p.CallsPerSec = float64(p.Calls) / p.Seconds
	p.Latency = latencyOf(all)
	p.AllocsPerCall = float64(after.Mallocs-before.Mallocs) / float64(p.Calls)
	if cpu > 0 {
		p.CPUMicrosPerCall = float64(cpu.Microseconds()) / float64(p.Calls)
	}
	return p, nil
}

// benchLatch runs protected calls through g.
func benchLatch(ctx context.Context, g *latch.Guard, c CallsConfig) (Phase, error) {
	run := runID()
	pctx := latch.WithPrincipal(ctx, Principal)
	fn := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	bufs := make([][]byte, c.Workers)
	call := func(w, n int) error {
		bufs[w] = Args(bufs[w][:0], run, n*c.Workers+w)
		_, err := g.Execute(pctx, &latch.Call{Action: Action, Arguments: bufs[w]}, fn)
		return err
	}
	// A short warm-up: the store's statements are prepared and its pages cached before the clock runs.
	for n := range 20 {
		bufs[0] = Args(bufs[0][:0], run+"w", n)
		if _, err := g.Execute(pctx, &latch.Call{Action: Action, Arguments: bufs[0]}, fn); err != nil {
			return Phase{}, err
		}
	}
	wc, _ := g.Store().(store.WriteCounter)
	var writes int64
	if wc != nil {
		writes = wc.WriteTransactions()
	}
	p, err := measure(ctx, c.Workers, c.Duration, call)
	if err != nil {
		return Phase{}, err
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

func benchBaseline(ctx context.Context, b storeraw.Baseline, c CallsConfig, docSize int) (Phase, error) {
	run := runID()
	doc := strings.Repeat("x", docSize)
	for n := range 20 {
		if err := b.Call(ctx, run+"w"+strconv.Itoa(n), doc); err != nil {
			return Phase{}, err
		}
	}
	p, err := measure(ctx, c.Workers, c.Duration, func(w, n int) error {
		return b.Call(ctx, run+"_"+strconv.Itoa(n*c.Workers+w), doc)
	})
	if err == nil {
		p.CommitsPerCall = 2
	}
	return p, err
}
