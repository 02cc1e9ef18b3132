package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/store"
)

// Resolution is what a person says happened to an effect that needs them, in the one
// vocabulary of every surface: `latch resolve KEY --to committed|failed [--result JSON]
// [--note TEXT]`, the body of POST /v1/effects/{key}/resolve, the arguments of the operator
// MCP server's resolve tool and the console's resolve form.
type Resolution struct {
	// To is committed (it happened: later attempts are refused as duplicates) or failed (it did
	// not: the next attempt may run).
	To string `json:"to"`
	// Result is the effect's result, with committed only: handed to later duplicates. Absent or
	// null is none.
	Result json.RawMessage `json:"result"`
	// Note is why, kept on the record and in its event.
	Note string `json:"note"`
}

// InputError is a resolution that cannot be taken as given: Reason is missing_field or
// invalid_field, Field the member at fault (to, result, note), Pointer the JSON pointer into
// the result of the value refused, when there is one.
type InputError struct {
	Reason  string
	Field   string
	Pointer string
	Detail  string
}

func (e *InputError) Error() string { return e.Detail }

// Check validates r and returns the request it makes of key, by the resolver by (SURFACE:NAME):
// the result in its canonical form (the resolution's receipt hashes those bytes). It writes
// nothing.
func (r *Resolution) Check(key, by string) (*store.ResolveRequest, error) {
	switch r.To {
	case string(store.Committed), string(store.Failed):
	case "":
		return nil, &InputError{Reason: "missing_field", Field: "to", Detail: `say what happened: "to" is committed or failed`}
	default:
		return nil, &InputError{Reason: "invalid_field", Field: "to", Detail: fmt.Sprintf("to %q is not committed or failed", r.To)}
	}
	req := &store.ResolveRequest{Key: key, To: store.State(r.To), By: by, Note: r.Note}
	if raw := strings.TrimSpace(string(r.Result)); raw != "" && raw != "null" {
		if req.To != store.Committed {
			return nil, &InputError{Reason: "invalid_field", Field: "result", Detail: "a result goes with to committed: a failed effect has no result"}
		}
		_, canonical, err := canon.ParseCanonical([]byte(raw))
		if err != nil {
			ie := &InputError{Reason: "invalid_field", Field: "result", Detail: "result: " + strings.TrimPrefix(err.Error(), "latch: ")}
			if ce := (*canon.Error)(nil); errors.As(err, &ce) {
				ie.Pointer = ce.Pointer
			}
			return nil, ie
		}
		req.Result = canonical
	}
	if err := store.CheckNote(r.Note); err != nil {
		return nil, &InputError{Reason: "invalid_field", Field: "note", Detail: err.Error()}
	}
	return req, nil
}

// Resolver resolves effects under latch's resolve rules (*latch.Guard: a person may not
// resolve their own attempt, nor one of an action whose approver roles they are not in).
type Resolver interface {
	ResolveEffect(ctx context.Context, req *store.ResolveRequest) (*store.Effect, error)
}

// Refusal is a resolution refused: Reason is effect_not_found, not_ambiguous (the effect does
// not need a person: see NeedsPerson), or a store.ResolveError's reason (self_resolution,
// approver_not_entitled, holder_unknown). Nothing was changed.
type Refusal struct {
	Reason string
	Key    string
	// State is the effect's state as an operator reads it, for not_ambiguous.
	State string
	Err   error
}

func (e *Refusal) Error() string { return strings.TrimPrefix(e.Err.Error(), "latch: ") }
func (e *Refusal) Unwrap() error { return e.Err }

// Reasons of a Refusal beside the store.ResolveError ones.
const (
	ReasonEffectNotFound = "effect_not_found"
	ReasonNotAmbiguous   = "not_ambiguous"
)

// Resolve checks r and resolves key through g as by, returning the record it left. A refusal
// is a *Refusal; bad input an *InputError.
func (o *Operator) Resolve(ctx context.Context, g Resolver, key string, r *Resolution, by string) (*store.Effect, error) {
	req, err := r.Check(key, by)
	if err != nil {
		return nil, err
	}
	e, err := g.ResolveEffect(ctx, req)
	var re *store.ResolveError
	switch {
	case err == nil:
		return e, nil
	case errors.Is(err, store.ErrNotFound):
		return nil, &Refusal{Reason: ReasonEffectNotFound, Key: key, Err: err}
	case errors.Is(err, store.ErrNotAmbiguous):
		ref := &Refusal{Reason: ReasonNotAmbiguous, Key: key, Err: err}
		if cur, rerr := o.cfg.Store.Effect(ctx, key); rerr == nil {
			ref.State = ReadState(jsonview.NewEffect(cur, o.cfg.Now()))
		}
		return nil, ref
	case errors.As(err, &re):
		return nil, &Refusal{Reason: re.Reason, Key: key, Err: err}
	}
	return nil, err
}

// ReadState is the state of e as a person reads it: the stored state, and whether its holder's
// lease lapsed without a report ("executing (lease expired)", "ambiguous (lease expired)") or
// its holder reported otherwise after a resolution ("(conflict)"). Reading never changes it.
func ReadState(e jsonview.Effect) string {
	s := e.State
	if e.LeaseLapsed {
		s += " (lease expired)"
	}
	if e.Conflict != nil {
		s += " (conflict)"
	}
	return s
}
