package latch

import (
	"context"
	"encoding/json"
	"fmt"
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
// the key's record is ambiguous or executing under a lapsed lease. What it may resolve is in
// docs/design.md ("Reconcile hooks").
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
