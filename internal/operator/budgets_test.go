package operator_test

import (
	"testing"
	"time"

	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/store"
)

// TestHeldCountsTheWindow: a budget's consumption is the unreleased charges of its metric
// consumed in (now − window, now] — a charge at the window's start has left it, one at now
// counts, a released one never does, another metric's never does.
func TestHeldCountsTheWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	w := 24 * time.Hour
	row := func(key string, metric string, amount int64, at time.Time, released bool) *store.ChargeRecord {
		r := &store.ChargeRecord{Budget: "g", Metric: metric, Amount: amount, EffectKey: key, Attempt: 1, ConsumedAt: at}
		if released {
			r.ReleasedAt = at.Add(time.Minute)
		}
		return r
	}
	rows := []*store.ChargeRecord{
		row("at-start", "count", 1, now.Add(-w), false),
		row("inside", "count", 1, now.Add(-w+time.Millisecond), false),
		row("released", "count", 1, now.Add(-time.Hour), true),
		row("other-metric", "amount", 500, now.Add(-time.Hour), false),
		row("at-now", "count", 1, now, false),
		row("future", "count", 1, now.Add(time.Millisecond), false),
	}
	var got []string
	for _, r := range operator.Held(rows, "count", w, now) {
		got = append(got, r.EffectKey)
	}
	if len(got) != 2 || got[0] != "inside" || got[1] != "at-now" {
		t.Errorf("Held = %v, want [inside at-now]", got)
	}
}

func TestRatio(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		consumed, limit int64
		want            float64
	}{{0, 10, 0}, {8, 10, 0.8}, {10, 10, 1}, {12, 10, 1.2}, {0, 0, 1}} {
		if got := operator.Ratio(tc.consumed, tc.limit); got != tc.want {
			t.Errorf("Ratio(%d, %d) = %v, want %v", tc.consumed, tc.limit, got, tc.want)
		}
	}
}
