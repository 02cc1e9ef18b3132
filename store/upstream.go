package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A gateway that pins an upstream's tools (docs/gateway.md#pinning) records in the store when a
// pinned tool's definition, as it lists it, stops matching its pin — a drift — and when it
// matches again. Every gateway process and `latch serve` sharing the store read the same record:
// a drift is alerted once, however many processes see it, and the console shows it until a
// gateway lists the tool as pinned again (after an operator re-pins it and restarts the
// gateway, or the upstream reverts its change).

// Pin event kinds, written under the ActionID UpstreamPinsID. Their payload is an UpstreamPin.
const (
	// EventUpstreamDrifted: a gateway listed a pinned tool otherwise than its pin, or not at all;
	// it refuses the tool's calls (upstream_mismatch, upstream_unverified) from then on.
	EventUpstreamDrifted = "upstream_drifted"
	// EventUpstreamPinMatched: after a drift, a gateway listed the tool as pinned again.
	EventUpstreamPinMatched = "upstream_pin_matched"
)

// UpstreamPinsID is the ActionID of every pin event: they belong to no call, and one filter
// (EventFilter{ActionID: UpstreamPinsID}) reads them all.
const UpstreamPinsID = "gateway:pins"

// UpstreamPin is the payload of a pin event: which tool of which upstream (by the gateway's
// alias and the upstream's own tool name), its pinned hash, and the hash observed ("" when the
// upstream did not list it).
type UpstreamPin struct {
	Upstream string `json:"upstream"`
	Tool     string `json:"tool"`
	Pinned   string `json:"pinned"`
	Observed string `json:"observed"`
}

// UpstreamDrift is a drift still open: the last pin event of its tool is EventUpstreamDrifted.
type UpstreamDrift struct {
	UpstreamPin
	EventID int64
	At      time.Time // when it was recorded
}

// NewPinEvent is a pin event of kind (EventUpstreamDrifted or EventUpstreamPinMatched).
func NewPinEvent(kind string, now time.Time, p UpstreamPin) Event {
	return NewEvent(kind, now, UpstreamPinsID, "", "", map[string]any{
		"upstream": p.Upstream, "tool": p.Tool, "pinned": p.Pinned, "observed": p.Observed})
}

// PinStates folds pin events, in the order written, into the last event of each tool: upstream
// and tool joined by a NUL byte → that event's kind and payload. Events of other kinds, and
// payloads that do not read, are skipped.
func PinStates(events []*Event) map[string]PinState {
	out := map[string]PinState{}
	for _, e := range events {
		if e.Kind != EventUpstreamDrifted && e.Kind != EventUpstreamPinMatched {
			continue
		}
		var p UpstreamPin
		if json.Unmarshal(e.Payload, &p) != nil || p.Upstream == "" || p.Tool == "" {
			continue
		}
		out[p.Upstream+"\x00"+p.Tool] = PinState{Kind: e.Kind, Pin: p, EventID: e.ID, At: e.Time}
	}
	return out
}

// PinState is the last pin event of one tool.
type PinState struct {
	Kind    string // EventUpstreamDrifted or EventUpstreamPinMatched
	Pin     UpstreamPin
	EventID int64
	At      time.Time
}

// PinEvents reads every pin event of st, in the order written.
func PinEvents(ctx context.Context, st Store) ([]*Event, error) {
	evs, err := st.Events(ctx, EventFilter{ActionID: UpstreamPinsID})
	if err != nil {
		return nil, fmt.Errorf("read the upstream pin events: %w", err)
	}
	slices.SortStableFunc(evs, func(a, b *Event) int { return cmp.Compare(a.ID, b.ID) })
	return evs, nil
}

// OpenDrifts returns the drifts of st still open, by upstream then tool.
func OpenDrifts(ctx context.Context, st Store) ([]UpstreamDrift, error) {
	evs, err := PinEvents(ctx, st)
	if err != nil {
		return nil, err
	}
	var out []UpstreamDrift
	for _, s := range PinStates(evs) {
		if s.Kind == EventUpstreamDrifted {
			out = append(out, UpstreamDrift{UpstreamPin: s.Pin, EventID: s.EventID, At: s.At})
		}
	}
	slices.SortFunc(out, func(a, b UpstreamDrift) int {
		if c := strings.Compare(a.Upstream, b.Upstream); c != 0 {
			return c
		}
		return strings.Compare(a.Tool, b.Tool)
	})
	return out, nil
}
