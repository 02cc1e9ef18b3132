package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/internal/prefill"
	"github.com/latchkit/latch/store"
)

// PrefillConfig configures Prefill.
type PrefillConfig struct {
	// Store is the store grown and measured, as in CallsConfig ('sqlite:?…': a scratch store,
	// removed afterwards; a named store is grown and kept).
	Store string
	// Receipts is the size the store is grown to before it is measured: rounds of
	// internal/prefill's mix are filled until its chain holds at least this many receipts (a
	// store that holds as many already is measured as it is).
	Receipts int64
	// Workers are the worker counts whose call rates are measured; nil is 1 and 8.
	Workers []int
	// Duration is how long each call measurement runs; 0 is 5 s.
	Duration time.Duration
	// Runs is how many times each call measurement runs on the empty store and on the filled one,
	// alternately; 0 is 3.
	Runs int
	// PerFill is how many rounds of the mix one Fill (one transaction) writes; 0 is 1,000.
	PerFill int
	// Reads is how many times each read is timed (fewer when they take longer than ReadBudget
	// together, never fewer than 3); 0 is 50.
	Reads int
	// ReadBudget bounds the time spent timing one read; 0 is 10 s.
	ReadBudget time.Duration
	// Progress, when set, is told of the fill's progress every few seconds.
	Progress func(receipts int64, elapsed time.Duration)
}

// PrefillReport is the result of Prefill.
type PrefillReport struct {
	Store       string  `json:"store"`
	Receipts    int64   `json:"receipts"` // the chain's length when measured
	Filled      int64   `json:"filled"`   // receipts the fill appended
	FillSeconds float64 `json:"fill_seconds"`
	FillPerSec  float64 `json:"fill_receipts_per_s"`
	// Effects and Approvals count the store's rows by state or status as measured.
	Effects   map[store.State]int64          `json:"effects"`
	Approvals map[store.ApprovalStatus]int64 `json:"approvals"`
	Calls     []PrefillCalls                 `json:"calls"`
	// Verify is store.VerifyChain over the whole filled store, as latch receipts --verify runs it.
	Verify PrefillVerify `json:"verify"`
	// Reads are the operator's reads timed on the filled store.
	Reads []PrefillRead `json:"reads"`
}

// PrefillCalls is the call rate at one worker count on an empty store and on the filled one.
type PrefillCalls struct {
	Workers int     `json:"workers"`
	Empty   []Phase `json:"empty"`  // each run
	Filled  []Phase `json:"filled"` // each run, alternating with Empty's
	// The medians of the runs' calls/s and CPU a call, and filled ÷ empty of the calls/s.
	EmptyPerSec  float64 `json:"empty_calls_per_s"`
	FilledPerSec float64 `json:"filled_calls_per_s"`
	EmptyCPU     float64 `json:"empty_cpu_us_per_call"`
	FilledCPU    float64 `json:"filled_cpu_us_per_call"`
	Ratio        float64 `json:"ratio"`
}

// PrefillVerify is the verification of the filled chain.
type PrefillVerify struct {
	Receipts int64   `json:"receipts"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"receipts_per_s"`
	OK       bool    `json:"ok"`
}

// PrefillRead is one operator read timed on the filled store.
type PrefillRead struct {
	Name string `json:"name"` // what it is, by the surface that reads it
	Rows int    `json:"rows"` // the rows (effects, or receipts counted) it answered with
	Runs int    `json:"runs"`
	Latency
}

// Prefill grows the store to cfg.Receipts receipts through its bulk path (store.Filler) with
// internal/prefill's mix, then measures there, against an empty store of the same kind in the
// same run: the one-worker and several-worker call rates and CPU a call (alternately on a fresh
// empty store and on the filled one), store.VerifyChain over the whole chain, and the
// operator's reads — latch stats, the console's attention page, GET /v1/effects?state=ambiguous
// and failed — through the operator layer those surfaces call, in process.
func Prefill(ctx context.Context, cfg *PrefillConfig) (*PrefillReport, error) {
	c := *cfg
	switch {
	case c.Receipts < 1:
		return nil, fmt.Errorf("bench: prefill %d receipts: want at least 1", c.Receipts)
	case c.Duration < 0, c.Runs < 0, c.PerFill < 0, c.Reads < 0, c.ReadBudget < 0:
		return nil, errors.New("bench: prefill: negative duration, runs, rounds per fill or reads")
	}
	if c.Workers == nil {
		c.Workers = []int{1, 8}
	}
	for _, w := range c.Workers {
		if w < 1 {
			return nil, fmt.Errorf("bench: prefill: %d workers: want at least 1", w)
		}
	}
	c.Duration = cmpOr(c.Duration, 5*time.Second)
	c.Runs = cmpOr(c.Runs, 3)
	c.PerFill = cmpOr(c.PerFill, 1000)
	c.Reads = cmpOr(c.Reads, 50)
	c.ReadBudget = cmpOr(c.ReadBudget, 10*time.Second)

	storeURL, cleanup, err := ScratchStore(ctx, c.Store)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer cleanup()
	rep := &PrefillReport{Store: storeURL}
	st, err := latch.OpenStore(ctx, storeURL, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	start := time.Now()
	filled, err := fill(ctx, st, c)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("bench: prefill: %w", err)
	}
	rep.Filled, rep.FillSeconds = filled, time.Since(start).Seconds()
	if filled > 0 {
		rep.FillPerSec = float64(filled) / rep.FillSeconds
	}

	for _, w := range c.Workers {
		pc, err := prefillCalls(ctx, storeURL, c, w)
		if err != nil {
			return nil, err
		}
		rep.Calls = append(rep.Calls, pc)
	}

	st, err = latch.OpenStore(ctx, storeURL, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer st.Close()
	if err := measureReads(ctx, st, c, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// FillSpan is the time the filled calls are spread over, ending when the fill starts.
const FillSpan = 30 * 24 * time.Hour

// receiptsPerRound is about how many receipts a round of the mix appends (internal/prefill).
const receiptsPerRound = 1.045

// fill fills rounds of the mix into st until its chain holds c.Receipts, c.PerFill rounds to a
// transaction, the next batch made while the store writes the last. It returns the receipts
// appended.
func fill(ctx context.Context, st store.Store, c PrefillConfig) (int64, error) {
	f, ok := st.(store.Filler)
	if !ok {
		return 0, fmt.Errorf("the %s store has no bulk path (store.Filler)", store.Scheme(c.Store))
	}
	head, err := st.Head(ctx)
	if err != nil {
		return 0, err
	}
	if head.Seq >= c.Receipts {
		return 0, nil
	}
	gen := prefill.New(runID(), 0)
	batches := make(chan []store.FillCall, 2)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(batches)
		// The calls are spread evenly over the last FillSpan, oldest first, as a store's calls
		// are: a read of a recent window (latch stats --since) reads only that window.
		rounds := float64(c.Receipts-head.Seq) / receiptsPerRound
		begin, step := time.Now().Add(-FillSpan), time.Duration(float64(FillSpan)/rounds)
		var i int64
		for head.Seq+gen.Tally.Receipts < c.Receipts {
			calls := make([]store.FillCall, 0, c.PerFill+c.PerFill/20)
			for n := 0; n < c.PerFill && head.Seq+gen.Tally.Receipts < c.Receipts; n++ {
				calls = gen.Next(calls, i, begin.Add(time.Duration(i)*step))
				i++
			}
			select {
			case batches <- calls:
			case <-ctx.Done():
				return
			}
		}
	}()
	start, told := time.Now(), time.Now()
	var written int64
	for calls := range batches {
		if err := f.Fill(ctx, calls); err != nil {
			return written, err
		}
		if after, err := st.Head(ctx); err == nil {
			written = after.Seq - head.Seq
		}
		if c.Progress != nil && time.Since(told) > 5*time.Second {
			c.Progress(head.Seq+written, time.Since(start))
			told = time.Now()
		}
	}
	return written, ctx.Err()
}

// prefillCalls measures calls of w workers on a fresh empty store and on the filled one,
// alternately, c.Runs times each.
func prefillCalls(ctx context.Context, storeURL string, c PrefillConfig, w int) (PrefillCalls, error) {
	pc := PrefillCalls{Workers: w}
	cc := CallsConfig{Workers: w, Duration: c.Duration}
	for range c.Runs {
		empty, err := callsOn(ctx, "", c.Store, cc)
		if err != nil {
			return pc, fmt.Errorf("bench: empty store, %d workers: %w", w, err)
		}
		full, err := callsOn(ctx, storeURL, "", cc)
		if err != nil {
			return pc, fmt.Errorf("bench: filled store, %d workers: %w", w, err)
		}
		pc.Empty, pc.Filled = append(pc.Empty, empty), append(pc.Filled, full)
	}
	pick := func(ps []Phase, f func(Phase) float64) float64 {
		var v []float64
		for _, p := range ps {
			v = append(v, f(p))
		}
		return Median(v)
	}
	rate := func(p Phase) float64 { return p.CallsPerSec }
	cpu := func(p Phase) float64 { return p.CPUMicrosPerCall }
	pc.EmptyPerSec, pc.FilledPerSec = pick(pc.Empty, rate), pick(pc.Filled, rate)
	pc.EmptyCPU, pc.FilledCPU = pick(pc.Empty, cpu), pick(pc.Filled, cpu)
	pc.Ratio = pc.FilledPerSec / pc.EmptyPerSec
	return pc, nil
}

// callsOn runs the calls benchmark's latch side on storeURL, or, when it is "", on a fresh
// scratch store made beside place (with its settings).
func callsOn(ctx context.Context, storeURL, place string, cc CallsConfig) (Phase, error) {
	if storeURL == "" {
		sc, err := store.NewScratch(ctx, place, &store.ScratchConfig{Prefix: "latch_bench"})
		if err != nil {
			return Phase{}, err
		}
		defer sc.Close(context.WithoutCancel(ctx))
		if storeURL, err = sc.URL(ctx, "latch"); err != nil {
			return Phase{}, err
		}
	}
	g, err := openGuard(ctx, storeURL)
	if err != nil {
		return Phase{}, err
	}
	p, err := benchLatch(ctx, g, cc)
	if cerr := g.Close(); err == nil {
		err = cerr
	}
	return p, err
}

// measureReads verifies the chain and times the operator's reads on st.
func measureReads(ctx context.Context, st store.Store, c PrefillConfig, rep *PrefillReport) error {
	counts, err := st.(interface {
		Counts(context.Context) (*store.Counts, error)
	}).Counts(ctx)
	if err == nil {
		rep.Effects, rep.Approvals = counts.Effects, counts.Approvals
	}
	start := time.Now()
	vr, err := store.VerifyChain(ctx, st)
	if err != nil {
		return fmt.Errorf("bench: verify: %w", err)
	}
	secs := time.Since(start).Seconds()
	rep.Verify = PrefillVerify{Receipts: vr.Verified, Seconds: secs, PerSec: float64(vr.Verified) / secs, OK: vr.OK}
	rep.Receipts = vr.Verified
	if !vr.OK {
		return errors.New("bench: the filled chain does not verify: run latch receipts --verify")
	}
	op, err := operator.New(&operator.Config{Store: st})
	if err != nil {
		return err
	}
	reads := []struct {
		name string
		once bool // measured once: what it measures does not happen again
		read func() (int, error)
	}{
		// The first count of the whole chain reads every receipt and keeps its tally; the
		// counts after it start from the tally kept.
		{"latch stats, first count", true, func() (int, error) {
			s, err := op.Stats(ctx, 0)
			return s.Receipts, err
		}},
		{"latch stats", false, func() (int, error) {
			s, err := op.Stats(ctx, 0)
			return s.Receipts, err
		}},
		{"latch stats --since 1h", false, func() (int, error) {
			s, err := op.Stats(ctx, time.Hour)
			return s.Receipts, err
		}},
		{"console /attention", false, func() (int, error) {
			a, err := op.Attention(ctx)
			return len(a.NeedsPerson), err
		}},
		{"GET /v1/effects?state=ambiguous", false, func() (int, error) { return effectsJSON(ctx, op, "ambiguous") }},
		{"GET /v1/effects?state=failed", false, func() (int, error) { return effectsJSON(ctx, op, "failed") }},
		{"GET /v1/effects?state=all", false, func() (int, error) { return effectsJSON(ctx, op, "all") }},
	}
	for _, r := range reads {
		pr := PrefillRead{Name: r.name}
		var lat []time.Duration
		begin := time.Now()
		for len(lat) < c.Reads && (len(lat) < 3 || time.Since(begin) < c.ReadBudget) && (!r.once || len(lat) == 0) {
			t0 := time.Now()
			n, err := r.read()
			if err != nil {
				return fmt.Errorf("bench: %s: %w", r.name, err)
			}
			lat = append(lat, time.Since(t0))
			pr.Rows = n
		}
		pr.Runs, pr.Latency = len(lat), latencyOf(lat)
		rep.Reads = append(rep.Reads, pr)
	}
	return nil
}

// effectsJSON is what GET /v1/effects?state= does: the first page of the operator's list (100
// effects, as the route pages it when the request names no limit), encoded.
func effectsJSON(ctx context.Context, op *operator.Operator, state string) (int, error) {
	out, next, err := op.EffectPage(ctx, state, "", 100)
	if err != nil {
		return 0, err
	}
	_, err = json.Marshal(map[string]any{"effects": out, "next_after": next})
	return len(out), err
}
