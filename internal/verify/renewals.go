package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// A renewal is a new attempt of an effect key whose record is failed: the executor said
// NotExecuted, or a person or a reconcile hook resolved an ambiguous attempt failed. The
// reservation then takes attempt + 1 (docs/guarantees.md#the-retry-table); an action's
// max_attempts is the ceiling on them.

// naNoCeiling is G15's N/A reason.
const naNoCeiling = "no action with an effect template that can decide allow sets max_attempts: renewals have no ceiling to refuse past"

// maxCeiling bounds the attempts G15 plays before the one past the ceiling.
const maxCeiling = 100

// renewable picks an allowed action with an effect template that can be renewed at least once
// (max_attempts absent or above 1), with n distinct keys, or says why there is none (G5's rule).
func (r *runner) renewable(n int) (*pick, string) {
	pk, why := r.pickFor(policy.Allow, chooseOpts{needEffect: true, n: n,
		accept: func(a *policy.Action) bool { return a.MaxAttempts != 1 }}, naNoAllowEffect)
	if pk == nil {
		if other, _ := r.effectPick(1); other != nil && !strings.HasPrefix(why, noGrant) {
			return nil, naMaxAttempts
		}
		return nil, why
	}
	return pk, ""
}

// refusedBeforeActing is an executor that reads the idempotency token twice, into seen, and
// says nothing happened.
func refusedBeforeActing(seen *[2]string) executor {
	return func(ctx context.Context, _ json.RawMessage) (any, error) {
		seen[0], seen[1] = latch.IdempotencyToken(ctx), latch.IdempotencyToken(ctx)
		return nil, latch.NotExecuted(errors.New("verify: the remote refused before acting"))
	}
}

func recordText(rec *store.Effect) string {
	if rec == nil {
		return string(noRecord)
	}
	return fmt.Sprintf("%s attempt %d", rec.State, rec.Attempt)
}

// callTokens returns the idempotency tokens the call receipts of key carry, in chain order.
func (e *env) callTokens(ctx context.Context, key string) ([]string, error) {
	var out []string
	for s, err := range e.st.Receipts(ctx, store.ReceiptFilter{EffectKey: key}) {
		if err != nil {
			return nil, fmt.Errorf("read receipts: %w", err)
		}
		rc, err := receipt.Parse(s.Doc)
		if err != nil {
			return nil, fmt.Errorf("read receipt %d: %w", s.Seq, err)
		}
		if receipt.IsCall(rc.Kind) && rc.IdempotencyToken != "" {
			out = append(out, rc.IdempotencyToken)
		}
	}
	return out, nil
}

// g14: attempt 1's executor reads its idempotency token and says NotExecuted (the record is
// failed); the renewal's executor reads its own: the two must differ, each must be stable
// within its attempt, and the receipts must carry what the executors saw. Control: the renewal
// runs as attempt 2 and commits, and each executor was handed a token.
func (r *runner) g14(ctx context.Context) (outcome, error) {
	pk, why := r.renewable(1)
	if pk == nil {
		return notApplicable(why), nil
	}
	v := pk.variants[0]
	e, err := r.newEnv(ctx, "g14", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	var first, second [2]string
	_, err1 := e.exec(ctx, pk, v, refusedBeforeActing(&first))
	rec1, err := e.effectRecord(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}
	var c counter
	_, err2 := e.exec(ctx, pk, v, func(ctx context.Context, _ json.RawMessage) (any, error) {
		c.n.Add(1)
		second[0], second[1] = latch.IdempotencyToken(ctx), latch.IdempotencyToken(ctx)
		return map[string]any{"verified": true}, nil
	})
	rec2, err := e.effectRecord(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}
	tokens, err := e.callTokens(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}

	detail := fmt.Sprintf("%s: attempt 1 saw token %q (read twice: %q), NotExecuted: %s (record %s); renewal saw %q (read twice: %q): %s, executions: %d (record %s); receipts carry %q",
		v.describe(), first[0], first[1], outcomeOf(err1), recordText(rec1), second[0], second[1], outcomeOf(err2), c.count(), recordText(rec2), tokens)
	switch {
	case !errors.Is(err1, latch.ErrNotExecuted) || rec1 == nil || rec1.State != store.Failed || rec1.Attempt != 1 ||
		err2 != nil || c.count() != 1 || rec2 == nil || rec2.State != store.Committed || rec2.Attempt != 2 ||
		first[0] == "" || second[0] == "":
		return controlFailed(pk.Action, detail), nil
	case first[0] == second[0]:
		return fail(pk.Action, "the idempotency token did not change across the renewal", detail), nil
	case first[0] != first[1] || second[0] != second[1]:
		return fail(pk.Action, "the idempotency token changed within one attempt", detail), nil
	case len(tokens) != 2 || tokens[0] != first[0] || tokens[1] != second[0]:
		return fail(pk.Action, "the receipts do not carry the tokens the executors saw", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// g15: an action with max_attempts N: N attempts each say NotExecuted, and the renewal past
// the ceiling must be refused attempts_exhausted without executing, the record left failed at
// attempt N. Control: every attempt up to the ceiling ran (N executions, each renewal reserved).
func (r *runner) g15(ctx context.Context) (outcome, error) {
	pk, why := r.pickFor(policy.Allow, chooseOpts{needEffect: true, n: 1,
		accept: func(a *policy.Action) bool { return a.MaxAttempts > 0 }}, naNoCeiling)
	if pk == nil {
		return notApplicable(why), nil
	}
	n := pk.act.MaxAttempts
	if n > maxCeiling {
		return notApplicable(fmt.Sprintf("%s has max_attempts: %d: verify plays every attempt up to the ceiling, and stops at %d", pk.Action, n, maxCeiling)), nil
	}
	v := pk.variants[0]
	e, err := r.newEnv(ctx, "g15", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	var within counter
	ran := 0
	for range n {
		_, err := e.exec(ctx, pk, v, func(ctx context.Context, _ json.RawMessage) (any, error) {
			within.n.Add(1)
			return nil, latch.NotExecuted(errors.New("verify: the remote refused before acting"))
		})
		if errors.Is(err, latch.ErrNotExecuted) {
			ran++
		}
	}
	recN, err := e.effectRecord(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}
	var past counter
	_, perr := e.exec(ctx, pk, v, past.commit)
	after, err := e.effectRecord(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}

	detail := fmt.Sprintf("%s, max_attempts %d: %d attempts said NotExecuted (executions: %d, record %s); the renewal past the ceiling: %s, executions: %d, record %s",
		v.describe(), n, ran, within.count(), recordText(recN), outcomeOf(perr), past.count(), recordText(after))
	switch {
	case ran != n || within.count() != int64(n) || recN == nil || recN.State != store.Failed || recN.Attempt != n:
		return controlFailed(pk.Action, detail), nil
	case past.count() != 0:
		return fail(pk.Action, "the renewal past max_attempts executed", detail), nil
	case !errors.Is(perr, latch.ErrAttemptsExhausted) || effectRefusal(perr) != "attempts_exhausted":
		return fail(pk.Action, "the renewal past max_attempts was not refused attempts_exhausted", detail), nil
	case after == nil || after.State != store.Failed || after.Attempt != n:
		return fail(pk.Action, "the refused renewal changed the record", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// l2: a holder's lease lapses and a contender makes the record ambiguous; a person resolves it
// failed and a renewal starts (attempt 2). While the renewal executes, the first holder
// finishes: its outcome must not touch the renewal's attempt — it is refused, key_lost or
// outcome_conflict (it reports committed an attempt a person resolved failed), both
// ErrAmbiguousEffect — and the renewal then commits its own. Control: on another key, a lapsed holder whose attempt nobody
// resolved finishes late and settles its own attempt; the resolution and the renewal succeed.
func (r *runner) l2(ctx context.Context) (outcome, error) {
	pk, why := r.effectPick(2)
	if pk == nil {
		return notApplicable(why), nil
	}
	v, cv := pk.variants[0], pk.variants[1]
	e, err := r.newEnv(ctx, "l2", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	// Control: the late holder settles its own attempt.
	var ch counter
	var readErr error
	_, chErr := e.exec(ctx, pk, cv, func(context.Context, json.RawMessage) (any, error) {
		ch.n.Add(1)
		rec, err := e.st.Effect(ctx, cv.Key)
		if err != nil {
			readErr = err
			return nil, err
		}
		e.clock.setAfter(rec.LeaseExpiresAt)
		var k counter
		_, _ = e.exec(ctx, pk, cv, k.commit)
		return map[string]any{"verified": true}, nil
	})
	if readErr != nil {
		return outcome{}, readErr
	}
	crec, err := e.effectRecord(ctx, cv.Key)
	if err != nil {
		return outcome{}, err
	}

	// The first holder runs in a call of its own and waits, inside its executor, to be let go.
	type call struct {
		started, release, done chan struct{}
		err                    error
		n                      counter
	}
	start := func(result string) *call {
		c := &call{started: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
		go func() {
			defer close(c.done)
			_, c.err = e.exec(ctx, pk, v, func(context.Context, json.RawMessage) (any, error) {
				c.n.n.Add(1)
				close(c.started)
				<-c.release
				return map[string]any{"verified": result}, nil
			})
		}()
		return c
	}
	running := func(c *call) bool {
		select {
		case <-c.started:
			return true
		case <-c.done:
			return false
		}
	}
	holder := start("late holder")
	defer func() { <-holder.done }()
	if !running(holder) {
		return controlFailed(pk.Action, v.describe()+": the first holder did not run: "+outcomeOf(holder.err)), nil
	}
	first, err := e.effectRecord(ctx, v.Key)
	if err != nil {
		close(holder.release)
		return outcome{}, err
	}
	e.clock.setAfter(first.LeaseExpiresAt)
	var k counter
	_, kErr := e.exec(ctx, pk, v, k.commit)
	_, resErr := e.g.Resolve(ctx, v.Key, store.Failed, "cli:"+verifyApprover)
	renewal := start("renewal")
	defer func() { <-renewal.done }()
	renewed := running(renewal)
	close(holder.release)
	<-holder.done
	mid, err := e.effectRecord(ctx, v.Key)
	if err != nil {
		close(renewal.release)
		return outcome{}, err
	}
	close(renewal.release)
	<-renewal.done
	final, err := e.effectRecord(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}
	var result string
	if final != nil && len(final.Result) > 0 {
		var m map[string]any
		if json.Unmarshal(final.Result, &m) == nil {
			result, _ = m["verified"].(string)
		}
	}
	holderReason := effectRefusal(holder.err)

	detail := fmt.Sprintf("%s: holder of attempt 1 ran, lease lapsed, contender %s, resolved failed: %s, renewal ran: %v; the first holder finishing then: %s (record %s); the renewal: %s, record %s with the result of the %s; control %s: a lapsed holder nobody resolved finishing late: %s, record %s",
		v.Key, outcomeOf(kErr), errText(resErr), renewed, outcomeOf(holder.err), recordText(mid), outcomeOf(renewal.err), recordText(final), result,
		cv.Key, outcomeOf(chErr), recordText(crec))
	switch {
	case chErr != nil || ch.count() != 1 || crec == nil || crec.State != store.Committed || crec.Attempt != 1 ||
		resErr != nil || !renewed || holder.n.count() != 1 || k.count() != 0:
		return controlFailed(pk.Action, detail), nil
	case mid == nil || mid.State != store.Executing || mid.Attempt != 2:
		return fail(pk.Action, "the late outcome of attempt 1 settled the renewal's attempt", detail), nil
	case holderReason != "key_lost" && holderReason != "outcome_conflict" || !errors.Is(holder.err, latch.ErrAmbiguousEffect):
		return fail(pk.Action, "the late holder was not refused (key_lost or outcome_conflict)", detail), nil
	case renewal.err != nil || final == nil || final.State != store.Committed || final.Attempt != 2 || result != "renewal":
		return fail(pk.Action, "the renewal did not settle its own attempt", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// errText renders an error for a detail ("ok" for nil).
func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
