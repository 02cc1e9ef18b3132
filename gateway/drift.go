package gateway

import (
	"context"

	"github.com/latchkit/latch/store"
)

// recordPins records in the store what changed of the pinned tools just listed (each row of
// listed: a pinned tool, its pin, and what was observed): a tool that no longer matches its pin
// and whose last pin event is not this same drift gets EventUpstreamDrifted, handed to
// Config.Alerts; a tool that matches again after a drift gets EventUpstreamPinMatched. Reading
// the store first makes a drift one event and one alert whatever the number of gateway processes
// and restarts that see it: two processes that list the same drift at the same instant may
// each record it (within one process, recordMu serializes the listings). A store that cannot be read or written is logged: the refusal of the tool's
// calls does not depend on it.
func (g *Gateway) recordPins(ctx context.Context, listed []store.UpstreamPin) {
	st := g.cfg.Guard.Store()
	logs, ok := st.(interface {
		LogEvents(context.Context, []store.Event) error
	})
	if !ok {
		return
	}
	g.recordMu.Lock()
	defer g.recordMu.Unlock()
	evs, err := store.PinEvents(ctx, st)
	if err != nil {
		g.cfg.Logger.Error("latch gateway: the pin drift was not recorded", "err", err)
		return
	}
	states := store.PinStates(evs)
	now := g.cfg.Now()
	var write []store.Event
	for _, p := range listed {
		last, seen := states[p.Upstream+"\x00"+p.Tool]
		drifted := seen && last.Kind == store.EventUpstreamDrifted
		switch {
		case p.Observed != p.Pinned && !(drifted && last.Pin == p):
			write = append(write, store.NewPinEvent(store.EventUpstreamDrifted, now, p))
		case p.Observed == p.Pinned && drifted:
			write = append(write, store.NewPinEvent(store.EventUpstreamPinMatched, now, p))
		}
	}
	if len(write) == 0 {
		return
	}
	if err := logs.LogEvents(ctx, write); err != nil {
		g.cfg.Logger.Error("latch gateway: the pin drift was not recorded", "err", err)
		return
	}
	if g.cfg.Alerts == nil {
		return
	}
	for _, e := range write {
		if e.Kind != store.EventUpstreamDrifted {
			continue
		}
		if err := g.cfg.Alerts.Event(ctx, e); err != nil {
			g.cfg.Logger.Error("latch gateway: the pin drift alert was not queued", "err", err)
		}
	}
}
