package verify

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// targetState is the state of G16's target, which the scenario moves: what its precondition
// provider reads.
type targetState struct {
	mu    sync.Mutex
	state map[string]any
	reads int
	// cached is faultPreconditionCached: the first state read for each call's arguments is
	// answered ever after.
	cached map[string]map[string]any
	cache  bool
}

func (t *targetState) set(status string, revision int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state = map[string]any{"status": status, "revision": revision}
}

// read is the provider: the target's current state.
func (t *targetState) read(_ context.Context, req latch.PreconditionRequest) (any, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reads++
	if t.cache {
		if s, ok := t.cached[string(req.Arguments)]; ok {
			return s, nil
		}
		if t.cached == nil {
			t.cached = map[string]map[string]any{}
		}
		t.cached[string(req.Arguments)] = t.state
	}
	return t.state, nil
}

func (t *targetState) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reads
}

// g16: a precondition whose fingerprint moved is refused before the reservation.
//
// The first action (by name) that can decide approve, with verify's own precondition provider
// (Options.Precondition, which overrides a precondition entry the policy's action may declare:
// the operator's state service is never asked). Control: an approval requested (the state
// {status: open, revision: 1} captured) and granted, presented with the state unchanged, commits.
// Then, on another key, an approval is requested and granted on the same state; the state moves
// (revision 2) and the approval is presented: it must be refused precondition_changed
// (ErrPrecondition), execute nothing, reserve nothing (no effect record for the key) and leave
// the approval granted. With the state moved back, presenting it again commits: the refusal
// spent nothing.
func (r *runner) g16(ctx context.Context) (outcome, error) {
	pk, why := r.pickFor(policy.Approve, chooseOpts{n: 2}, naNoApprove)
	if pk == nil {
		return notApplicable(why), nil
	}
	e, err := r.newEnv(ctx, "g16", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	target := &targetState{cache: r.faults[faultPreconditionCached]}
	target.set("open", 1)
	v0, v1 := pk.variants[0], pk.variant(1)
	v0.precondition, v1.precondition = target.read, target.read

	var c0 counter
	err0 := e.run(ctx, pk, v0, c0.commit)

	id, aerr := e.requestApproval(ctx, pk, v1)
	if aerr != nil {
		return controlFailed(pk.Action, fmt.Sprintf("control %s: %s, executions: %d; approval for %s: %s", v0.describe(), outcomeOf(err0), c0.count(), v1.describe(), aerr)), nil
	}
	target.set("open", 2)
	reads := target.count()
	var c1 counter
	_, err1 := e.execApproved(ctx, id, pk, v1, c1.commit)
	read := target.count() > reads
	rec := noRecord
	if v1.Key != "" {
		if rec, err = e.effectState(ctx, v1.Key); err != nil {
			return outcome{}, err
		}
	} else {
		// Without an effect key nothing is reserved but the approval's consumption: no effect
		// record may appear at all.
		effs, err := e.st.Effects(ctx, store.EffectFilter{})
		if err != nil {
			return outcome{}, fmt.Errorf("read effects: %w", err)
		}
		if len(effs) > 0 {
			rec = store.State(fmt.Sprintf("%d effect records", len(effs)))
		}
	}
	a, err := e.st.Approval(ctx, id)
	if err != nil {
		return outcome{}, fmt.Errorf("read approval %s: %w", id, err)
	}
	status := a.Status
	target.set("open", 1)
	var c2 counter
	_, err2 := e.execApproved(ctx, id, pk, v1, c2.commit)

	var pe *latch.PreconditionError
	detail := fmt.Sprintf("verify's own precondition provider; control %s, state captured and presented unchanged: %s, executions: %d; %s approval %s granted on the state {open, revision 1}, state moved to revision 2, presented: %s (provider asked again: %t), executions: %d, record %s, approval %s; state moved back, presented again: %s, executions: %d",
		v0.describe(), outcomeOf(err0), c0.count(), v1.describe(), id, preconditionText(err1), read, c1.count(), rec, status, outcomeOf(err2), c2.count())
	switch {
	case err0 != nil || c0.count() != 1:
		return controlFailed(pk.Action, detail), nil
	case c1.count() != 0:
		return fail(pk.Action, "the call whose precondition moved executed", detail), nil
	case !errors.As(err1, &pe) || pe.Reason != string(latch.ReasonPreconditionChanged) || !errors.Is(err1, latch.ErrPrecondition):
		return fail(pk.Action, "the call whose precondition moved was not refused precondition_changed", detail), nil
	case rec != noRecord:
		return fail(pk.Action, "the refused call reserved its effect", detail), nil
	case status != store.Granted:
		return fail(pk.Action, "the refusal did not leave the approval granted", detail), nil
	case err2 != nil || c2.count() != 1:
		return controlFailed(pk.Action, detail), nil
	}
	return pass(pk.Action, detail), nil
}

// preconditionText is outcomeOf, with the fingerprints of a precondition refusal.
func preconditionText(err error) string {
	var pe *latch.PreconditionError
	if errors.As(err, &pe) {
		return fmt.Sprintf("refused %s (captured %s, current %s)", pe.Reason, short(pe.Captured), short(pe.Current))
	}
	return outcomeOf(err)
}

// short abbreviates a fingerprint for a detail.
func short(h string) string {
	if len(h) > 19 {
		return h[:19] + "…"
	}
	if h == "" {
		return "none"
	}
	return h
}
