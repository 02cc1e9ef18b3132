package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// ChainConfig configures Chain.
type ChainConfig struct {
	// Store is the store whose chain is grown and verified, as in CallsConfig (a scratch store
	// starts empty).
	Store string
	// Receipts is the length the chain is grown to (a longer chain is verified as it is).
	Receipts int
	// State grows the chain through the real pipeline with state changes of every common kind
	// (effects committed, failed and renewed, ambiguous and resolved, duplicates refused,
	// approvals requested, granted and spent: EvidencePolicy) instead of appending receipts of
	// committed calls without effect rows.
	State bool
}

// ChainReport is the result of Chain.
type ChainReport struct {
	Store         string  `json:"store"`
	Receipts      int64   `json:"receipts"`
	Appended      int64   `json:"appended"`
	AppendSeconds float64 `json:"append_seconds"`
	VerifySeconds float64 `json:"verify_seconds"`
	PerSec        float64 `json:"receipts_per_s"`
	PeakHeapMiB   float64 `json:"peak_heap_mib"` // the most heap in use while verifying
	OK            bool    `json:"ok"`
	// The same chain verified as latch receipts --verify does (store.VerifyChain): the walk, and
	// the state it implies replayed and compared with the stored effects, approvals and
	// delegations.
	StateVerifySeconds float64 `json:"state_verify_seconds"`
	StatePerSec        float64 `json:"state_receipts_per_s"`
	StatePeakHeapMiB   float64 `json:"state_peak_heap_mib"`
	StateOK            bool    `json:"state_ok"`
	Effects            int64   `json:"effects_checked"`
	Approvals          int64   `json:"approvals_checked"`
}

// fillWorkers is how many appends are in flight while a chain is grown: enough for group commit
// to write them in large batches.
const fillWorkers = 64

// Chain appends receipts of committed calls to the store until its chain holds cfg.Receipts
// (so that a store can be grown from 10k to 100k to 1M), then verifies the whole chain as
// `latch receipts --verify` does, sampling the heap meanwhile. A chain that does not verify is
// an error that comes with the report.
func Chain(ctx context.Context, cfg *ChainConfig) (*ChainReport, error) {
	if cfg.Receipts < 0 {
		return nil, fmt.Errorf("bench: Receipts %d is negative", cfg.Receipts)
	}
	storeURL, cleanup, err := ScratchStore(ctx, cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer cleanup()
	st, err := latch.OpenStore(ctx, storeURL, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer st.Close()
	rep := &ChainReport{Store: storeURL}
	head, err := st.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if missing := int64(cfg.Receipts) - head.Seq; missing > 0 {
		start := time.Now()
		if cfg.State {
			err = appendEvidence(ctx, storeURL, int64(cfg.Receipts))
		} else {
			err = appendReceipts(ctx, st, missing)
		}
		if err != nil {
			return nil, fmt.Errorf("bench: append receipts: %w", err)
		}
		after, err := st.Head(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		rep.Appended, rep.AppendSeconds = after.Seq-head.Seq, time.Since(start).Seconds()
	}

	var peak uint64
	rep.VerifySeconds, peak, err = sampleHeap(func() error {
		head, err := st.Head(ctx)
		if err != nil {
			return err
		}
		vr, err := receipt.Verify(st.Receipts(ctx, store.ReceiptFilter{}), head)
		rep.Receipts, rep.OK = vr.Verified, vr.OK
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: verify: %w", err)
	}
	rep.PerSec = float64(rep.Receipts) / rep.VerifySeconds
	rep.PeakHeapMiB = float64(peak) / (1 << 20)

	var stateReceipts int64
	rep.StateVerifySeconds, peak, err = sampleHeap(func() error {
		vr, err := store.VerifyChain(ctx, st)
		stateReceipts, rep.StateOK = vr.Verified, vr.OK
		if vr.State != nil {
			rep.Effects, rep.Approvals = vr.State.Effects, vr.State.Approvals
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: verify with state: %w", err)
	}
	rep.StatePerSec = float64(stateReceipts) / rep.StateVerifySeconds
	rep.StatePeakHeapMiB = float64(peak) / (1 << 20)
	if !rep.OK || !rep.StateOK {
		return rep, errors.New("bench: the chain does not verify: run latch receipts --verify")
	}
	return rep, nil
}

// sampleHeap runs fn, sampling the heap in use meanwhile (a chain must be verified in constant
// memory), and returns how long fn took and the most heap in use.
func sampleHeap(fn func() error) (float64, uint64, error) {
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
	err := fn()
	secs := time.Since(start).Seconds()
	close(stop)
	<-sampled
	return secs, peak.Load(), err
}

// appendReceipts appends n receipts of committed calls, each in its own Record, from
// fillWorkers goroutines.
func appendReceipts(ctx context.Context, st store.Store, n int64) error {
	run := runID()
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
				args = Args(args[:0], run, int(i))
				now := time.Now()
				rc := &receipt.Receipt{
					ReceiptID: "rcp_" + id[len(id)-32:], ActionID: "act_" + id[len(id)-32:], Action: Action,
					ActionHash: "sha256:" + strings.Repeat("ab", 32), Arguments: slices.Clone(args),
					Principal: receipt.Principal{Agent: Principal.Agent}, Environment: "production",
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
