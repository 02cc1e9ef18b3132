package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Reasons for N/A: each is about the operator's document.
const (
	naNoApprove     = "no action in the policy can decide approve"
	naNoAllowEffect = "no action with an effect template can decide allow"
	naNoAllow       = "no action in the policy can decide allow"
	naNoRunnable    = "no action in the policy can run (none can decide allow or approve)"
	naNoActions     = "the policy lists no actions"
	naMaxAttempts   = "every action with an effect template that can decide allow has max_attempts: 1, so a failed effect is never retried and the control (NotExecuted → failed → the retry runs) cannot run"
	naNoAuthority   = "policy has no authority section"
	naNoExpiry      = "no grant has an expires_at"
	naNoDelegable   = "no grant is delegable"
)

// errRemote is the executors' "something went wrong after the remote acted".
var errRemote = errors.New("verify: connection reset after the request was sent")

// outcomeOf renders what a call returned, for details.
func outcomeOf(err error) string {
	var (
		am *latch.ApprovalMismatchError
		ee *latch.EffectError
		de *latch.DeniedError
		ar *latch.ApprovalRequiredError
		ae *latch.AmbiguousError
		au *latch.AuthorityError
		se *latch.ScopeError
		be *latch.BudgetError
	)
	switch {
	case err == nil:
		return "ran"
	case errors.As(err, &se):
		return "refused " + se.Reason
	case errors.As(err, &be):
		return "refused " + be.Reason + " on budget " + be.Budget
	case errors.As(err, &au):
		if au.Dimension != "" {
			return "denied " + au.Reason + " on " + au.Dimension
		}
		return "denied " + au.Reason
	case errors.As(err, &am):
		return "refused " + am.Reason
	case errors.As(err, &ee):
		return "refused " + ee.Reason
	case errors.As(err, &de):
		return "denied " + de.Reason
	case errors.As(err, &ar):
		return "approval required"
	case errors.As(err, &ae):
		return "ambiguous"
	case errors.Is(err, latch.ErrNotExecuted):
		return "not executed"
	}
	return "error: " + err.Error()
}

// effectRefusal returns the refusal reason of an *latch.EffectError, or "".
func effectRefusal(err error) string {
	var ee *latch.EffectError
	if errors.As(err, &ee) {
		return ee.Reason
	}
	return ""
}

// runnable picks an action that can run, with up to n distinct variants: one the policy allows,
// else one it sends to approval. When there is none it says why.
func (r *runner) runnable(n int) (*pick, string) {
	o := chooseOpts{n: n}
	if pk, _ := r.pickFor(policy.Allow, o, ""); pk != nil {
		return pk, ""
	}
	if pk, _ := r.pickFor(policy.Approve, o, ""); pk != nil {
		return pk, ""
	}
	if _, why := r.pickFor(policy.Allow, o, ""); strings.HasPrefix(why, noGrant) {
		return nil, why
	}
	if _, why := r.pickFor(policy.Approve, o, ""); strings.HasPrefix(why, noGrant) {
		return nil, why
	}
	return nil, naNoRunnable
}

// variant returns variant i of pk, or its last one when it has fewer (an action without an
// effect template may not have distinct arguments to offer, and needs none).
func (pk *pick) variant(i int) variant {
	return pk.variants[min(i, len(pk.variants)-1)]
}

// effectPick picks an allowed action with an effect template and n distinct keys, or says why
// there is none.
func (r *runner) effectPick(n int) (*pick, string) {
	return r.pickFor(policy.Allow, chooseOpts{needEffect: true, n: n}, naNoAllowEffect)
}

// g1: an approval for one action presented for a mutated one is refused as mismatch, nothing
// executes and the approval stays granted; control: the original action with it commits.
func (r *runner) g1(ctx context.Context) (outcome, error) {
	pk, why := r.pickFor(policy.Approve, chooseOpts{}, naNoApprove)
	if pk == nil {
		return notApplicable(why), nil
	}
	base := pk.variants[0]
	mut, change, ok := pk.mutate(r.pol(), base)
	if !ok {
		return notApplicable(fmt.Sprintf("no mutation of %s that the policy still sends to approval", pk.Action)), nil
	}
	e, err := r.newEnv(ctx, "g1", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	id, err := e.requestApproval(ctx, pk, base)
	if err != nil {
		return controlFailed(pk.Action, "approval for "+base.describe()+": "+err.Error()), nil
	}

	var mc counter
	_, merr := e.execApproved(ctx, id, pk, mut, mc.commit)
	a, err := e.st.Approval(ctx, id)
	if err != nil {
		return outcome{}, fmt.Errorf("read approval %s: %w", id, err)
	}
	afterMut := a.Status

	var cc counter
	_, cerr := e.execApproved(ctx, id, pk, base, cc.commit)
	if a, err = e.st.Approval(ctx, id); err != nil {
		return outcome{}, fmt.Errorf("read approval %s: %w", id, err)
	}
	afterCtl := a.Status

	detail := fmt.Sprintf("approval granted for %s, presented for the mutated action (%s): %s, executions: %d, approval %s; control, the original with it: %s, executions: %d, approval %s",
		base.describe(), change, outcomeOf(merr), mc.count(), afterMut, outcomeOf(cerr), cc.count(), afterCtl)
	var me *latch.ApprovalMismatchError
	switch {
	case cerr != nil || cc.count() != 1 || afterCtl != store.Consumed:
		return controlFailed(pk.Action, detail), nil
	case mc.count() != 0:
		return fail(pk.Action, "the mutated action executed", detail), nil
	case !errors.As(merr, &me) || me.Reason != "mismatch":
		return fail(pk.Action, "the mutated action was not refused as mismatch", detail), nil
	case afterMut != store.Granted:
		return fail(pk.Action, "refusing the mutated action changed the approval", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// g2: a consumed approval presented again is refused as consumed, with one execution in all;
// control: its first use commits.
func (r *runner) g2(ctx context.Context) (outcome, error) {
	pk, why := r.pickFor(policy.Approve, chooseOpts{}, naNoApprove)
	if pk == nil {
		return notApplicable(why), nil
	}
	v := pk.variants[0]
	e, err := r.newEnv(ctx, "g2", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	id, err := e.requestApproval(ctx, pk, v)
	if err != nil {
		return controlFailed(pk.Action, "approval for "+v.describe()+": "+err.Error()), nil
	}
	var c counter
	_, ferr := e.execApproved(ctx, id, pk, v, c.commit)
	first := c.count()
	a, err := e.st.Approval(ctx, id)
	if err != nil {
		return outcome{}, fmt.Errorf("read approval %s: %w", id, err)
	}
	_, rerr := e.execApproved(ctx, id, pk, v, c.commit)

	detail := fmt.Sprintf("%s: first use %s (approval %s); replay %s; executions in all: %d",
		v.describe(), outcomeOf(ferr), a.Status, outcomeOf(rerr), c.count())
	var me *latch.ApprovalMismatchError
	switch {
	case ferr != nil || first != 1 || a.Status != store.Consumed:
		return controlFailed(pk.Action, detail), nil
	case c.count() != 1:
		return fail(pk.Action, "the replayed approval executed again", detail), nil
	case !errors.As(rerr, &me) || me.Reason != "consumed":
		return fail(pk.Action, "the replay was not refused as consumed", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// g3: a second call on a committed effect key is refused with ErrDuplicateEffect and does not
// execute; control: the first call commits.
func (r *runner) g3(ctx context.Context) (outcome, error) {
	pk, why := r.effectPick(1)
	if pk == nil {
		return notApplicable(why), nil
	}
	v := pk.variants[0]
	e, err := r.newEnv(ctx, "g3", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	var c counter
	_, ferr := e.exec(ctx, pk, v, c.commit)
	first := c.count()
	st1, err := e.effectState(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}
	_, serr := e.exec(ctx, pk, v, c.commit)

	detail := fmt.Sprintf("%s: first call %s (record %s); second call %s; executions in all: %d",
		v.describe(), outcomeOf(ferr), st1, outcomeOf(serr), c.count())
	switch {
	case ferr != nil || first != 1 || st1 != store.Committed:
		return controlFailed(pk.Action, detail), nil
	case c.count() != 1:
		return fail(pk.Action, "the duplicate executed", detail), nil
	case !errors.Is(serr, latch.ErrDuplicateEffect) || effectRefusal(serr) != "committed":
		return fail(pk.Action, "the duplicate was not refused as committed", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// g4: eight OS processes make the same call on one key: exactly one executes and one commit is
// recorded; control: eight processes on eight keys all commit.
func (r *runner) g4(ctx context.Context) (outcome, error) {
	pk, why := r.effectPick(racers + 1)
	if pk == nil {
		return notApplicable(why), nil
	}
	e, err := r.newEnv(ctx, "g4", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	ctl, err := r.race(ctx, e, pk, pk.variants[1:racers+1], filepath.Join(r.tmp, "g4-control"))
	if err != nil {
		return outcome{}, err
	}
	ctlCommitted := 0
	for _, v := range pk.variants[1 : racers+1] {
		st, err := e.effectState(ctx, v.Key)
		if err != nil {
			return outcome{}, err
		}
		if st == store.Committed && ctl.execs[v.Key] == 1 {
			ctlCommitted++
		}
	}

	v := pk.variants[0]
	same := make([]variant, racers)
	for i := range same {
		same[i] = v
	}
	main, err := r.race(ctx, e, pk, same, filepath.Join(r.tmp, "g4-main"))
	if err != nil {
		return outcome{}, err
	}
	st, err := e.effectState(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}
	committedReceipts := 0
	for s, err := range e.st.Receipts(ctx, store.ReceiptFilter{EffectKey: v.Key}) {
		if err != nil {
			return outcome{}, fmt.Errorf("read receipts: %w", err)
		}
		var doc struct {
			Result string `json:"result"`
		}
		if json.Unmarshal(s.Doc, &doc) == nil && doc.Result == receipt.Committed {
			committedReceipts++
		}
	}

	detail := fmt.Sprintf("%d processes on %s: %s; record %s, %d committed receipts; control, %d processes on %d keys: %s, %d keys committed once",
		racers, v.Key, main, st, committedReceipts, racers, racers, ctl, ctlCommitted)
	switch {
	case ctl.total != racers || ctl.committed() != racers || ctlCommitted != racers:
		return controlFailed(pk.Action, detail), nil
	case main.total != 1:
		return fail(pk.Action, fmt.Sprintf("%d processes executed one effect", main.total), detail), nil
	case st != store.Committed || committedReceipts != 1 || main.committed() != 1:
		return fail(pk.Action, "not exactly one commit recorded", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// g5: an executor that acts and then errors leaves the effect ambiguous, and a retry is refused
// without executing; control: NotExecuted leaves it failed, and the retry runs.
func (r *runner) g5(ctx context.Context) (outcome, error) {
	pk, why := r.pickFor(policy.Allow, chooseOpts{needEffect: true, n: 2,
		accept: func(a *policy.Action) bool { return a.MaxAttempts != 1 }}, naNoAllowEffect)
	if pk == nil {
		if other, _ := r.effectPick(1); other != nil && !strings.HasPrefix(why, noGrant) {
			return notApplicable(naMaxAttempts), nil
		}
		return notApplicable(why), nil
	}
	v, cv := pk.variants[0], pk.variants[1]
	e, err := r.newEnv(ctx, "g5", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	var c counter
	_, err1 := e.exec(ctx, pk, v, c.actThenFail(errRemote))
	st1, err := e.effectState(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}
	_, err2 := e.exec(ctx, pk, v, c.commit)

	var cc counter
	_, cerr1 := e.exec(ctx, pk, cv, notExecuted)
	cst1, err := e.effectState(ctx, cv.Key)
	if err != nil {
		return outcome{}, err
	}
	_, cerr2 := e.exec(ctx, pk, cv, cc.commit)
	cst2, err := e.effectState(ctx, cv.Key)
	if err != nil {
		return outcome{}, err
	}

	detail := fmt.Sprintf("%s: executor acted then errored: %s (record %s); blind retry %s; executions: %d; control %s: NotExecuted %s (record %s), retry %s (record %s)",
		v.Key, outcomeOf(err1), st1, outcomeOf(err2), c.count(), cv.Key, outcomeOf(cerr1), cst1, outcomeOf(cerr2), cst2)
	switch {
	case !errors.Is(cerr1, latch.ErrNotExecuted) || cst1 != store.Failed || cerr2 != nil || cc.count() != 1 || cst2 != store.Committed:
		return controlFailed(pk.Action, detail), nil
	case !errors.Is(err1, latch.ErrAmbiguous) || st1 != store.Ambiguous:
		return fail(pk.Action, "the unknown outcome was not recorded ambiguous", detail), nil
	case c.count() != 1:
		return fail(pk.Action, "the blind retry executed", detail), nil
	case !errors.Is(err2, latch.ErrAmbiguousEffect):
		return fail(pk.Action, "the blind retry was not refused as ambiguous", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// g6: an action the policy does not list is denied unknown_action and does not execute;
// control: a listed action is not refused as unknown (it runs, when the policy lets one run).
func (r *runner) g6(ctx context.Context) (outcome, error) {
	names := sortedActions(r.pol())
	if len(names) == 0 {
		return notApplicable(naNoActions), nil
	}
	// With an authority section the unlisted call is made under a grant that covers its name, so
	// that the authority axis allows it and the refusal is the policy's own; when no grant can
	// cover an unlisted name, the section is left out of this scenario for the same reason.
	u := r.unlistedCall()
	name := u.name
	sp := r.sp
	var extra map[string]policy.Decision
	if r.faults[faultAllowUnknown] {
		extra = map[string]policy.Decision{name: policy.Allow}
	}
	if extra != nil || !u.covered {
		var err error
		if sp, err = newScenarioPolicy(r.lifted, extra, u.covered); err != nil {
			return outcome{}, err
		}
	}
	e, err := r.newEnv(ctx, "g6", sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	var c counter
	_, uerr := e.g.Execute(withPrincipal(ctx, u.principal), u.call(), c.commit)

	var cerr error
	var cc counter
	ctlOK := false
	ctlAction := ""
	if pk, _ := r.runnable(1); pk != nil {
		ctlAction = pk.Action
		cerr = e.run(ctx, pk, pk.variants[0], cc.commit)
		ctlOK = cerr == nil && cc.count() == 1
	} else {
		// Nothing can run: the control is that a listed action is refused for its own reason.
		ctlAction = names[0]
		_, cerr = e.g.Execute(withPrincipal(ctx, u.principal), &latch.Call{Action: names[0]}, cc.commit)
		var de *latch.DeniedError
		ctlOK = cc.count() == 0 && (!errors.As(cerr, &de) || de.Reason != policy.ReasonUnknownAction)
	}

	note := ""
	switch {
	case r.cfg.Policy.Authority == nil:
	case u.covered:
		note = fmt.Sprintf(" (as %s, whom the authority section allows it)", principalText(u.principal))
	default:
		note = " (no grant can cover a name the policy does not list, so the authority section is left out of this scenario: the refusal observed is the policy's)"
	}
	detail := fmt.Sprintf("unlisted %s%s: %s, executions: %d; control, listed %s: %s, executions: %d",
		name, note, outcomeOf(uerr), c.count(), ctlAction, outcomeOf(cerr), cc.count())
	var de *latch.DeniedError
	switch {
	case !ctlOK:
		return controlFailed(name, detail), nil
	case c.count() != 0:
		return fail(name, "the unlisted action executed", detail), nil
	case !errors.As(uerr, &de) || de.Reason != policy.ReasonUnknownAction:
		return fail(name, "the unlisted action was not denied unknown_action", detail), nil
	}
	return pass(name, detail), nil
}

// g7: a call with no principal is refused no_principal, executes nothing and writes nothing at
// all; control: the same call with a principal runs.
func (r *runner) g7(ctx context.Context) (outcome, error) {
	pk, why := r.runnable(2)
	if pk == nil {
		return notApplicable(why), nil
	}
	v := pk.variants[0]
	e, err := r.newEnv(ctx, "g7", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	before, err := e.snapshot(ctx)
	if err != nil {
		return outcome{}, err
	}
	var c counter
	_, nerr := e.g.Execute(ctx, v.call(pk.Action), c.commit)
	after, err := e.snapshot(ctx)
	if err != nil {
		return outcome{}, err
	}
	// The control uses another key: a faulty first call may have taken this one.
	var cc counter
	cerr := e.run(ctx, pk, pk.variant(1), cc.commit)
	final, err := e.snapshot(ctx)
	if err != nil {
		return outcome{}, err
	}

	detail := fmt.Sprintf("%s without a principal: %s, executions: %d, store before: %s, after: %s; control with principal %s: %s, executions: %d, store after: %s",
		v.describe(), outcomeOf(nerr), c.count(), before, after, principalText(pk.principal()), outcomeOf(cerr), cc.count(), final)
	var de *latch.DeniedError
	switch {
	case cerr != nil || cc.count() != 1 || final == after:
		return controlFailed(pk.Action, detail), nil
	case c.count() != 0:
		return fail(pk.Action, "the call without a principal executed", detail), nil
	case before != after:
		return fail(pk.Action, "the call without a principal wrote to the store", detail), nil
	case !errors.As(nerr, &de) || de.Reason != "no_principal":
		return fail(pk.Action, "the call without a principal was not denied no_principal", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// g10: an executor that returns a timeout, returns any other error, or panics leaves the call
// ambiguous (receipt, and record when there is an effect key); control: NotExecuted → failed.
//
// G10 runs for an allowed action without an effect template too: the outcome table (docs/guarantees.md#outcomes) applies
// to every call, and the receipt's result is observable without an effect record. An action with
// an effect template is preferred, so that the record is observed as well.
func (r *runner) g10(ctx context.Context) (outcome, error) {
	pk, _ := r.effectPick(4)
	if pk == nil {
		var why string
		if pk, why = r.pickFor(policy.Allow, chooseOpts{}, naNoAllow); pk == nil {
			return notApplicable(why), nil
		}
	}
	e, err := r.newEnv(ctx, "g10", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	var c counter
	timeout := fmt.Errorf("verify: call the remote: %w", context.DeadlineExceeded)
	cases := []struct {
		name   string
		fn     executor
		cause  error // what the caller's error must still match; nil for a panic
		result string
	}{
		{"timeout", c.actThenFail(timeout), context.DeadlineExceeded, receipt.Ambiguous},
		{"other error", c.actThenFail(errRemote), errRemote, receipt.Ambiguous},
		{"panic", func(ctx context.Context, args json.RawMessage) (any, error) {
			c.n.Add(1)
			panic("verify: executor panicked after acting")
		}, nil, receipt.Ambiguous},
		{"NotExecuted", notExecuted, latch.ErrNotExecuted, receipt.Failed},
	}
	var seen []string
	var bad []string
	controlOK := true
	for i, tc := range cases {
		v := pk.variant(i)
		seq0, _, err := e.lastReceipt(ctx)
		if err != nil {
			return outcome{}, err
		}
		panicked, cerr := e.execRecover(ctx, pk, v, tc.fn)
		seq, result, err := e.lastReceipt(ctx)
		if err != nil {
			return outcome{}, err
		}
		if seq == seq0 {
			result = "no receipt"
		}
		state := store.State("")
		if v.Key != "" {
			if state, err = e.effectState(ctx, v.Key); err != nil {
				return outcome{}, err
			}
		}
		got := result
		if v.Key != "" {
			got += ", record " + string(state)
		}
		seen = append(seen, fmt.Sprintf("%s → %s", tc.name, got))

		ok := result == tc.result && (v.Key == "" || string(state) == tc.result)
		switch {
		case tc.cause == nil:
			ok = ok && panicked != nil
		case tc.result == receipt.Failed:
			ok = ok && errors.Is(cerr, tc.cause)
		default:
			ok = ok && errors.Is(cerr, latch.ErrAmbiguous) && errors.Is(cerr, tc.cause)
		}
		if !ok {
			if tc.result == receipt.Failed {
				controlOK = false
			} else {
				bad = append(bad, tc.name)
			}
		}
	}
	detail := pk.variants[0].describe() + ": " + strings.Join(seen, "; ")
	switch {
	case !controlOK:
		return controlFailed(pk.Action, detail), nil
	case len(bad) > 0:
		return fail(pk.Action, "not ambiguous: "+strings.Join(bad, ", "), detail), nil
	}
	return pass(pk.Action, detail), nil
}

// g11: one receipt of a chain altered in the store is reported content_altered at its seq, and
// nothing else; control: the unaltered chain verifies.
func (r *runner) g11(ctx context.Context) (outcome, error) {
	e, err := r.newEnv(ctx, "g11", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	// A short chain: whatever the policy lets run, and a denied unlisted call.
	pk, _ := r.runnable(1)
	unlisted := &latch.Call{Action: unlistedName(r.pol()), Arguments: json.RawMessage(`{"verify":"chain"}`)}
	action := unlisted.Action
	for i := range 3 {
		var c counter
		if pk != nil && i != 1 {
			action = pk.Action
			v := pk.variants[0]
			_ = e.run(ctx, pk, v, c.commit) // a refusal leaves a receipt too
			continue
		}
		_, _ = e.g.Execute(withPrincipal(ctx, latch.Principal{Agent: verifyAgent}), unlisted, c.commit)
	}
	head, err := e.st.Head(ctx)
	if err != nil {
		return outcome{}, fmt.Errorf("read chain head: %w", err)
	}
	if head.Seq < 2 {
		return controlFailed(action, fmt.Sprintf("three calls left %d receipts", head.Seq)), nil
	}
	ctl, err := e.verifyChain(ctx)
	if err != nil {
		return outcome{}, err
	}

	const seq = 2
	var doc []byte
	for s, err := range e.st.Receipts(ctx, store.ReceiptFilter{AfterSeq: seq - 1}) {
		if err != nil {
			return outcome{}, fmt.Errorf("read receipt %d: %w", seq, err)
		}
		doc = s.Doc
		break
	}
	altered, err := alterDocument(doc)
	if err != nil {
		return outcome{}, err
	}
	if err := r.sc.alterReceipt(ctx, e.url, seq, altered); err != nil {
		return outcome{}, err
	}
	got, err := e.verifyChain(ctx)
	if err != nil {
		return outcome{}, err
	}
	if r.faults[faultChainBlind] {
		got = receipt.Report{OK: true, Verified: got.Verified, Breaks: []receipt.Break{}}
	}

	detail := fmt.Sprintf("chain of %d receipts: unaltered verifies %v (%d verified, %d breaks); receipt %d altered (decision_reason): ok %v, breaks: %s",
		head.Seq, ctl.OK, ctl.Verified, len(ctl.Breaks), seq, got.OK, breaksText(got.Breaks))
	switch {
	case !ctl.OK || ctl.Verified != head.Seq:
		return controlFailed(action, detail), nil
	case got.OK || len(got.Breaks) == 0:
		return fail(action, "the altered receipt was not detected", detail), nil
	case len(got.Breaks) != 1 || got.Breaks[0].Kind != receipt.BreakContentAltered || got.Breaks[0].Seq != seq:
		return fail(action, fmt.Sprintf("the alteration was not named content_altered at %d alone", seq), detail), nil
	}
	return pass(action, detail), nil
}

// alterDocument changes one field of a receipt document, as an edit of the database would.
func alterDocument(doc []byte) ([]byte, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("read receipt document: %w", err)
	}
	m["decision_reason"] = "altered by latch verify"
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("alter receipt document: %w", err)
	}
	return out, nil
}

// l1: a holder's lease lapses and a contender arrives: the record becomes ambiguous, the
// contender is refused, nothing executes again, and the late holder cannot record its outcome;
// control: a contender during a live lease is refused in_progress and the holder commits.
func (r *runner) l1(ctx context.Context) (outcome, error) {
	pk, why := r.effectPick(2)
	if pk == nil {
		return notApplicable(why), nil
	}
	v, cv := pk.variants[0], pk.variants[1]
	e, err := r.newEnv(ctx, "l1", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	// Control: the contender arrives while the holder's lease is live.
	var ch, ck counter
	var ckErr error
	_, chErr := e.exec(ctx, pk, cv, func(_ context.Context, _ json.RawMessage) (any, error) {
		ch.n.Add(1)
		_, ckErr = e.exec(ctx, pk, cv, ck.commit)
		return map[string]any{"verified": true}, nil
	})
	cst, err := e.effectState(ctx, cv.Key)
	if err != nil {
		return outcome{}, err
	}

	// The lease lapses while the holder runs; then the contender arrives.
	var h, k counter
	var kErr, readErr error
	mid := store.State("unobserved") // until the holder runs and the contender comes
	_, hErr := e.exec(ctx, pk, v, func(_ context.Context, _ json.RawMessage) (any, error) {
		h.n.Add(1)
		rec, err := e.st.Effect(ctx, v.Key)
		if err != nil {
			readErr = err
			return nil, err
		}
		e.clock.setAfter(rec.LeaseExpiresAt)
		_, kErr = e.exec(ctx, pk, v, k.commit)
		mid, readErr = e.effectState(ctx, v.Key)
		return map[string]any{"verified": true}, nil
	})
	if readErr != nil {
		return outcome{}, readErr
	}
	st, err := e.effectState(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}

	detail := fmt.Sprintf("%s: holder executions: %d, lease lapsed, contender %s (executions: %d), record %s; holder finishing late %s, record %s; control %s: contender during the live lease %s (executions: %d), holder %s, record %s",
		v.Key, h.count(), outcomeOf(kErr), k.count(), mid, outcomeOf(hErr), st, cv.Key, outcomeOf(ckErr), ck.count(), outcomeOf(chErr), cst)
	switch {
	case chErr != nil || ch.count() != 1 || ck.count() != 0 || effectRefusal(ckErr) != "in_progress" || cst != store.Committed:
		return controlFailed(pk.Action, detail), nil
	case k.count() != 0:
		return fail(pk.Action, "the contender executed after the lease lapsed", detail), nil
	case h.count() != 1:
		return fail(pk.Action, "the holder did not run", detail), nil
	case !errors.Is(kErr, latch.ErrAmbiguousEffect) || mid != store.Ambiguous:
		return fail(pk.Action, "the lapsed lease did not make the effect ambiguous", detail), nil
	case st != store.Committed || hErr != nil:
		// The holder's late outcome settles its own attempt: nobody resolved it meanwhile.
		return fail(pk.Action, "the late holder's outcome did not settle its own attempt", detail), nil
	}
	return pass(pk.Action, detail), nil
}
