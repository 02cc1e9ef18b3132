package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// TestPlanCharges: the first charge, in order, whose held amount plus its own would pass its
// limit refuses (exactly at the limit is admitted); one row per distinct (budget, metric), with
// the first charge's limit and window; held amounts that do not match the charges refuse.
func TestPlanCharges(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	hour := store.Charge{Budget: "g", Metric: "count", Amount: 1, Limit: 3, Window: time.Hour}
	day := store.Charge{Budget: "g", Metric: "count", Amount: 1, Limit: 10, Window: 24 * time.Hour}
	cents := store.Charge{Budget: "root", Metric: "cents", Amount: 400, Limit: 1000, Window: 24 * time.Hour}
	req := &store.ReserveRequest{Now: now, ActionID: "act_1", EffectKey: "k", Charges: []store.Charge{hour, day, cents}}
	for _, tc := range []struct {
		name   string
		held   []int64
		refuse *store.Charge
	}{
		{"all within", []int64{0, 0, 0}, nil},
		{"exactly to every limit", []int64{2, 9, 600}, nil},
		{"the hour over", []int64{3, 9, 600}, &hour},
		{"the day over", []int64{0, 10, 0}, &day},
		{"the parent over", []int64{0, 0, 601}, &cents},
		{"two over: the first reported", []int64{0, 10, 601}, &day},
		{"held past the limit (a limit lowered)", []int64{50, 0, 0}, &hour},
		{"too few held amounts", []int64{0, 0}, &hour},
		{"none read", nil, &hour},
	} {
		r, rows := store.PlanCharges(req, tc.held, 2)
		switch {
		case tc.refuse == nil && r != nil:
			t.Errorf("%s: PlanCharges = refused %+v, want admitted", tc.name, r)
		case tc.refuse != nil && (r == nil || r.Reason != store.ReasonBudgetExhausted || *r.Charge != *tc.refuse || rows != nil):
			t.Errorf("%s: PlanCharges = %+v, %v; want refused by %+v and no rows", tc.name, r, rows, *tc.refuse)
		case tc.refuse == nil:
			want := []store.ChargeRecord{
				{Budget: "g", Metric: "count", Amount: 1, Limit: 3, Window: time.Hour, EffectKey: "k", Attempt: 2, ActionID: "act_1", ConsumedAt: now},
				{Budget: "root", Metric: "cents", Amount: 400, Limit: 1000, Window: 24 * time.Hour, EffectKey: "k", Attempt: 2, ActionID: "act_1", ConsumedAt: now},
			}
			if len(rows) != len(want) || rows[0] != want[0] || rows[1] != want[1] {
				t.Errorf("%s: rows = %+v, want %+v", tc.name, rows, want)
			}
		}
	}
	r, _ := store.PlanCharges(req, []int64{0, 0, 999}, 1)
	if r == nil || !strings.Contains(r.Detail, "root") || !strings.Contains(r.Detail, "cents") || !strings.Contains(r.Detail, "P1D") ||
		strings.Contains(r.Detail, "999") || strings.Contains(r.Detail, "1000") || strings.Contains(r.Detail, "400") {
		t.Errorf("refusal detail = %q, want the budget, metric and window and no amount", r.Detail)
	}
}

// TestChargeChange: a write releases its attempt's charges exactly when it makes the attempt
// failed, holds them again when a failed attempt is resolved otherwise, and does nothing else.
func TestChargeChange(t *testing.T) {
	t.Parallel()
	eff := func(s store.State, attempt int) *store.Effect {
		return &store.Effect{Key: "k", State: s, Attempt: attempt}
	}
	for _, tc := range []struct {
		name       string
		prev, next *store.Effect
		want       int
	}{
		{"reserved", nil, eff(store.Executing, 1), 0},
		{"not executed", eff(store.Executing, 1), eff(store.Failed, 1), -1},
		{"committed", eff(store.Executing, 1), eff(store.Committed, 1), 0},
		{"ambiguous", eff(store.Executing, 1), eff(store.Ambiguous, 1), 0},
		{"resolved failed", eff(store.Ambiguous, 1), eff(store.Failed, 1), -1},
		{"resolved committed", eff(store.Ambiguous, 1), eff(store.Committed, 1), 0},
		{"a conflict marked on a failed attempt", eff(store.Failed, 1), eff(store.Failed, 1), 0},
		{"a conflict resolved committed", eff(store.Failed, 1), eff(store.Committed, 1), +1},
		{"renewed after failed", eff(store.Failed, 1), eff(store.Executing, 2), 0},
	} {
		var w *store.EffectWrite
		if tc.next != nil {
			w = &store.EffectWrite{Prev: tc.prev, Next: *tc.next}
		}
		if got := store.ChargeChange(w); got != tc.want {
			t.Errorf("%s: ChargeChange = %d, want %d", tc.name, got, tc.want)
		}
	}
	if store.ChargeChange(nil) != 0 {
		t.Error("ChargeChange(nil) != 0")
	}
}

// TestWindowText: windows are written as ISO 8601 durations and read back; years, months and
// malformed text are refused.
func TestWindowText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		text string
	}{
		{24 * time.Hour, "P1D"},
		{30 * 24 * time.Hour, "P30D"},
		{time.Hour, "PT1H"},
		{90 * time.Minute, "PT1H30M"},
		{36 * time.Hour, "P1DT12H"},
		{500 * time.Millisecond, "PT0.5S"},
		{time.Hour + time.Second, "PT1H1S"},
	} {
		if got := store.FormatWindow(tc.d); got != tc.text {
			t.Errorf("FormatWindow(%s) = %q, want %q", tc.d, got, tc.text)
		}
		if got, err := store.ParseWindow(tc.text); err != nil || got != tc.d {
			t.Errorf("ParseWindow(%q) = %s, %v; want %s", tc.text, got, err, tc.d)
		}
	}
	for text, want := range map[string]time.Duration{"PT24H": 24 * time.Hour, "P1W": 7 * 24 * time.Hour, "PT90M": 90 * time.Minute} {
		if got, err := store.ParseWindow(text); err != nil || got != want {
			t.Errorf("ParseWindow(%q) = %s, %v; want %s", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "P", "PT", "1D", "P1Y", "P1M", "PT1D", "P1H", "P-1D", "P0D", "PT1H1H", "P1DT", "P99999999999999999D", "P1D2"} {
		if got, err := store.ParseWindow(bad); err == nil {
			t.Errorf("ParseWindow(%q) = %s, want an error", bad, got)
		}
	}
}
