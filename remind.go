package latch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// sweepNudges reminds the approvers of every pending request that waited its action's
// remind_after, and escalates every one that waited escalate_after, each once across every
// sweeper of the store (store.Nudger). Once a request is due for escalation its reminder is no
// longer sent: a sweeper that was down through both moments sends the escalation alone.
func (g *Guard) sweepNudges(ctx context.Context, rep *SweepReport) error {
	pol := g.current()
	if !remindsAny(pol) {
		return nil
	}
	nd, ok := g.store.(store.Nudger)
	if !ok {
		return fmt.Errorf("remind: store %T records no reminders", g.store)
	}
	list, err := g.store.Approvals(ctx, store.ApprovalFilter{Status: store.Pending})
	if err != nil {
		return err
	}
	var errs []error
	for _, a := range list {
		if ctx.Err() != nil {
			break
		}
		req := nudgeDue(pol.ApproversFor(a.ActionName), a, g.cfg.Now())
		if req == nil {
			continue
		}
		done, err := g.nudged(ctx, a.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if slices.Contains(done, store.NudgeEventKind(req.Kind)) || slices.Contains(done, store.EventApprovalEscalated) {
			continue // recorded already, by this sweeper or another: the store would refuse it
		}
		req.Sweeper = g.hooks.name()
		t0 := time.Now()
		_, evs, err := nd.NudgeApproval(ctx, req)
		g.obs.storeTransaction("nudge_approval", t0, err)
		switch {
		case errors.Is(err, store.ErrNothingToSweep):
		case err != nil:
			errs = append(errs, err)
		default:
			if req.Kind == store.NudgeEscalate {
				rep.Escalated = append(rep.Escalated, a.ID)
			} else {
				rep.Reminded = append(rep.Reminded, a.ID)
			}
			g.emit(ctx, nil, evs)
		}
	}
	return errors.Join(errs...)
}

// remindsAny reports whether any action of pol reminds or escalates, so that a policy without
// them costs a sweep nothing.
func remindsAny(pol *policy.Policy) bool {
	if pol == nil {
		return false
	}
	for _, a := range pol.Actions {
		if r := a.Approvers; r != nil && (r.RemindAfter > 0 || r.EscalateAfter > 0) {
			return true
		}
	}
	return false
}

// nudgeDue is the nudge a pending request a is due for at now under its action's rule, nil when
// none: the escalation once escalate_after has passed, else the reminder once remind_after has.
func nudgeDue(rule policy.ApproverRule, a *store.Approval, now time.Time) *store.NudgeRequest {
	if a.Status != store.Pending || !now.Before(a.ExpiresAt) {
		return nil
	}
	switch {
	case rule.Escalated(a.CreatedAt, now):
		return &store.NudgeRequest{Now: now, ID: a.ID, Kind: store.NudgeEscalate, After: rule.EscalateAfter, Required: rule.Required,
			Roles: rule.EscalateTo.Roles, People: rule.EscalateTo.People}
	case rule.RemindAfter > 0 && !now.Before(a.CreatedAt.Add(rule.RemindAfter)):
		return &store.NudgeRequest{Now: now, ID: a.ID, Kind: store.NudgeRemind, After: rule.RemindAfter, Required: rule.Required,
			Roles: rule.Roles}
	}
	return nil
}

// nudged returns the kinds of the reminders and escalations recorded for request id.
func (g *Guard) nudged(ctx context.Context, id string) ([]string, error) {
	evs, err := g.store.Events(ctx, store.EventFilter{ApprovalID: id})
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", id, err)
	}
	var out []string
	for _, e := range evs {
		if e.Kind == store.EventApprovalReminded || e.Kind == store.EventApprovalEscalated {
			out = append(out, e.Kind)
		}
	}
	return out, nil
}
