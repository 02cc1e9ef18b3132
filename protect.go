package latch

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// Protect wraps fn so that every call goes through the guard's pipeline as the action named
// action. Args must encode to a JSON object (docs/guarantees.md#allowed-argument-values); its JSON field names are the argument
// names that policy conditions and templates use. fn receives a fresh value decoded from the
// canonical bytes that were hashed: what runs is what was decided, and fields that do not survive
// JSON (unexported, `json:"-"`) are not part of the action and are not seen by fn.
//
// Protect records the action name and the type A so that [Guard.Check] can compare them with
// the policy at start-up, and registers opts.Reconcile, when set, as the action's reconcile hook
// for the sweeper ([Guard.RegisterReconcile]).
func Protect[A, R any](g *Guard, action string, fn func(context.Context, A) (R, error), opts *Options) func(context.Context, A) (R, error) {
	g.protected.add(action, reflect.TypeFor[A]())
	if opts != nil && opts.Reconcile != nil {
		g.RegisterReconcile(action, opts.Reconcile) // for the sweeper
	}
	return func(ctx context.Context, args A) (R, error) {
		var out R
		call := &Call{Action: action, Options: opts}
		raw, err := json.Marshal(args)
		if err != nil {
			// Refused like any other invalid argument: the refusal is recorded (a receipt).
			call.encodeErr = fmt.Errorf("encode arguments of %s: %w", action, err)
		}
		call.Arguments = raw
		_, err = g.Execute(ctx, call, func(ctx context.Context, canonical json.RawMessage) (any, error) {
			var fresh A
			if err := json.Unmarshal(canonical, &fresh); err != nil {
				return nil, NotExecuted(fmt.Errorf("decode arguments of %s: %w", action, err))
			}
			r, err := fn(ctx, fresh)
			out = r
			return r, err
		})
		return out, err
	}
}
