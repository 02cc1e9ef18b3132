// Package groupcommit holds what the stores' group commit shares: how a leader decides how long
// to wait before it takes the queued writes.
package groupcommit

import (
	"sync/atomic"
	"time"
)

// Window is how long a leader waits at most for the writes it expects, and Gap how long it
// waits after the last write arrived (or after it began waiting) for the next one. A leader
// therefore waits as long as the writes it expects keep arriving, and gives up soon once they
// stop: a load that shrinks costs one Gap, not one Window. On two CPUs, the eight callers one
// batch answers need more than 200 µs between them to queue their next writes; a fixed 200 µs
// window cut batches short (0.29–0.34 commits a call on SQLite with 8 workers), this one fills
// them (0.25–0.26) and takes some 6 % less CPU a call (docs/performance.md).
const (
	Window = 1500 * time.Microsecond
	Gap    = 600 * time.Microsecond
)

// Gatherer makes a leader wait for the writes its predecessor's batch suggests are coming.
//
// When writes are in flight together, the callers one batch answers queue their next writes just
// after it commits — by which time the next batch has already started without them — so the
// callers split into two groups whose batches alternate at half the size. A leader that finds
// fewer writes queued than the last batch held therefore waits for them: until they are queued,
// until no write has arrived for gap, or until window has passed, whichever comes first. A lone
// writer (a last batch of one) never waits, and a shrinking load costs one gap at most: the
// batch that waited in vain sets the next expectation.
type Gatherer struct {
	window  time.Duration
	gap     time.Duration
	arrived chan struct{}
	last    atomic.Int64
}

// New returns a Gatherer that waits at most window in all and gap after the last arrival.
func New(window, gap time.Duration) *Gatherer {
	return &Gatherer{window: window, gap: min(gap, window), arrived: make(chan struct{}, 1)}
}

// Arrived says that a write was queued.
func (g *Gatherer) Arrived() {
	select {
	case g.arrived <- struct{}{}:
	default:
	}
}

// Took records the size of the batch a leader took.
func (g *Gatherer) Took(n int) { g.last.Store(int64(n)) }

// Wait returns once queued() reports as many writes as the last batch held, once no write has
// arrived for the gap, or after the window. queued is called with no lock held by Wait; it takes
// whatever lock guards the queue.
func (g *Gatherer) Wait(queued func() int) {
	want := int(g.last.Load())
	if want <= 1 || queued() >= want {
		return
	}
	end := time.Now().Add(g.window)
	t := time.NewTimer(g.gap)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return
		case <-g.arrived:
			if queued() >= want {
				return
			}
			left := time.Until(end)
			if left <= 0 {
				return
			}
			t.Reset(min(g.gap, left))
		}
	}
}
