package latch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch/store"
)

// SweepReport is what one Sweep wrote.
type SweepReport struct {
	Lapsed  []string // effect keys whose lapsed lease it wrote ambiguous
	Expired []string // approval requests it wrote expired
}

// Sweep settles what time alone ended, so that it is seen — and alerted on, by a sink — without
// waiting for the next caller: every effect executing under a lease that lapsed is written
// ambiguous (as a reservation meeting it would write it; its holder may still report its own
// outcome), and every approval request, pending or granted, whose expiry passed is written
// expired. Each is one compare-and-set write with its event, so any number of processes may
// sweep one store: one of them writes each, the others skip it. `latch serve --sweep` calls it
// periodically. The store must implement store.Sweeper (both built-in stores do).
func (g *Guard) Sweep(ctx context.Context) (*SweepReport, error) {
	sw, ok := g.store.(store.Sweeper)
	if !ok {
		return nil, fmt.Errorf("latch: sweep: store %T cannot sweep", g.store)
	}
	rep := &SweepReport{}
	effects, err := g.store.Effects(ctx, store.EffectFilter{State: store.Executing})
	if err != nil {
		return rep, wrapOp("sweep", err)
	}
	var errs []error
	for _, e := range effects {
		now := g.cfg.Now()
		if !store.LeaseLapsed(e, now) {
			continue
		}
		t0 := time.Now()
		_, evs, err := sw.LapseLease(ctx, &store.LapseRequest{Now: now, Key: e.Key, ActionID: e.ActionID, Attempt: e.Attempt})
		g.obs.storeTransaction("sweep_lease", t0, err)
		switch {
		case errors.Is(err, store.ErrNothingToSweep):
		case err != nil:
			errs = append(errs, err)
		default:
			rep.Lapsed = append(rep.Lapsed, e.Key)
			g.emit(ctx, nil, evs)
		}
	}
	for _, status := range []store.ApprovalStatus{store.Pending, store.Granted} {
		list, err := g.store.Approvals(ctx, store.ApprovalFilter{Status: status})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, a := range list {
			now := g.cfg.Now()
			if now.Before(a.ExpiresAt) {
				continue
			}
			t0 := time.Now()
			_, evs, err := sw.ExpireApproval(ctx, &store.ExpireRequest{Now: now, ID: a.ID})
			g.obs.storeTransaction("sweep_approval", t0, err)
			switch {
			case errors.Is(err, store.ErrNothingToSweep):
			case err != nil:
				errs = append(errs, err)
			default:
				rep.Expired = append(rep.Expired, a.ID)
				g.emit(ctx, nil, evs)
			}
		}
	}
	if len(errs) > 0 {
		return rep, wrapOp("sweep", errors.Join(errs...))
	}
	return rep, nil
}
