// Package bench is the harness behind `latch bench`: it measures what a protected call costs
// against the bare transactions the store would need without latch (Calls), races operating
// system processes over shared effect keys (Race), and grows and verifies a receipt chain
// (Chain). The command line parses flags and prints; everything measured is here, so that it
// is tested on its own (docs/performance.md records the figures).
package bench

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/storeurl"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// Policy is the policy every bench call is decided by: one allowed action with an effect key, so
// that each call costs what a protected write costs (reserve, execute, record).
const Policy = `schema: latch.policy/v1
actions:
  bench.charge:
    effect: "charge:{invoice_id}"
    decision: allow
`

// Action is the action of every bench call.
const Action = "bench.charge"

// Principal attributes bench calls.
var Principal = latch.Principal{Agent: "latch-bench"}

// openGuard opens a guard deciding by Policy on storeURL.
func openGuard(ctx context.Context, storeURL string) (*latch.Guard, error) {
	p, err := policy.Parse("bench.yaml", []byte(Policy))
	if err != nil {
		return nil, err
	}
	return latch.Open(ctx, &latch.Config{Policy: p, StoreURL: storeURL})
}

// Args appends the arguments of call n of a run to b: a typical five-field object whose
// invoice_id, and so whose effect key, no other call of any run shares.
func Args(b []byte, run string, n int) []byte {
	b = append(b, `{"invoice_id":"`...)
	b = append(b, run...)
	b = append(b, '_')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, `","amount":24900,"currency":"EUR","customer":"cus_1","capture":true}`...)
}

// runID names the keys of one run: no two runs share one.
func runID() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// ScratchStore returns the store URL a run uses and a function that removes what the run made:
// a given store is kept; a scratch store is made by the backend (store.NewScratch) when none is
// given (SQLite, in a temporary directory) or when the given URL names a backend and no place
// ('sqlite:', 'sqlite:?synchronous=normal': a scratch store with those settings).
func ScratchStore(ctx context.Context, given string) (string, func(), error) {
	place := given
	switch rest, _ := strings.CutPrefix(given, store.Scheme(given)+":"); {
	case given == "":
		place = storeurl.DefaultPlace
	case store.Scheme(given) == "" || rest != "" && !strings.HasPrefix(rest, "?"):
		return given, func() {}, nil
	}
	sc, err := store.NewScratch(ctx, place, &store.ScratchConfig{Prefix: "latch_bench"})
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { sc.Close(context.WithoutCancel(ctx)) }
	u, err := sc.URL(ctx, "latch")
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return u, cleanup, nil
}

// Latency is the distribution of call latencies, in microseconds.
type Latency struct {
	P50Micros float64 `json:"p50_us"`
	P99Micros float64 `json:"p99_us"`
	MaxMicros float64 `json:"max_us"`
}

// latencyOf returns the distribution of lat, which it sorts. Empty: all zero.
func latencyOf(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	slices.Sort(lat)
	return Latency{
		P50Micros: micros(lat[len(lat)/2]),
		P99Micros: micros(lat[min(len(lat)-1, len(lat)*99/100)]),
		MaxMicros: micros(lat[len(lat)-1]),
	}
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
