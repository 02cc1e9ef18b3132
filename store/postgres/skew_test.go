package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// shiftedClock is a host clock offset from the real one by a shift the test changes.
type shiftedClock struct {
	mu    sync.Mutex
	shift time.Duration
}

func (c *shiftedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.shift)
}

func (c *shiftedClock) set(d time.Duration) {
	c.mu.Lock()
	c.shift = d
	c.mu.Unlock()
}

// syncBuffer is a bytes.Buffer a logger may write from any goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// skewEvents returns the store's clock_skew_detected events.
func skewEvents(t *testing.T, st *Store) []*store.Event {
	t.Helper()
	evs, err := st.Events(t.Context(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*store.Event
	for _, e := range evs {
		if e.Kind == store.EventClockSkewDetected {
			out = append(out, e)
		}
	}
	return out
}

// lapseLease reserves key with a one-second lease and, two seconds later by the request's clock,
// finds the lease lapsed and has the record written ambiguous: by a contending reservation
// (how "reserve"), an approval request's probe (how "probe") or the sweeper (how "sweep").
func lapseLease(t *testing.T, st *Store, how, key string) {
	t.Helper()
	ctx := t.Context()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	req := func(at time.Time, id string) *store.ReserveRequest {
		return &store.ReserveRequest{Now: at, ActionID: id, Action: "billing.charge", ActionHash: "sha256:" + strings.Repeat("a", 64),
			EffectKey: key, Lease: time.Second}
	}
	first := "act_" + randomHex(16)
	if res, err := st.Reserve(ctx, req(now, first)); err != nil || !res.Reserved {
		t.Fatalf("first reserve = %+v, %v", res, err)
	}
	later := now.Add(2 * time.Second)
	if how == "sweep" {
		eff, _, err := st.LapseLease(ctx, &store.LapseRequest{Now: later, Key: key, ActionID: first, Attempt: 1})
		if err != nil || eff.State != store.Ambiguous {
			t.Fatalf("lapse lease = %+v, %v; want the record ambiguous", eff, err)
		}
		return
	}
	if how == "probe" {
		hash := "sha256:" + strings.Repeat("a", 64)
		a := &store.Approval{ID: "apr_" + randomHex(16), Status: store.Pending, ActionHash: hash, ActionName: "billing.charge",
			Action: json.RawMessage(`{"schema":"latch.action/v1","name":"billing.charge"}`), Agent: "bot",
			PolicyHash: "sha256:" + strings.Repeat("b", 64), CreatedAt: later, ExpiresAt: later.Add(time.Hour)}
		res, err := st.CreateApproval(ctx, &store.ApprovalRequest{Now: later, Approval: a, Probe: req(later, "act_"+randomHex(16))})
		if err != nil || res.Refused == nil {
			t.Fatalf("approval probe after the lease = %+v, %v; want the probe refused", res, err)
		}
		if eff, err := st.Effect(ctx, key); err != nil || eff.State != store.Ambiguous {
			t.Fatalf("effect after the probe = %+v, %v; want ambiguous", eff, err)
		}
		return
	}
	res, err := st.Reserve(ctx, req(later, "act_"+randomHex(16)))
	if err != nil || res.Reserved || res.Effect == nil || res.Effect.State != store.Ambiguous {
		t.Fatalf("reserve after the lease = %+v, %v; want a refusal with the record ambiguous", res, err)
	}
}

// resetLeaseLimit lets the next lease-time check run at once (the rate limit would hold it back
// for skewLeaseEvery).
func resetLeaseLimit(st *Store) {
	st.skew.mu.Lock()
	st.skew.lastLease = time.Time{}
	st.skew.mu.Unlock()
}

// TestClockSkewAtOpen: a host clock 5s ahead of the database's records one clock_skew_detected
// event at open with what was measured; a host clock within the threshold records none; a
// larger threshold (the URL parameter) is not crossed by the same 5s.
func TestClockSkewAtOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ahead := &shiftedClock{shift: 5 * time.Second}
	var logs syncBuffer
	st, err := Open(ctx, newSchemaURL(t), &Config{Now: ahead.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n := strings.Count(logs.String(), "clock skew: the host's clock and the database's disagree"); n != 1 {
		t.Errorf("%d clock skew warnings logged, want 1: %s", n, logs.String())
	}
	evs := skewEvents(t, st)
	if len(evs) != 1 {
		t.Fatalf("%d clock_skew_detected events at open with the host 5s ahead, want 1", len(evs))
	}
	var data map[string]any
	if err := json.Unmarshal(evs[0].Payload, &data); err != nil {
		t.Fatal(err)
	}
	if data["where"] != "open" || data["threshold_ms"] != float64(1000) {
		t.Errorf("event data = %v, want where open, threshold_ms 1000", data)
	}
	if ms, _ := data["skew_ms"].(float64); ms < 4000 || ms > 6000 {
		t.Errorf("skew_ms = %v, want about 5000 (the host ahead)", data["skew_ms"])
	}
	for _, k := range []string{"db_time", "host_time"} {
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(data[k])); err != nil {
			t.Errorf("%s = %v: %v", k, data[k], err)
		}
	}

	// Opening again, the clocks agreeing: nothing more.
	in := &shiftedClock{shift: 200 * time.Millisecond}
	url := newSchemaURL(t)
	st2, err := Open(ctx, url, &Config{Now: in.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if evs := skewEvents(t, st2); len(evs) != 0 {
		t.Fatalf("clock_skew_detected within the threshold: %+v", evs)
	}
	// A threshold of 10s from the URL: 5s ahead is within it.
	st3, err := Open(ctx, withParam(url, skewParam, "10s"), &Config{Now: ahead.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer st3.Close()
	if evs := skewEvents(t, st3); len(evs) != 0 {
		t.Fatalf("clock_skew_detected within a 10s threshold: %+v", evs)
	}
}

// TestClockSkewAtLeaseLapse: a store opened with agreeing clocks records nothing; once the
// host's clock runs 5s ahead, the next lapsed lease records one event (where lease), whether a
// contending reservation, an approval request's probe or the sweeper found it, and the lapse itself is decided as before.
// Within the threshold, a lapse records none; within one episode, a second lapse none either.
func TestClockSkewAtLeaseLapse(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"reserve", "probe", "sweep"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			clk := &shiftedClock{}
			st, err := Open(t.Context(), newSchemaURL(t), &Config{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			lapseLease(t, st, how, "charge:within")
			if evs := skewEvents(t, st); len(evs) != 0 {
				t.Fatalf("clock_skew_detected at a lapse within the threshold: %+v", evs)
			}
			clk.set(5 * time.Second)
			resetLeaseLimit(st)
			lapseLease(t, st, how, "charge:ahead")
			evs := skewEvents(t, st)
			if len(evs) != 1 {
				t.Fatalf("%d clock_skew_detected events after a lapse with the host 5s ahead, want 1", len(evs))
			}
			var data map[string]any
			if err := json.Unmarshal(evs[0].Payload, &data); err != nil {
				t.Fatal(err)
			}
			if data["where"] != "lease" {
				t.Errorf("where = %v, want lease", data["where"])
			}
			if evs[0].ActionID != "" || evs[0].EffectKey != "" {
				t.Errorf("event names action %q, effect %q; want neither", evs[0].ActionID, evs[0].EffectKey)
			}
			// The same episode: another lapse (past the rate limit) records nothing more.
			resetLeaseLimit(st)
			lapseLease(t, st, how, "charge:again")
			if evs := skewEvents(t, st); len(evs) != 1 {
				t.Fatalf("%d events after a second lapse in one episode, want 1", len(evs))
			}
			// The clocks agree again, the episode ends; a new skew is a new episode.
			clk.set(0)
			resetLeaseLimit(st)
			lapseLease(t, st, how, "charge:agree")
			clk.set(-5 * time.Second)
			resetLeaseLimit(st)
			lapseLease(t, st, how, "charge:behind")
			evs = skewEvents(t, st)
			if len(evs) != 2 {
				t.Fatalf("%d events after a second episode, want 2", len(evs))
			}
			if err := json.Unmarshal(evs[1].Payload, &data); err != nil {
				t.Fatal(err)
			}
			if ms, _ := data["skew_ms"].(float64); ms > -4000 || ms < -6000 {
				t.Errorf("skew_ms = %v, want about -5000 (the host behind)", data["skew_ms"])
			}
		})
	}
}

// TestClockSkewThresholdRefused: no threshold turns detection off, and none above the default
// lease is accepted, from the URL or Config; the refusal names the parameter.
func TestClockSkewThresholdRefused(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0s", "-1s", "6m", "soon"} {
		_, err := parseURL("postgres://h/db?" + skewParam + "=" + v)
		if err == nil || !strings.Contains(err.Error(), skewParam) {
			t.Errorf("%s=%s: %v, want a refusal naming %s", skewParam, v, err, skewParam)
		}
	}
	if loc, err := parseURL("postgres://h/db?sslmode=disable&" + skewParam + "=2s"); err != nil || loc.skew != 2*time.Second || strings.Contains(loc.pgURL, skewParam) {
		t.Errorf("2s: %+v, %v; want the threshold kept and the parameter removed from the pgx URL", loc, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if _, err := Open(ctx, "postgres://127.0.0.1:1/db", &Config{ClockSkewThreshold: 10 * time.Minute}); err == nil || !strings.Contains(err.Error(), "at most 5m0s") {
		t.Errorf("Config.ClockSkewThreshold 10m: %v, want a refusal", err)
	}
}
