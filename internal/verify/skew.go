package verify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/postgres"
)

// skewShift is how far G13 moves a host's clock from the database's: well past the default
// threshold (1s) and any round trip to a server verify runs against.
const skewShift = 5 * time.Second

// skewAction names G13's reservations: made on the store directly, as the guard makes them, on
// keys of verify's own.
const skewAction = "latch-verify.clock-skew"

// hostClock is a host's wall clock moved by a shift the scenario sets: the database's clock is
// real, so the host's must be too.
type hostClock struct {
	mu    sync.Mutex
	shift time.Duration
}

func (c *hostClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.shift)
}

func (c *hostClock) set(d time.Duration) {
	c.mu.Lock()
	c.shift = d
	c.mu.Unlock()
}

// hasOwnClock reports whether the backend of scheme keeps a clock of its own that a host's can
// disagree with.
func hasOwnClock(scheme string) bool {
	return scheme == "postgres" || scheme == "postgresql"
}

// g13: skew between the store's clock and a host's is named; the control stays silent when
// clocks agree.
//
// On a backend with its own clock (PostgreSQL), three scratch stores are opened with an injected
// host clock (postgres.Config.Now) and the default threshold. One opened with the host 5s ahead
// of the database must record one clock_skew_detected event where open, its skew about 5s. One
// opened with the clocks agreeing must record none, neither at open nor when a lease lapses (a
// reservation whose lease has lapsed made ambiguous by a second). One opened with the clocks
// agreeing whose host clock then moves 5s behind must record one where lease when its next
// lease lapses, and the lapse must be decided as without skew (the record ambiguous, the second
// reservation refused). The reservations are made on the store directly, as the guard makes
// them, with verify's own action and keys: what is graded is the store's comparison of clocks,
// whatever the policy.
func (r *runner) g13(ctx context.Context) (outcome, error) {
	if !hasOwnClock(r.backend) {
		return notApplicable(fmt.Sprintf("the %s backend has no clock of its own: the store reads the host's clock only, so there is no second clock to disagree with", r.backend)), nil
	}
	if r.dry {
		return outcome{}, errDry
	}
	threshold := postgres.DefaultClockSkewThreshold
	if r.faults[faultSkewThresholdUnit] {
		threshold = postgres.MaxClockSkewThreshold
	}
	open := func(name string, shift time.Duration) (*postgres.Store, *hostClock, error) {
		r.envs++
		u, err := r.sc.location(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		hc := &hostClock{shift: shift}
		st, err := postgres.Open(ctx, u, &postgres.Config{Now: hc.Now, ClockSkewThreshold: threshold})
		if err != nil {
			return nil, nil, fmt.Errorf("open scratch store: %w", err)
		}
		return st, hc, nil
	}

	ahead, _, err := open("g13-ahead", skewShift)
	if err != nil {
		return outcome{}, err
	}
	defer ahead.Close()
	atOpen, err := skewEvents(ctx, ahead)
	if err != nil {
		return outcome{}, err
	}

	agree, _, err := open("g13-agree", 0)
	if err != nil {
		return outcome{}, err
	}
	defer agree.Close()
	quietOpen, err := skewEvents(ctx, agree)
	if err != nil {
		return outcome{}, err
	}
	quietLapse, err := lapseLease(ctx, agree, r.start)
	if err != nil {
		return outcome{}, err
	}
	quiet, err := skewEvents(ctx, agree)
	if err != nil {
		return outcome{}, err
	}

	later, hc, err := open("g13-later", 0)
	if err != nil {
		return outcome{}, err
	}
	defer later.Close()
	beforeShift, err := skewEvents(ctx, later)
	if err != nil {
		return outcome{}, err
	}
	hc.set(-skewShift)
	skewedLapse, err := lapseLease(ctx, later, r.start)
	if err != nil {
		return outcome{}, err
	}
	atLease, err := skewEvents(ctx, later)
	if err != nil {
		return outcome{}, err
	}

	detail := fmt.Sprintf("threshold %s; host %s ahead at open: %s; clocks agreeing: %s at open, lease lapsed (%s): %s in all; clocks agreeing at open (%s), then the host %s behind, lease lapsed (%s): %s",
		threshold, skewShift, describeSkew(atOpen), describeSkew(quietOpen), quietLapse, describeSkew(quiet),
		describeSkew(beforeShift), skewShift, skewedLapse, describeSkew(atLease))
	const lapsed = "record ambiguous, second reservation refused"
	switch {
	case len(quiet) != 0 || len(beforeShift) != 0 || quietLapse != lapsed:
		return controlFailed("", detail), nil
	case skewedLapse != lapsed:
		return fail("", "the skew changed how the lapsed lease was decided", detail), nil
	case !namesSkew(atOpen, "open", skewShift):
		return fail("", "the host's clock 5s ahead of the database's at open was not named", detail), nil
	case !namesSkew(atLease, "lease", -skewShift):
		return fail("", "the host's clock 5s behind the database's when a lease lapsed was not named", detail), nil
	}
	return pass("", detail), nil
}

// skewEvent is what a clock_skew_detected event names.
type skewEvent struct {
	Where  string `json:"where"`
	SkewMS int64  `json:"skew_ms"`
}

// skewEvents returns the clock_skew_detected events of st.
func skewEvents(ctx context.Context, st store.Store) ([]skewEvent, error) {
	evs, err := st.Events(ctx, store.EventFilter{})
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	var out []skewEvent
	for _, e := range evs {
		if e.Kind != store.EventClockSkewDetected {
			continue
		}
		var se skewEvent
		if err := json.Unmarshal(e.Payload, &se); err != nil {
			return nil, fmt.Errorf("read event %d: %w", e.ID, err)
		}
		out = append(out, se)
	}
	return out, nil
}

func describeSkew(evs []skewEvent) string {
	if len(evs) == 0 {
		return "no clock_skew_detected event"
	}
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = fmt.Sprintf("clock_skew_detected where %s, skew_ms %d", e.Where, e.SkewMS)
	}
	return strings.Join(parts, "; ")
}

// namesSkew reports whether evs is exactly one event, where where, measuring about want (the
// host ahead: positive) — within a second, the round trip included.
func namesSkew(evs []skewEvent, where string, want time.Duration) bool {
	if len(evs) != 1 || evs[0].Where != where {
		return false
	}
	d := time.Duration(evs[0].SkewMS)*time.Millisecond - want
	return d > -time.Second && d < time.Second
}

// lapseLease reserves a key of verify's own with a one-second lease and, two seconds later by
// the requests' clock, reserves it again: the lapsed lease must make the record ambiguous and
// the second reservation be refused. It returns what happened, in words.
func lapseLease(ctx context.Context, st store.Store, at time.Time) (string, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := "latch-verify:skew:" + hex.EncodeToString(b[:])
	hash := "sha256:" + strings.Repeat("0", 64)
	req := func(now time.Time) *store.ReserveRequest {
		return &store.ReserveRequest{Now: now, ActionID: newActionID(), Action: skewAction, ActionHash: hash, EffectKey: key, Lease: time.Second}
	}
	first, err := st.Reserve(ctx, req(at))
	if err != nil {
		return "", fmt.Errorf("reserve %s: %w", key, err)
	}
	if !first.Reserved {
		return "first reservation refused", nil
	}
	second, err := st.Reserve(ctx, req(at.Add(2*time.Second)))
	if err != nil {
		return "", fmt.Errorf("reserve %s again: %w", key, err)
	}
	switch {
	case second.Reserved:
		return "second reservation admitted", nil
	case second.Effect == nil || second.Effect.State != store.Ambiguous:
		return "record not ambiguous", nil
	}
	return "record ambiguous, second reservation refused", nil
}

func newActionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "act_" + hex.EncodeToString(b[:])
}
