package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// suspendPolicy: a refund keyed by its id, a budgeted payout (one call a day per agent) and an
// unkeyed read.
const suspendPolicy = `
schema: latch.policy/v1
actions:
  billing.refund:
    effect: "refund:{refund_id}"
    arguments:
      refund_id: {type: string}
      amount: {type: integer}
    decision: allow
  payout.send:
    effect: "payout:{payout_id}"
    decision: allow
    budgets:
      - {metric: count, limit: 1, window: P1D, per: agent}
  report.read:
    decision: allow
`

// asking is an executor that suspends on its first run, asking to confirm, and on its resume
// commits what the input says; runs counts its runs.
func asking(runs *atomic.Int32) latch.Executor {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		runs.Add(1)
		r := latch.ResumedFrom(ctx)
		if r == nil {
			return nil, latch.Suspend(map[string]any{"message": "confirm the refund?"})
		}
		var ok bool
		if err := json.Unmarshal(r.Input["confirm"], &ok); err != nil || !ok {
			return nil, latch.NotExecuted(errors.New("not confirmed"))
		}
		return map[string]any{"refunded": true, "round": r.Round}, nil
	}
}

// reasonOf and kindOf are RefusalOf(err)'s reason and kind, "" for no error.
func reasonOf(err error) latch.Reason {
	if err == nil {
		return ""
	}
	return latch.RefusalOf(err).Reason
}

func kindOf(err error) latch.RefusalKind {
	if err == nil {
		return ""
	}
	return latch.RefusalOf(err).Kind
}

func suspendedOf(t *testing.T, err error) *latch.SuspendedError {
	t.Helper()
	var se *latch.SuspendedError
	if !errors.As(err, &se) || !errors.Is(err, latch.ErrSuspended) {
		t.Fatalf("err = %T %v, want a *latch.SuspendedError", err, err)
	}
	return se
}

func wantOutcomeRefused(t *testing.T, what string, err error, reason latch.Reason) {
	t.Helper()
	r := latch.RefusalOf(err)
	var oe *latch.OutcomeError
	if !errors.As(err, &oe) || r.Reason != reason || r.Kind != latch.KindOutcomeRefused || reason.Kind() != latch.KindOutcomeRefused {
		t.Errorf("%s = %T %v (refusal %+v), want outcome_refused %s", what, err, err, r, reason)
	}
}

// TestSuspendResume: an executor suspends mid-call; the effect stays executing under the same
// attempt and a duplicate is refused in_progress; a resume with a wrong token, other
// arguments or another principal is refused and runs nothing; the exact token, by the holder,
// with the arguments canonically the same (keys reordered), runs the executor again with its
// input, and the call commits with exactly one receipt; the token is spent; the events record
// the input's keys and digest, never its value. Both stores, and the resume is made by a second
// guard on the store (how another process resumes).
func TestSuspendResume(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, suspendPolicy)
			ctx := as(t.Context(), "billing")
			var runs atomic.Int32
			args := `{"refund_id":"r1","amount":500}`
			rc, err := e.g.Execute(ctx, call("billing.refund", args), asking(&runs))
			se := suspendedOf(t, err)
			if rc != nil || runs.Load() != 1 || se.Round != 1 || se.EffectKey != "refund:r1" || se.Attempt != 1 ||
				!strings.HasPrefix(se.Token, "lrt_") || !strings.Contains(string(se.Request), "confirm the refund?") {
				t.Fatalf("Execute = %+v, %+v (runs %d), want a suspension of round 1 with its request", rc, se, runs.Load())
			}
			if !se.LeaseExpiresAt.Equal(e.clock.Now().Add(latch.DefaultLease)) {
				t.Errorf("suspension lease %v, want now + the suspend lease", se.LeaseExpiresAt)
			}
			eff, err := e.g.Store().Effect(t.Context(), "refund:r1")
			if err != nil || eff.State != store.Executing || eff.Attempt != 1 || eff.ActionID != se.ActionID {
				t.Fatalf("effect while suspended = %+v, %v; want executing, attempt 1, the same action", eff, err)
			}
			if _, err := e.g.Execute(ctx, call("billing.refund", args), asking(&runs)); reasonOf(err) != latch.ReasonInProgress {
				t.Errorf("a duplicate while suspended = %v, want in_progress", err)
			}

			other := e.another(t, suspendPolicy)
			input := map[string]json.RawMessage{"confirm": json.RawMessage(`true`), "secret_note": json.RawMessage(`"s3cr3t-value"`)}
			reordered := `{"amount":500,"refund_id":"r1"}`
			refusals := []struct {
				name   string
				ctx    context.Context
				req    latch.ResumeRequest
				reason latch.Reason
			}{
				{"a wrong token", ctx, latch.ResumeRequest{ActionID: se.ActionID, Token: se.Token + "x", Arguments: json.RawMessage(args)}, latch.ReasonSuspensionToken},
				{"no token", ctx, latch.ResumeRequest{ActionID: se.ActionID, Arguments: json.RawMessage(args)}, latch.ReasonSuspensionToken},
				{"other arguments", ctx, latch.ResumeRequest{ActionID: se.ActionID, Token: se.Token, Arguments: json.RawMessage(`{"refund_id":"r1","amount":5000}`)}, latch.ReasonSuspensionArguments},
				{"another principal", as(t.Context(), "intruder"), latch.ResumeRequest{ActionID: se.ActionID, Token: se.Token, Arguments: json.RawMessage(args)}, latch.ReasonNotHolder},
				{"another action", ctx, latch.ResumeRequest{ActionID: "act_nope", Token: se.Token, Arguments: json.RawMessage(args)}, latch.ReasonNoSuchAction},
			}
			for _, r := range refusals {
				req := r.req
				_, err := other.Resume(r.ctx, &req, asking(&runs))
				wantOutcomeRefused(t, "Resume with "+r.name, err, r.reason)
			}
			if runs.Load() != 1 {
				t.Fatalf("the executor ran %d times after refused resumes, want 1", runs.Load())
			}
			rc, err = other.Resume(ctx, &latch.ResumeRequest{ActionID: se.ActionID, Token: se.Token, Arguments: json.RawMessage(reordered), Input: input}, asking(&runs))
			if err != nil || rc == nil || rc.Result != receipt.Committed || runs.Load() != 2 {
				t.Fatalf("Resume = %+v, %v (runs %d), want committed after a second run", rc, err, runs.Load())
			}
			if v, ok := rc.Value.(map[string]any); !ok || v["refunded"] != true || v["round"] != 1 {
				t.Errorf("the resumed executor's value = %#v, want what it returned from its input", rc.Value)
			}
			if rc.ActionID != se.ActionID || rc.Attempt != 1 || rc.EffectKey != "refund:r1" {
				t.Errorf("receipt %+v, want the suspended action's, attempt 1", rc)
			}
			sameAsStored(t, rc)
			_, err = other.Resume(ctx, &latch.ResumeRequest{ActionID: se.ActionID, Token: se.Token, Arguments: json.RawMessage(args), Input: input}, asking(&runs))
			wantOutcomeRefused(t, "Resume again with the spent token", err, latch.ReasonSuspensionResumed)
			if runs.Load() != 2 {
				t.Errorf("the executor ran %d times, want 2", runs.Load())
			}
			n := 0
			for _, err := range e.g.Store().Receipts(t.Context(), store.ReceiptFilter{ActionID: se.ActionID}) {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			if n != 1 {
				t.Errorf("%d receipts for the suspended execution, want 1", n)
			}
			evs, err := e.g.Store().Events(t.Context(), store.EventFilter{ActionID: se.ActionID})
			if err != nil {
				t.Fatal(err)
			}
			var suspended, resumed int
			for _, ev := range evs {
				if strings.Contains(string(ev.Payload), "s3cr3t-value") {
					t.Errorf("event %s holds an input value: %s", ev.Kind, ev.Payload)
				}
				if strings.Contains(string(ev.Payload), se.Token) || strings.Contains(string(ev.Payload), se.Token[4:]) {
					t.Errorf("event %s holds the resume token: %s", ev.Kind, ev.Payload)
				}
				switch ev.Kind {
				case store.EventExecutionSuspended:
					suspended++
				case store.EventExecutionResumed:
					resumed++
					var p struct {
						InputKeys   []string `json:"input_keys"`
						InputSHA256 string   `json:"input_sha256"`
					}
					if err := json.Unmarshal(ev.Payload, &p); err != nil || strings.Join(p.InputKeys, ",") != "confirm,secret_note" || len(p.InputSHA256) != 64 {
						t.Errorf("execution_resumed payload %s, want the input keys and a digest", ev.Payload)
					}
				}
			}
			if suspended != 1 || resumed != 1 {
				t.Errorf("%d execution_suspended and %d execution_resumed events, want 1 and 1", suspended, resumed)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestSuspendRoundsBounded: with Config.SuspendRounds 2 an executor that always suspends is
// resumed twice; its third suspension records the call ambiguous (one receipt), and the key
// then refuses retries as ambiguous.
func TestSuspendRoundsBounded(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, suspendPolicy)
			p, err := policy.Parse("latch.yaml", []byte(suspendPolicy))
			if err != nil {
				t.Fatal(err)
			}
			g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: e.url, Now: e.clock.Now, SuspendRounds: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			ctx := as(t.Context(), "billing")
			var runs atomic.Int32
			always := func(ctx context.Context, _ json.RawMessage) (any, error) {
				runs.Add(1)
				return nil, latch.Suspend(map[string]int{"run": int(runs.Load())})
			}
			args := json.RawMessage(`{"refund_id":"r9","amount":1}`)
			_, err = g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: args}, always)
			se := suspendedOf(t, err)
			_, err = g.Resume(ctx, &latch.ResumeRequest{ActionID: se.ActionID, Token: se.Token, Arguments: args}, always)
			se2 := suspendedOf(t, err)
			if se2.Round != 2 || se2.Token == se.Token {
				t.Fatalf("second suspension = %+v, want round 2 with a new token", se2)
			}
			rc, err := g.Resume(ctx, &latch.ResumeRequest{ActionID: se.ActionID, Token: se2.Token, Arguments: args}, always)
			if !errors.Is(err, latch.ErrAmbiguous) || rc == nil || rc.Result != receipt.Ambiguous ||
				!strings.Contains(rc.Error, "suspended more than 2 times") {
				t.Fatalf("third suspension = %+v, %v; want the call recorded ambiguous", rc, err)
			}
			eff, _ := g.Store().Effect(t.Context(), "refund:r9")
			if eff.State != store.Ambiguous {
				t.Errorf("effect after too many rounds = %s, want ambiguous", eff.State)
			}
			if _, err := g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: args}, always); reasonOf(err) != latch.ReasonAmbiguous {
				t.Errorf("a retry after too many rounds = %v, want ambiguous", err)
			}
			if runs.Load() != 3 {
				t.Errorf("the executor ran %d times, want 3", runs.Load())
			}
			if n := actionReceipts(t, g, se.ActionID); n != 1 {
				t.Errorf("%d receipts of the suspended action, want 1", n)
			}
		})
	}
}

// actionReceipts is the number of receipts of actionID.
func actionReceipts(t *testing.T, g *latch.Guard, actionID string) int {
	t.Helper()
	n := 0
	for _, err := range g.Store().Receipts(t.Context(), store.ReceiptFilter{ActionID: actionID}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// TestResumeAfterLeaseLapsed: a suspension whose lease lapsed is refused ambiguous, the record
// is written ambiguous with the refusal, the executor never runs again, and a retry of the
// effect is refused ambiguous.
func TestResumeAfterLeaseLapsed(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, suspendPolicy)
			ctx := as(t.Context(), "billing")
			var runs atomic.Int32
			args := json.RawMessage(`{"refund_id":"r2","amount":7}`)
			_, err := e.g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: args}, asking(&runs))
			se := suspendedOf(t, err)
			e.clock.Add(latch.DefaultLease + time.Second)
			rc, err := e.g.Resume(ctx, &latch.ResumeRequest{ActionID: se.ActionID, Token: se.Token, Arguments: args,
				Input: map[string]json.RawMessage{"confirm": json.RawMessage("true")}}, asking(&runs))
			if rc != nil || kindOf(err) != latch.KindAmbiguous || reasonOf(err) != latch.ReasonAmbiguous || !errors.Is(err, latch.ErrAmbiguousEffect) {
				t.Fatalf("Resume after the lease lapsed = %+v, %v, want refused ambiguous", rc, err)
			}
			if runs.Load() != 1 {
				t.Errorf("the executor ran %d times, want 1", runs.Load())
			}
			eff, _ := e.g.Store().Effect(t.Context(), "refund:r2")
			if eff.State != store.Ambiguous {
				t.Errorf("effect after a lapsed resume = %s, want ambiguous", eff.State)
			}
			if _, err := e.g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: args}, asking(&runs)); reasonOf(err) != latch.ReasonAmbiguous {
				t.Errorf("a retry = %v, want ambiguous", err)
			}
			if runs.Load() != 1 {
				t.Errorf("the executor ran %d times, want 1", runs.Load())
			}
			verifyChain(t, e.g)
		})
	}
}

// TestSuspendHoldsBudget: a suspended call keeps its budget charge: with one payout a day, a
// second payout is refused budget_exhausted while the first is suspended.
func TestSuspendHoldsBudget(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, suspendPolicy)
			ctx := as(t.Context(), "payer")
			var runs atomic.Int32
			_, err := e.g.Execute(ctx, call("payout.send", `{"payout_id":"p1"}`), asking(&runs))
			suspendedOf(t, err)
			e.clock.Add(time.Minute)
			_, err = e.g.Execute(ctx, call("payout.send", `{"payout_id":"p2"}`), ran)
			if reasonOf(err) != latch.ReasonBudgetExhausted {
				t.Errorf("a second payout while the first is suspended = %v, want budget_exhausted", err)
			}
		})
	}
}

// TestSuspendWithoutKey: an executor of a call without an effect key cannot suspend: its
// suspension is recorded as an unknown outcome.
func TestSuspendWithoutKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, suspendPolicy)
	var runs atomic.Int32
	rc, err := e.g.Execute(as(t.Context(), "reader"), call("report.read", `{}`), asking(&runs))
	if !errors.Is(err, latch.ErrAmbiguous) || errors.Is(err, latch.ErrSuspended) || rc == nil || rc.Result != receipt.Ambiguous {
		t.Fatalf("Execute = %+v, %v; want recorded ambiguous", rc, err)
	}
}

// TestSuspendBegun: a call begun with Begin is suspended and resumed by its executor through
// SuspendBegun and ResumeBegun (a second suspension while one is open is refused), then
// finished: one receipt. Both stores.
func TestSuspendBegun(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, suspendPolicy)
			ctx := as(t.Context(), "billing")
			args := json.RawMessage(`{"refund_id":"r3","amount":3}`)
			p, err := e.g.Begin(ctx, &latch.Call{Action: "billing.refund", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			s, err := e.g.SuspendBegun(ctx, p.ActionID, json.RawMessage(`{"ask":"amount"}`))
			if err != nil || s.Round != 1 || s.Token == "" {
				t.Fatalf("SuspendBegun = %+v, %v", s, err)
			}
			_, err = e.g.SuspendBegun(ctx, p.ActionID, nil)
			wantOutcomeRefused(t, "SuspendBegun while suspended", err, latch.ReasonSuspensionOpen)
			other := e.another(t, suspendPolicy)
			res, err := other.ResumeBegun(ctx, &latch.ResumeRequest{ActionID: p.ActionID, Token: s.Token, Arguments: args,
				Input: map[string]json.RawMessage{"amount": json.RawMessage("3")}})
			if err != nil || res.Round != 1 || string(res.Request) != `{"ask":"amount"}` || string(res.Input["amount"]) != "3" {
				t.Fatalf("ResumeBegun = %+v, %v", res, err)
			}
			rc, err := other.Finish(ctx, p.ActionID, latch.OutcomeCommitted, json.RawMessage(`{"ok":true}`), "")
			if err != nil || rc.Result != receipt.Committed {
				t.Fatalf("Finish = %+v, %v", rc, err)
			}
			if n := receiptCount(t, e.g); n != 1 {
				t.Errorf("%d receipts, want 1", n)
			}
		})
	}
}

// TestSuspendBegunRounds: a call begun with Begin that suspends past Config.SuspendRounds (1
// here) is recorded ambiguous, with its receipt, and SuspendBegun says so (outcome unknown).
func TestSuspendBegunRounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, suspendPolicy)
	p, err := policy.Parse("latch.yaml", []byte(suspendPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: e.url, Now: e.clock.Now, SuspendRounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ctx := as(t.Context(), "billing")
	args := json.RawMessage(`{"refund_id":"r5","amount":5}`)
	b, err := g.Begin(ctx, &latch.Call{Action: "billing.refund", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.SuspendBegun(ctx, b.ActionID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.ResumeBegun(ctx, &latch.ResumeRequest{ActionID: b.ActionID, Token: s.Token, Arguments: args}); err != nil {
		t.Fatal(err)
	}
	_, err = g.SuspendBegun(ctx, b.ActionID, json.RawMessage(`{}`))
	if kindOf(err) != latch.KindOutcomeUnknown || !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatalf("a suspension past the bound = %v, want outcome unknown", err)
	}
	if eff, _ := g.Store().Effect(t.Context(), "refund:r5"); eff.State != store.Ambiguous {
		t.Errorf("effect = %s, want ambiguous", eff.State)
	}
	if n := actionReceipts(t, g, b.ActionID); n != 1 {
		t.Errorf("%d receipts, want 1", n)
	}
	if _, err := g.Finish(ctx, b.ActionID, latch.OutcomeCommitted, nil, ""); reasonOf(err) != latch.ReasonAlreadyRecorded {
		t.Errorf("Finish after the bound = %v, want already_recorded", err)
	}
}
