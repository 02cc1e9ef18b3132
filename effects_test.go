package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// A reconcile hook that truthfully answers "not executed yet" about a holder whose lease lapsed
// while it still runs must not turn the lapse into a retry: the holder executes once, its late
// outcome settles its own attempt, and the contender is refused (on both backends).
func TestReconcileNeverRetriesALapsedLease(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			var executions atomic.Int32
			remote := map[string]bool{} // what the provider has done, by invoice
			hook := latch.Reconciler(func(_ context.Context, a *latch.Attempt, c Charge) (latch.Outcome, string, error) {
				if !a.HolderMayAct {
					t.Errorf("hook asked about a lapsed lease with HolderMayAct false: %+v", a)
				}
				if remote[c.InvoiceID] {
					return latch.OutcomeCommitted, "ch_" + c.InvoiceID, nil
				}
				return latch.OutcomeNotExecuted, "", nil // true when asked: the holder has not reached the provider yet
			})
			charge := func(ctx context.Context, c Charge) (string, error) {
				executions.Add(1)
				remote[c.InvoiceID] = true
				return "ch_" + c.InvoiceID, nil
			}
			var contenderErr error
			contenderRan := false
			holder := func(ctx context.Context, c Charge) (string, error) {
				// The holder's lease lapses before it reaches the provider; a contender with the
				// hook arrives meanwhile.
				e.clock.Add(2 * time.Second)
				_, contenderErr = latch.Protect(e.g, "billing.charge", func(ctx context.Context, c Charge) (string, error) {
					contenderRan = true
					return charge(ctx, c)
				}, &latch.Options{Reconcile: hook, Lease: time.Second})(agent(context.Background()), c)
				return charge(ctx, c)
			}
			got, err := latch.Protect(e.g, "billing.charge", holder, &latch.Options{Lease: time.Second})(agent(t.Context()), Charge{InvoiceID: "inv_131", Amount: 1})
			if contenderRan || !errors.Is(contenderErr, latch.ErrAmbiguousEffect) {
				t.Fatalf("contender ran %t, err %v; want refused ErrAmbiguousEffect without running", contenderRan, contenderErr)
			}
			if err != nil || got != "ch_inv_131" {
				t.Fatalf("holder = %q, %v; want its own result", got, err)
			}
			if n := executions.Load(); n != 1 {
				t.Fatalf("%d executions, want 1", n)
			}
			eff, err := e.g.Store().Effect(t.Context(), "charge:inv_131")
			if err != nil || eff.State != store.Committed || eff.ResolvedBy != "" {
				t.Fatalf("effect = %+v, %v; want committed by its holder", eff, err)
			}
			evs, _ := e.g.Store().Events(t.Context(), store.EventFilter{EffectKey: "charge:inv_131"})
			var refused bool
			for _, ev := range evs {
				if ev.Kind == store.EventReconcileStarted && strings.Contains(string(ev.Payload), `"refused":"holder_may_act"`) {
					refused = true
				}
			}
			if !refused {
				t.Errorf("no reconcile_started event saying the hook's answer was refused: %v", evs)
			}
			// A later call with the hook: a duplicate, with the holder's result.
			_, err = latch.Protect(e.g, "billing.charge", charge, &latch.Options{Reconcile: hook})(agent(t.Context()), Charge{InvoiceID: "inv_131", Amount: 1})
			if r, ok := latch.ResultOf[string](err); !errors.Is(err, latch.ErrAlreadyCommitted) || !ok || r != "ch_inv_131" || executions.Load() != 1 {
				t.Errorf("later call = %v (result %q); want ErrAlreadyCommitted with ch_inv_131, still 1 execution", err, r)
			}
			verifyChain(t, e.g)
		})
	}
}

// A holder whose attempt was resolved meanwhile by an operator, and who reports the opposite,
// keeps the resolution; the conflict is written (event, receipt, record) and returned.
func TestLateOutcomeConflictsWithResolution(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	c := Charge{InvoiceID: "inv_c", Amount: 1}
	holder := func(ctx context.Context, c Charge) (string, error) {
		e.clock.Add(latch.DefaultLease + time.Second)
		_, err := latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) { return "", nil }, nil)(agent(context.Background()), c)
		if !errors.Is(err, latch.ErrAmbiguousEffect) {
			t.Errorf("contender = %v, want ErrAmbiguousEffect", err)
		}
		if _, err := e.g.ResolveEffect(ctx, &store.ResolveRequest{Key: "charge:inv_c", To: latch.StateFailed, By: "cli:ana", Note: "provider shows nothing"}); err != nil {
			t.Errorf("Resolve = %v", err)
		}
		return "ch_late", nil
	}
	got, err := latch.Protect(e.g, "billing.charge", holder, nil)(agent(t.Context()), c)
	if got != "ch_late" || !errors.Is(err, latch.ErrOutcomeConflict) {
		t.Fatalf("holder = %q, %v; want its result and ErrOutcomeConflict", got, err)
	}
	eff, _ := e.g.Store().Effect(t.Context(), "charge:inv_c")
	if eff.State != store.Failed || eff.Conflict == "" || eff.Note != "provider shows nothing" {
		t.Errorf("effect = %+v; want failed kept, with the conflict and the note", eff)
	}
	if doc := lastReceipt(t, e.g); !strings.HasPrefix(doc["error"].(string), "outcome_conflict") {
		t.Errorf("holder receipt error = %v, want outcome_conflict", doc["error"])
	}
	// Nothing renews a conflicted key until a person resolves it again.
	_, err = latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) {
		t.Error("a conflicted key was renewed")
		return "", nil
	}, nil)(agent(t.Context()), c)
	if !errors.Is(err, latch.ErrOutcomeConflict) {
		t.Errorf("call on a conflicted key = %v, want ErrOutcomeConflict", err)
	}
	verifyChain(t, e.g)
}

// Same key, other arguments: refused with its own reason, still a duplicate; a second worker
// (another agent) with the same arguments is the plain duplicate.
func TestKeyConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	ok := func(context.Context, Charge) (string, error) { return "ch_1", nil }
	charge := latch.Protect(e.g, "billing.charge", ok, nil)
	if _, err := charge(agent(t.Context()), Charge{InvoiceID: "inv_k", Amount: 100}); err != nil {
		t.Fatal(err)
	}
	rc, err := e.g.Execute(agent(t.Context()), &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_k","amount":900}`)},
		func(context.Context, json.RawMessage) (any, error) { t.Error("ran"); return nil, nil })
	var ee *latch.EffectError
	if !errors.As(err, &ee) || ee.Reason != "key_conflict" || ee.State != latch.StateCommitted || !errors.Is(err, latch.ErrDuplicateEffect) {
		t.Fatalf("other arguments = %v (%+v), want key_conflict matching ErrDuplicateEffect", err, ee)
	}
	if !strings.Contains(err.Error(), "arguments differ") || !strings.Contains(rc.Error, "key conflict") || rc.Result != "blocked" {
		t.Errorf("error %q, receipt %s %q; want both to say the arguments differ", err, rc.Result, rc.Error)
	}
	other := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker-2"})
	_, err = charge(other, Charge{InvoiceID: "inv_k", Amount: 100})
	if !errors.As(err, &ee) || ee.Reason != "committed" || !errors.Is(err, latch.ErrAlreadyCommitted) {
		t.Errorf("second worker, same arguments = %v, want the plain duplicate", err)
	}
}

// The duplicate sentinels say which duplicate; the error's state is the record's, in the words of
// latch effects.
func TestDuplicateSentinels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	charge := func(ctx context.Context, c Charge) (string, error) { return "ch_" + c.InvoiceID, nil }
	var inProgress error
	_, err := latch.Protect(e.g, "billing.charge", func(ctx context.Context, c Charge) (string, error) {
		_, inProgress = latch.Protect(e.g, "billing.charge", charge, nil)(agent(context.Background()), c)
		return charge(ctx, c)
	}, nil)(agent(t.Context()), Charge{InvoiceID: "inv_d", Amount: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ee *latch.EffectError
	if !errors.Is(inProgress, latch.ErrInProgress) || !errors.Is(inProgress, latch.ErrDuplicateEffect) || errors.Is(inProgress, latch.ErrAlreadyCommitted) ||
		!errors.As(inProgress, &ee) || ee.State != latch.StateExecuting {
		t.Errorf("under a live lease = %v (%+v), want ErrInProgress and ErrDuplicateEffect, state executing", inProgress, ee)
	}
	_, err = latch.Protect(e.g, "billing.charge", charge, nil)(agent(t.Context()), Charge{InvoiceID: "inv_d", Amount: 1})
	if !errors.Is(err, latch.ErrAlreadyCommitted) || !errors.Is(err, latch.ErrDuplicateEffect) || errors.Is(err, latch.ErrInProgress) ||
		!errors.As(err, &ee) || ee.State != latch.StateCommitted {
		t.Errorf("committed = %v, want ErrAlreadyCommitted and ErrDuplicateEffect, state committed", err)
	}
	if r, ok := latch.ResultOf[string](err); !ok || r != "ch_inv_d" {
		t.Errorf("ResultOf = %q, %t; want ch_inv_d", r, ok)
	}
	if _, ok := latch.ResultOf[string](inProgress); ok {
		t.Errorf("ResultOf of an in-progress refusal = true, want false")
	}
	if _, ok := latch.ResultOf[int](err); ok {
		t.Errorf("ResultOf[int] of a string result = true, want false")
	}
}

// A person resolving through the Guard stores a result and a note: later duplicates get the
// result.
func TestResolveWithResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	lost := func(context.Context, Charge) (string, error) { return "", io.ErrUnexpectedEOF }
	charge := latch.Protect(e.g, "billing.charge", lost, nil)
	if _, err := charge(agent(t.Context()), Charge{InvoiceID: "inv_res", Amount: 1}); !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatal(err)
	}
	type receiptOf struct {
		ChargeID string `json:"charge_id"`
	}
	eff, err := e.g.ResolveEffect(t.Context(), &store.ResolveRequest{Key: "charge:inv_res", To: latch.StateCommitted, By: "cli:ana",
		Result: json.RawMessage(`{"charge_id":"ch_found"}`), Note: "seen in the dashboard"})
	if err != nil || eff.Note != "seen in the dashboard" || string(eff.Result) != `{"charge_id":"ch_found"}` {
		t.Fatalf("Resolve = %+v, %v", eff, err)
	}
	_, err = charge(agent(t.Context()), Charge{InvoiceID: "inv_res", Amount: 1})
	if r, ok := latch.ResultOf[receiptOf](err); !errors.Is(err, latch.ErrAlreadyCommitted) || !ok || r.ChargeID != "ch_found" {
		t.Errorf("duplicate after the resolution = %v, result %+v %t; want ch_found", err, r, ok)
	}
}

// EffectToken is stable across every attempt of one key; IdempotencyToken changes per attempt.
func TestEffectToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	var effectTokens, attemptTokens []string
	fail := func(ctx context.Context, c Charge) (string, error) {
		effectTokens = append(effectTokens, latch.EffectToken(ctx))
		attemptTokens = append(attemptTokens, latch.IdempotencyToken(ctx))
		return "", latch.NotExecuted(errors.New("declined"))
	}
	charge := latch.Protect(e.g, "billing.charge", fail, nil)
	for range 2 {
		if _, err := charge(agent(t.Context()), Charge{InvoiceID: "inv_tok", Amount: 1}); !errors.Is(err, latch.ErrNotExecuted) {
			t.Fatal(err)
		}
	}
	_, _ = latch.Protect(e.g, "billing.charge", fail, nil)(agent(t.Context()), Charge{InvoiceID: "inv_other", Amount: 1})
	if len(effectTokens) != 3 || effectTokens[0] == "" || effectTokens[0] != effectTokens[1] || effectTokens[0] == effectTokens[2] {
		t.Errorf("EffectToken = %q; want one per key, the same across attempts", effectTokens)
	}
	if attemptTokens[0] == attemptTokens[1] || attemptTokens[0] == effectTokens[0] {
		t.Errorf("IdempotencyToken = %q; want one per attempt, unlike EffectToken", attemptTokens)
	}
	if latch.EffectToken(t.Context()) != "" {
		t.Errorf("EffectToken outside an executor is not empty")
	}
}

// Executor error text and panic values that are not valid UTF-8 are recorded: the outcome and
// its receipt are stored, with the bytes escaped.
func TestInvalidUTF8OutcomesAreRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	_, err := latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) {
		return "", errors.New("provider said \xff\xfe")
	}, nil)(agent(t.Context()), Charge{InvoiceID: "inv_u1", Amount: 1})
	if !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatalf("err = %v, want ErrAmbiguous (recorded)", err)
	}
	if eff, err := e.g.Store().Effect(t.Context(), "charge:inv_u1"); err != nil || eff.State != store.Ambiguous || !strings.Contains(eff.Error, `\xff\xfe`) {
		t.Errorf("effect = %+v, %v; want ambiguous with the bytes escaped", eff, err)
	}
	if doc := lastReceipt(t, e.g); doc["result"] != "ambiguous" || !strings.Contains(doc["error"].(string), `\xff\xfe`) {
		t.Errorf("receipt = %v %v, want ambiguous with the bytes escaped", doc["result"], doc["error"])
	}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Errorf("the panic did not continue")
			}
		}()
		_, _ = latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) {
			panic("boom \xc3")
		}, nil)(agent(t.Context()), Charge{InvoiceID: "inv_u2", Amount: 1})
	}()
	if eff, err := e.g.Store().Effect(t.Context(), "charge:inv_u2"); err != nil || eff.State != store.Ambiguous || !strings.Contains(eff.Error, `boom \xc3`) {
		t.Errorf("after a panic: effect = %+v, %v; want ambiguous with the bytes escaped", eff, err)
	}
	verifyChain(t, e.g)
}

// A call refused after its reconcile hook answered costs one write, plus the hook's own
// resolution when it resolved.
func TestReconcileWriteCount(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		outcome latch.Outcome
		want    int64
	}{
		{"unknown", latch.OutcomeUnknown, 1},          // the refusal
		{"committed", latch.OutcomeCommitted, 2},      // the resolution, the refusal (a duplicate)
		{"not executed", latch.OutcomeNotExecuted, 3}, // the resolution, the renewal, its record
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, testPolicy)
			lost := func(context.Context, Charge) (string, error) { return "", io.ErrUnexpectedEOF }
			if _, err := latch.Protect(e.g, "billing.charge", lost, nil)(agent(t.Context()), Charge{InvoiceID: "inv_w", Amount: 1}); !errors.Is(err, latch.ErrAmbiguous) {
				t.Fatal(err)
			}
			hook := func(context.Context, *latch.Attempt) (latch.Outcome, any, error) { return tc.outcome, nil, nil }
			before := writes(t, e.g)
			_, _ = latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) { return "ok", nil },
				&latch.Options{Reconcile: hook})(agent(t.Context()), Charge{InvoiceID: "inv_w", Amount: 1})
			if got := writes(t, e.g) - before; got != tc.want {
				t.Errorf("%d write transactions, want %d", got, tc.want)
			}
		})
	}
}

// Observe mode records an expired principal as the refusal it would have made and runs;
// Evaluate reports it as Execute would.
func TestObserveExpiredPrincipal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "mode: observe\n"+testPolicy)
	expired := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker", ExpiresAt: e.clock.Now().Add(-time.Second)})
	ran := false
	rc, err := latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) { ran = true; return "ok", nil }, nil)(expired, Charge{InvoiceID: "inv_o", Amount: 1})
	if err != nil || rc != "ok" || !ran {
		t.Fatalf("observe with an expired principal = %q, %v (ran %t); want it to run", rc, err, ran)
	}
	doc := lastReceipt(t, e.g)
	wh, _ := doc["would_have"].(map[string]any)
	if doc["result"] != "observed" || wh["decision"] != "deny" || wh["reason"] != "principal_expired" {
		t.Errorf("receipt = %v would_have %v; want observed, would have denied principal_expired", doc["result"], wh)
	}
	ev, err := e.g.Evaluate(expired, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_o","amount":1}`)})
	if err != nil || ev.Decision != policy.Deny || ev.Reason != "principal_expired" {
		t.Errorf("Evaluate = %+v, %v; want deny principal_expired", ev, err)
	}
}
