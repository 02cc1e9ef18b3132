package latch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/latchkit/latch/store"
)

// Attempt is the earlier attempt of an effect that a reconcile hook is asked about.
type Attempt struct {
	EffectKey string
	Action    string
	Number    int    // the attempt number: 1, 2, …
	ActionID  string // the action id of the call that made it
	// Arguments are the canonical arguments that attempt ran with (nil for a record written by a
	// version of latch that did not keep them, unless they are this call's own).
	Arguments json.RawMessage
	Error     string // what the record says: the executor's error, or that its lease lapsed
	// HolderMayAct is set when the attempt's lease lapsed and its holder has not reported: it
	// may still be acting. The hook may then confirm OutcomeCommitted, but its
	// OutcomeNotExecuted is not applied (it would turn a lapsed lease into a retry); the record
	// stays ambiguous until the holder reports or a person resolves it.
	HolderMayAct bool
}

// ReconcileFunc is a reconcile hook: asked "did this attempt's effect happen?", it answers
// OutcomeCommitted (with the effect's result, if it knows it, stored as JSON and handed to later
// duplicates), OutcomeNotExecuted or OutcomeUnknown. An error or a panic counts as
// OutcomeUnknown. It runs at most once per call, before the call reserves the key, and only when
// the key's record is ambiguous or executing under a lapsed lease; the sweeper (Guard.SweepWith)
// also asks a registered hook about ambiguous effects, with a deadline on ctx. A hook only
// looks: it must not act. What it may resolve is in docs/design.md ("Reconcile hooks").
type ReconcileFunc func(ctx context.Context, a *Attempt) (Outcome, any, error)

// Reconciler adapts a typed hook: it receives the attempt's arguments decoded into A (as Protect
// decodes them for its function) and returns a result of type R. Arguments that do not decode
// into A make the answer OutcomeUnknown.
func Reconciler[A, R any](fn func(ctx context.Context, a *Attempt, args A) (Outcome, R, error)) ReconcileFunc {
	return func(ctx context.Context, a *Attempt) (Outcome, any, error) {
		var args A
		if len(a.Arguments) == 0 {
			return OutcomeUnknown, nil, fmt.Errorf("reconcile %s: the arguments of attempt %d are not known", a.EffectKey, a.Number)
		}
		if err := json.Unmarshal(a.Arguments, &args); err != nil {
			return OutcomeUnknown, nil, fmt.Errorf("reconcile %s: decode the arguments of attempt %d: %w", a.EffectKey, a.Number, err)
		}
		o, r, err := fn(ctx, a, args)
		return o, r, err
	}
}

// RegisterReconcile makes fn the reconcile hook of action for the sweeper: Guard.Sweep and
// Guard.SweepEvery ask it about every ambiguous effect of that action, without waiting for a
// call to meet the key (docs/guarantees.md#the-sweeper-asks-reconcile-hooks). A nil fn removes
// the action's hook. Protect registers its Options.Reconcile for its action; a program that
// calls Execute with Options.Reconcile, or that only sweeps, registers the hook itself. A later
// registration for the same action replaces an earlier one.
func (g *Guard) RegisterReconcile(action string, fn ReconcileFunc) {
	g.hooks.mu.Lock()
	defer g.hooks.mu.Unlock()
	if fn == nil {
		delete(g.hooks.byAction, action)
		return
	}
	if g.hooks.byAction == nil {
		g.hooks.byAction = make(map[string]ReconcileFunc)
	}
	g.hooks.byAction[action] = fn
}

// ReconcileHook returns the reconcile hook registered for action (RegisterReconcile), or nil.
func (g *Guard) ReconcileHook(action string) ReconcileFunc {
	g.hooks.mu.Lock()
	defer g.hooks.mu.Unlock()
	return g.hooks.byAction[action]
}

// reconcilers are the reconcile hooks a guard's sweeper asks, by action, and the effects whose
// hook this process is asking now (a hook abandoned at its deadline stays there until it returns,
// so that this process never asks about one effect twice at once).
type reconcilers struct {
	mu       sync.Mutex
	byAction map[string]ReconcileFunc
	asking   map[string]bool
	sweeper  string // this guard's name in the claims it writes
}

// startAsking marks key as being asked about; false when it already is.
func (r *reconcilers) startAsking(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.asking[key] {
		return false
	}
	if r.asking == nil {
		r.asking = make(map[string]bool)
	}
	r.asking[key] = true
	return true
}

func (r *reconcilers) doneAsking(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.asking, key)
}

// name returns this guard's sweeper name, made on first use.
func (r *reconcilers) name() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sweeper == "" {
		host, _ := os.Hostname()
		r.sweeper = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), newID("swp_"))
	}
	return r.sweeper
}

// callHook runs a reconcile hook; an error, a panic or an answer that is not one of the two that
// know counts as OutcomeUnknown.
func callHook(ctx context.Context, fn ReconcileFunc, at *Attempt) (o Outcome, value any, err error) {
	defer func() {
		if r := recover(); r != nil {
			o, value, err = OutcomeUnknown, nil, fmt.Errorf("reconcile hook panicked: %v", r)
		}
	}()
	o, value, err = fn(withoutApproval(ctx), at)
	if err != nil || (o != OutcomeCommitted && o != OutcomeNotExecuted) {
		return OutcomeUnknown, nil, err
	}
	return o, value, nil
}

// attemptOf is the attempt a hook is asked about, from its effect record.
func attemptOf(eff *store.Effect) *Attempt {
	return &Attempt{EffectKey: eff.Key, Action: eff.Action, Number: eff.Attempt, ActionID: eff.ActionID,
		Arguments: eff.Arguments, Error: eff.Error, HolderMayAct: store.HolderMayAct(eff)}
}

// hookResolution is what a reconcile hook's known answer resolves key to: failed for
// OutcomeNotExecuted, else committed with the hook's value as its stored result (none when the
// value does not encode as JSON: the resolution still stands, and the log says so).
func (g *Guard) hookResolution(outcome Outcome, value any, key string) (store.State, json.RawMessage) {
	if outcome == OutcomeNotExecuted {
		return store.Failed, nil
	}
	if value == nil {
		return store.Committed, nil
	}
	result, err := json.Marshal(value)
	if err != nil {
		g.log.Warn("latch: reconcile result not stored: it does not encode as JSON", "effect_key", key, "err", err)
		return store.Committed, nil
	}
	return store.Committed, result
}
