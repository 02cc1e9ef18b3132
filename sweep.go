package latch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/latchkit/latch/store"
)

// Defaults of SweepConfig.
const (
	DefaultSweepReconciles  = 16
	DefaultHookTimeout      = 30 * time.Second
	DefaultReconcileBackoff = time.Minute
	DefaultMaxBackoff       = time.Hour
)

// claimMargin is how much longer than the hook's deadline a claim keeps other sweepers out: the
// time to write what the hook answered, and some clock skew between processes.
const claimMargin = 10 * time.Second

// SweepConfig bounds what one sweep asks of the reconcile hooks. A nil *SweepConfig means all
// defaults.
type SweepConfig struct {
	// MaxReconciles is how many hooks one pass asks, at most; the rest wait for the next pass.
	// Default DefaultSweepReconciles.
	MaxReconciles int
	// HookTimeout is the deadline of one hook call (its context's); a hook that has not answered
	// by then counts as OutcomeUnknown. Default DefaultHookTimeout.
	HookTimeout time.Duration
	// Backoff is how long an attempt whose hook did not resolve it waits before it is asked
	// again; the wait doubles after each further ask, up to MaxBackoff. Defaults
	// DefaultReconcileBackoff and DefaultMaxBackoff. It is never shorter than the hook's deadline.
	Backoff    time.Duration
	MaxBackoff time.Duration
}

func (c *SweepConfig) withDefaults() (SweepConfig, error) {
	var out SweepConfig
	if c != nil {
		out = *c
	}
	if out.MaxReconciles < 0 || out.HookTimeout < 0 || out.Backoff < 0 || out.MaxBackoff < 0 {
		return out, fmt.Errorf("latch: sweep: negative setting in %+v", out)
	}
	if out.MaxReconciles == 0 {
		out.MaxReconciles = DefaultSweepReconciles
	}
	if out.HookTimeout == 0 {
		out.HookTimeout = DefaultHookTimeout
	}
	if out.Backoff == 0 {
		out.Backoff = DefaultReconcileBackoff
	}
	if out.MaxBackoff == 0 {
		out.MaxBackoff = max(DefaultMaxBackoff, out.Backoff)
	}
	if out.MaxBackoff < out.Backoff {
		return out, fmt.Errorf("latch: sweep: MaxBackoff %v is shorter than Backoff %v", out.MaxBackoff, out.Backoff)
	}
	return out, nil
}

// SweepReport is what one Sweep wrote.
type SweepReport struct {
	Lapsed  []string // effect keys whose lapsed lease it wrote ambiguous
	Expired []string // approval requests it wrote expired, or denied at their expiry
	// DeniedAtExpiry are those of Expired it wrote denied, not expired: pending under an action
	// whose approvers.on_expiry is deny.
	DeniedAtExpiry []string
	// Reminded and Escalated are the approval requests it reminded the approvers of, and
	// escalated (docs/approvals.md#reminders-and-escalation).
	Reminded  []string
	Escalated []string
	// Reconciled are the reconcile hooks it asked, one per effect, in the order asked.
	Reconciled []Reconciliation
	// Deferred counts the ambiguous effects whose hook was due but left for the next pass
	// (SweepConfig.MaxReconciles).
	Deferred int
}

// Reconciliation is what the sweeper asked one reconcile hook, and what came of it.
type Reconciliation struct {
	EffectKey string
	Action    string
	Attempt   int
	Try       int     // how many times this attempt was asked, this ask included
	Answer    Outcome // OutcomeUnknown for an error, a panic or a missed deadline (Error says which)
	Error     string  // the hook's error, "" when none
	// Resolved is the state the effect was resolved to (committed or failed); "" when the
	// answer was unknown or was not applied (Refused says why).
	Resolved store.State
	// Refused is why a knowing answer was not applied: holder_may_act (not executed, while the
	// holder of a lapsed lease may still act) or already_resolved (someone resolved it first).
	Refused string
	// NextAt is when the attempt may be asked again, when it is still ambiguous.
	NextAt time.Time
}

// Sweep is SweepWith with the default SweepConfig.
func (g *Guard) Sweep(ctx context.Context) (*SweepReport, error) {
	return g.SweepWith(ctx, nil)
}

// SweepWith settles what time alone ended, and asks the registered reconcile hooks about what
// nobody knows, so that it is seen — and alerted on, by a sink — and resolved where it can be,
// without waiting for the next caller:
//
//   - every effect executing under a lease that lapsed is written ambiguous (as a reservation
//     meeting it would write it; its holder may still report its own outcome);
//   - every approval request, pending or granted, whose expiry passed is written expired — or,
//     pending under an action whose approvers.on_expiry is deny, denied (by
//     store.ExpiryApprover, with an approval_denied_at_expiry event its sinks deliver);
//   - every pending request that waited its action's approvers.remind_after is reminded about,
//     and every one that waited escalate_after is escalated, each once (an event its sinks —
//     --notify — deliver; docs/approvals.md#reminders-and-escalation);
//   - every ambiguous effect whose action has a reconcile hook (RegisterReconcile; Protect
//     registers its Options.Reconcile) is asked about, when due, with a deadline: its answer
//     resolves the effect as the same answer would before a call (recorded as
//     reconcile:ACTION, with a resolution record), or leaves it ambiguous to be asked again
//     after a growing wait (docs/guarantees.md#the-sweeper-asks-reconcile-hooks).
//
// Each write is one compare-and-set with its event, and each hook is asked only under a claim
// written in the store, so any number of processes may sweep one store: one of them writes each
// record, and one at a time asks about each effect. `latch serve --sweep` calls Sweep
// periodically (it has no hooks: they are Go functions of a program); a program with hooks runs
// SweepEvery. The store must implement store.Sweeper, and store.ReconcileClaimer to ask hooks
// (both built-in stores do).
func (g *Guard) SweepWith(ctx context.Context, cfg *SweepConfig) (*SweepReport, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	sw, ok := g.store.(store.Sweeper)
	if !ok {
		return nil, fmt.Errorf("latch: sweep: store %T cannot sweep", g.store)
	}
	rep := &SweepReport{}
	var errs []error
	if err := g.sweepLeases(ctx, sw, rep); err != nil {
		errs = append(errs, err)
	}
	if err := g.sweepApprovals(ctx, sw, rep); err != nil {
		errs = append(errs, err)
	}
	if err := g.sweepNudges(ctx, rep); err != nil {
		errs = append(errs, err)
	}
	if err := g.sweepReconcile(ctx, c, rep); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return rep, wrapOp("sweep", errors.Join(errs...))
	}
	return rep, nil
}

// SweepEvery runs SweepWith every interval until ctx ends, logging what each pass did and any
// error on the guard's logger; it returns nil when ctx ends. A program that registers reconcile
// hooks runs it (in a goroutine) so that its ambiguous effects are reconciled without a call
// meeting their keys.
func (g *Guard) SweepEvery(ctx context.Context, interval time.Duration, cfg *SweepConfig) error {
	if interval <= 0 {
		return fmt.Errorf("latch: sweep every %v: the interval is not positive", interval)
	}
	if _, err := cfg.withDefaults(); err != nil {
		return err
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rep, err := g.SweepWith(ctx, cfg)
		if err != nil && ctx.Err() == nil {
			g.log.Error("latch: sweep", "err", err)
		}
		if rep != nil && len(rep.Lapsed)+len(rep.Expired)+len(rep.Reconciled)+len(rep.Reminded)+len(rep.Escalated) > 0 {
			g.log.Info("latch: swept", "lapsed_leases", len(rep.Lapsed), "expired_approvals", len(rep.Expired),
				"reminded", len(rep.Reminded), "escalated", len(rep.Escalated),
				"reconciled", len(rep.Reconciled), "deferred", rep.Deferred)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sweepLeases writes every lapsed lease ambiguous.
func (g *Guard) sweepLeases(ctx context.Context, sw store.Sweeper, rep *SweepReport) error {
	effects, err := g.store.Effects(ctx, store.EffectFilter{State: store.Executing})
	if err != nil {
		return err
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
	return errors.Join(errs...)
}

// sweepApprovals writes every expired approval request expired, or denied when it is pending
// and its action's approvers.on_expiry is deny (the policy in force decides, as it does for an
// answer or a reservation that finds the request expired).
func (g *Guard) sweepApprovals(ctx context.Context, sw store.Sweeper, rep *SweepReport) error {
	var errs []error
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
			deny := g.current().ApproversFor(a.ActionName).DeniesAtExpiry()
			written, evs, err := sw.ExpireApproval(ctx, &store.ExpireRequest{Now: now, ID: a.ID, Deny: deny})
			g.obs.storeTransaction("sweep_approval", t0, err)
			switch {
			case errors.Is(err, store.ErrNothingToSweep):
			case err != nil:
				errs = append(errs, err)
			default:
				rep.Expired = append(rep.Expired, a.ID)
				if written.DeniedAtExpiry() {
					rep.DeniedAtExpiry = append(rep.DeniedAtExpiry, a.ID)
				}
				g.emit(ctx, nil, evs)
			}
		}
	}
	return errors.Join(errs...)
}

// sweepReconcile asks the registered hooks about the ambiguous effects that are due, at most
// c.MaxReconciles of them, each under a claim in the store.
func (g *Guard) sweepReconcile(ctx context.Context, c SweepConfig, rep *SweepReport) error {
	g.hooks.mu.Lock()
	hooks := len(g.hooks.byAction)
	g.hooks.mu.Unlock()
	if hooks == 0 {
		return nil
	}
	cl, ok := g.store.(store.ReconcileClaimer)
	if !ok {
		return fmt.Errorf("reconcile: store %T keeps no reconcile claims", g.store)
	}
	effects, err := g.store.Effects(ctx, store.EffectFilter{State: store.Ambiguous})
	if err != nil || len(effects) == 0 {
		return err
	}
	claims, err := cl.ReconcileClaims(ctx)
	if err != nil {
		return err
	}
	last := make(map[string]*store.ReconcileClaim, len(claims))
	for _, cm := range claims {
		last[cm.Key] = cm
	}
	var errs []error
	for _, eff := range effects {
		if ctx.Err() != nil {
			break
		}
		hook := g.ReconcileHook(eff.Action)
		if hook == nil || !due(last[eff.Key], eff, g.cfg.Now()) {
			continue
		}
		if len(rep.Reconciled) >= c.MaxReconciles {
			rep.Deferred++
			continue
		}
		r, err := g.reconcileOne(ctx, c, cl, hook, eff)
		switch {
		case err != nil:
			errs = append(errs, err)
		case r != nil:
			rep.Reconciled = append(rep.Reconciled, *r)
		}
	}
	return errors.Join(errs...)
}

// due reports whether eff may be asked about at now, as far as its last claim (nil when none)
// says; the claim itself decides again, atomically.
func due(last *store.ReconcileClaim, eff *store.Effect, now time.Time) bool {
	if last == nil {
		return true
	}
	if now.Before(last.HeldUntil) {
		return false
	}
	return last.Attempt != eff.Attempt || !now.Before(last.NextAt)
}

// reconcileOne claims eff, asks hook about it within the deadline, and writes what came of it:
// a resolution (with its record and events), or the answer as an event. It returns nil, nil when
// another sweeper holds the claim or the effect was settled meanwhile.
func (g *Guard) reconcileOne(ctx context.Context, c SweepConfig, cl store.ReconcileClaimer, hook ReconcileFunc, eff *store.Effect) (*Reconciliation, error) {
	if !g.hooks.startAsking(eff.Key) {
		return nil, nil // this process is still asking (a hook past its deadline has not returned)
	}
	abandoned := false
	defer func() {
		if !abandoned {
			g.hooks.doneAsking(eff.Key)
		}
	}()
	now := g.cfg.Now()
	t0 := time.Now()
	claim, err := cl.ClaimReconcile(ctx, &store.ClaimRequest{Now: now, Key: eff.Key, Attempt: eff.Attempt, Holder: g.hooks.name(),
		Hold: c.HookTimeout + claimMargin, Backoff: c.Backoff, MaxBackoff: c.MaxBackoff})
	g.obs.storeTransaction("claim_reconcile", t0, err)
	switch {
	case errors.Is(err, store.ErrNothingToSweep):
		return nil, nil
	case err != nil:
		return nil, err
	}
	r := &Reconciliation{EffectKey: eff.Key, Action: eff.Action, Attempt: eff.Attempt, Try: claim.Tries, NextAt: claim.NextAt}
	outcome, value, hookErr, late := g.askWithin(ctx, hook, attemptOf(eff), c.HookTimeout)
	abandoned = late
	r.Answer = outcome
	payload := map[string]any{"answer": outcome.String(), "attempt": eff.Attempt, "trigger": "sweep",
		"sweeper": claim.Holder, "try": claim.Tries}
	if hookErr != nil {
		r.Error = validText(hookErr.Error())
		payload["error"] = r.Error
	}
	now = g.cfg.Now()
	started := func() store.Event {
		return store.NewEvent(store.EventReconcileStarted, now, eff.ActionID, eff.Key, "", payload)
	}
	if outcome == OutcomeUnknown {
		payload["next_at"] = claim.NextAt.UTC().Format(time.RFC3339Nano)
		g.log.Info("latch: reconcile hook did not know; asked again later", "effect_key", eff.Key, "action", eff.Action,
			"attempt", eff.Attempt, "try", claim.Tries, "next_at", claim.NextAt, "err", hookErr)
		return r, g.logEvents(ctx, started())
	}
	to, result := g.hookResolution(outcome, value, eff.Key)
	resolved := store.NewEvent(store.EventReconcileResolved, now, eff.ActionID, eff.Key, "", map[string]any{"to": string(to)})
	_, err = g.ResolveEffect(ctx, &store.ResolveRequest{Now: now, Key: eff.Key, To: to, By: "reconcile:" + eff.Action,
		Result: result, Hook: true, Events: []store.Event{started(), resolved}})
	switch {
	case err == nil:
		r.Resolved, r.NextAt = to, time.Time{}
		g.log.Info("latch: reconcile hook resolved an ambiguous effect", "effect_key", eff.Key, "action", eff.Action,
			"attempt", eff.Attempt, "to", string(to), "by", "reconcile:"+eff.Action)
		return r, nil
	case errors.Is(err, store.ErrHolderMayAct):
		// The holder of the lapsed lease may still act: its not-executed is true only until it does.
		r.Refused = "holder_may_act"
	case errors.Is(err, store.ErrNotAmbiguous), errors.Is(err, store.ErrNotFound):
		r.Refused = "already_resolved" // a person, the holder or a call got there first
	default:
		return r, err
	}
	payload["applied"] = false
	payload["refused"] = r.Refused
	if r.Refused == "holder_may_act" {
		payload["next_at"] = claim.NextAt.UTC().Format(time.RFC3339Nano)
	} else {
		r.NextAt = time.Time{}
	}
	g.log.Info("latch: reconcile hook's answer not applied", "effect_key", eff.Key, "action", eff.Action,
		"attempt", eff.Attempt, "answer", outcome.String(), "refused", r.Refused)
	return r, g.logEvents(ctx, started())
}

// askWithin asks hook about at, giving it until timeout: its context ends then, and an answer
// that has not come by then counts as OutcomeUnknown. late is set when the hook had not
// returned: it still runs (a hook that ignores its context cannot be stopped), its answer, when
// it comes, is dropped, and only then is the effect's key free to be asked about again here.
func (g *Guard) askWithin(ctx context.Context, hook ReconcileFunc, at *Attempt, timeout time.Duration) (o Outcome, value any, err error, late bool) {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	type answer struct {
		o     Outcome
		value any
		err   error
	}
	ch := make(chan answer, 1)
	var mu sync.Mutex
	finished, abandoned := false, false
	go func() {
		defer cancel()
		o, v, err := callHook(hctx, hook, at)
		ch <- answer{o, v, err}
		mu.Lock()
		defer mu.Unlock()
		finished = true
		if abandoned {
			g.hooks.doneAsking(at.EffectKey)
		}
	}()
	select {
	case a := <-ch:
		return a.o, a.value, a.err, false
	case <-hctx.Done():
	}
	mu.Lock()
	if finished { // it answered as the deadline passed
		mu.Unlock()
		a := <-ch
		return a.o, a.value, a.err, false
	}
	abandoned = true
	mu.Unlock()
	g.log.Warn("latch: reconcile hook did not answer within its deadline; it is not asked again here until it returns",
		"effect_key", at.EffectKey, "action", at.Action, "timeout", timeout)
	return OutcomeUnknown, nil, fmt.Errorf("reconcile hook did not answer within %v: %w", timeout, hctx.Err()), true
}

// logEvents writes events that change no state, and hands them to the sinks.
func (g *Guard) logEvents(ctx context.Context, evs ...store.Event) error {
	ls, ok := g.store.(interface {
		LogEvents(context.Context, []store.Event) error
	})
	if !ok {
		return nil // the answer is in the report and the log; this store keeps no such events
	}
	if err := ls.LogEvents(ctx, evs); err != nil {
		return err
	}
	g.emit(ctx, nil, evs)
	return nil
}
