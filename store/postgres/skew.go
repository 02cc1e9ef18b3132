package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/latchkit/latch/store"
)

// Clock skew. A lease is decided on the host's clock (the request's Now), while PostgreSQL
// stamps nothing latch decides on; yet hosts sharing one database whose clocks disagree decide
// each other's leases lapsed early or late. The database's clock is the one clock every host of
// a store can read, so the store compares the host's clock with it when it opens and when a
// write finds a lease lapsed, and reports a difference past the threshold: a slog warning and a
// clock_skew_detected event, once per episode (until a check finds the clocks agree again). The
// check changes no decision and no lease, and a failed check is logged, never returned.
const (
	// DefaultClockSkewThreshold is the skew reported when no threshold is configured.
	DefaultClockSkewThreshold = time.Second
	// MaxClockSkewThreshold is the largest threshold accepted: a guard's default lease (five
	// minutes). A skew as large as a lease decides leases wrongly before it could be reported.
	MaxClockSkewThreshold = 5 * time.Minute
	// skewLeaseEvery is the least time between two checks made because a lease lapsed, so that
	// a burst of lapses costs one query.
	skewLeaseEvery = 10 * time.Second
	// skewTimeout bounds one check.
	skewTimeout = 2 * time.Second
	// skewParam is the store URL parameter that sets the threshold.
	skewParam = "clock_skew_threshold"
)

// Where a clock skew check was made, the where of a clock_skew_detected event.
const (
	skewAtOpen  = "open"
	skewAtLease = "lease"
)

// checkSkewThreshold refuses a threshold detection cannot use: none turns detection off.
func checkSkewThreshold(d time.Duration) error {
	switch {
	case d <= 0:
		return fmt.Errorf("%s %s: want a duration above 0 (detection cannot be turned off)", skewParam, d)
	case d > MaxClockSkewThreshold:
		return fmt.Errorf("%s %s: at most %s, the default lease", skewParam, d, MaxClockSkewThreshold)
	}
	return nil
}

// skewWatch is a store's clock skew detection state.
type skewWatch struct {
	threshold time.Duration
	now       func() time.Time // the host's clock
	log       *slog.Logger

	mu        sync.Mutex
	lastLease time.Time // when the last lease-time check ran, by the process's monotonic clock
	episode   bool      // a skew past the threshold was reported and no check has cleared it
	logged    map[string]bool
}

// checkSkew compares the database's clock with the host's (where: skewAtOpen or skewAtLease)
// and reports a skew past the threshold that starts an episode. A lease-time check runs at most
// once per skewLeaseEvery.
func (s *Store) checkSkew(ctx context.Context, where string) {
	w := s.skew
	w.mu.Lock()
	defer w.mu.Unlock()
	if where == skewAtLease {
		if !w.lastLease.IsZero() && time.Since(w.lastLease) < skewLeaseEvery {
			return
		}
		w.lastLease = time.Now()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), skewTimeout)
	defer cancel()
	before := w.now()
	var db time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db); err != nil {
		w.logOnce("read", "clock skew check: the database clock is unreadable", "store", s.url, "where", where, "error", err)
		return
	}
	after := w.now()
	rtt := after.Sub(before)
	host := before.Add(rtt / 2)
	skew := host.Sub(db) // positive: the host is ahead of the database
	abs := skew
	if abs < 0 {
		abs = -abs
	}
	// The database read its clock somewhere within the round trip: only what exceeds the
	// threshold by more than half of it is surely skew.
	if abs-rtt/2 <= w.threshold {
		w.episode = false
		return
	}
	if w.episode {
		return
	}
	w.episode = true
	s.log.Warn("clock skew: the host's clock and the database's disagree", "store", s.url, "where", where,
		"skew", skew, "threshold", w.threshold, "host_time", host, "db_time", db)
	if s.readOnly {
		return
	}
	ev := store.NewEvent(store.EventClockSkewDetected, host, "", "", "", map[string]any{
		"db_time":      db.UTC().Format(time.RFC3339Nano),
		"host_time":    host.UTC().Format(time.RFC3339Nano),
		"skew_ms":      skew.Milliseconds(),
		"threshold_ms": w.threshold.Milliseconds(),
		"where":        where,
	})
	if err := s.LogEvents(ctx, []store.Event{ev}); err != nil {
		w.logOnce("write", "clock skew check: the clock_skew_detected event was not written", "store", s.url, "error", err)
	}
}

// logOnce logs a failed check once per kind of failure for the life of the store.
func (w *skewWatch) logOnce(kind, msg string, args ...any) {
	if w.logged[kind] {
		return
	}
	if w.logged == nil {
		w.logged = map[string]bool{}
	}
	w.logged[kind] = true
	w.log.Warn(msg, args...)
}
