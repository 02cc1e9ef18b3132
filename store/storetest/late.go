package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// lapsed reserves c at t0 and has a contender meet its lapsed lease: the record is ambiguous,
// its holder has not reported. It returns the time of the contention.
func (f *fixture) lapsed(c call) time.Time {
	f.t.Helper()
	f.reserved(c, t0)
	at := t0.Add(2 * lease)
	res := f.reserve(c.retry().reserve(at))
	if res.Refusal == nil || res.Refusal.Reason != "ambiguous" {
		f.t.Fatalf("contender after the lapse: %+v, want refused ambiguous", res.Refusal)
	}
	return at
}

func (f *fixture) resolve(req *store.ResolveRequest) *store.Effect {
	f.t.Helper()
	e, err := f.st.Resolve(f.t.Context(), req)
	if err != nil {
		f.t.Fatalf("Resolve(%s → %s by %s) = %v", req.Key, req.To, req.By, err)
	}
	return e
}

func lastKind(evs []*store.Event) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].Kind
}

func payload(t *testing.T, e *store.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		t.Fatalf("event %s payload %s: %v", e.Kind, e.Payload, err)
	}
	return m
}

// testLateOutcomes covers a holder that reports after its lease lapsed:
// its outcome settles its own attempt unless someone resolved it meanwhile; a reconcile hook
// may not resolve failed an attempt whose holder may still act.
func testLateOutcomes(t *testing.T, b Backend) {
	for _, outcome := range []store.State{store.Committed, store.Failed, store.Ambiguous} {
		t.Run("Settles/"+string(outcome), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, b)
			c := newCall("charge:inv_1")
			f.lapsed(c)
			now := t0.Add(3 * lease)
			req := c.record(now, 1, outcome)
			res := f.record(req)
			if res.Lost || !res.Late || res.Conflict != "" {
				t.Fatalf("late Record(%s): Lost %t Late %t Conflict %q; want the outcome written, late", outcome, res.Lost, res.Late, res.Conflict)
			}
			want := &store.Effect{
				Key: c.Key, State: outcome, Attempt: 1, ActionID: c.ActionID, Action: action, ActionHash: c.Hash,
				Result: req.Result, Error: req.Error, CreatedAt: t0, UpdatedAt: now, Arguments: arguments,
			}
			same(t, "Effect() after the late outcome", f.effect(c.Key), want)
			same(t, "RecordResult.Effect", res.Effect, want)
			if got := docString(t, res.Receipt, "result"); got != string(outcome) {
				t.Errorf("late receipt result = %q, want %q", got, outcome)
			}
			evs := f.events(store.EventFilter{EffectKey: c.Key})
			last := evs[len(evs)-1]
			if p := payload(t, last); !strings.HasPrefix(last.Kind, "execution_") || p["late"] != true || p["cause"] != "lease_expired" {
				t.Errorf("last event %s %s, want execution_* saying the lease had lapsed", last.Kind, last.Payload)
			}
			if outcome == store.Ambiguous && store.HolderMayAct(f.effect(c.Key)) {
				t.Errorf("after its holder reported unknown, HolderMayAct is still true")
			}
			f.verify()
		})
	}

	t.Run("HookMayNotFailALapsedLease", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		at := f.lapsed(c)
		before := f.effect(c.Key)
		evs := f.events(store.EventFilter{})
		_, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: at, Key: c.Key, To: store.Failed, By: "reconcile:" + action, Hook: true})
		if !errors.Is(err, store.ErrHolderMayAct) {
			t.Fatalf("hook Resolve(failed) of a lapsed lease = %v, want ErrHolderMayAct", err)
		}
		same(t, "Effect() after the refused hook", f.effect(c.Key), before)
		same(t, "events after the refused hook", f.events(store.EventFilter{}), evs)
		// The next attempt still meets an ambiguous record: nothing turned the lapse into a retry.
		wantRefused(t, "reserve after the refused hook", f.reserve(c.retry().reserve(at.Add(time.Second))), false, "ambiguous")

		// Once the holder has reported (unknown), it can no longer act: a hook may resolve it.
		f.record(c.record(at.Add(2*time.Second), 1, store.Ambiguous))
		got := f.resolve(&store.ResolveRequest{Now: at.Add(3 * time.Second), Key: c.Key, To: store.Failed, By: "reconcile:" + action, Hook: true})
		if got.State != store.Failed {
			t.Errorf("hook Resolve(failed) after the holder reported = %s, want failed", got.State)
		}
	})

	t.Run("HookMayNotFailAnExecutingLapsedLease", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		before := f.reserved(c, t0).Effect
		_, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: t0.Add(2 * lease), Key: c.Key, To: store.Failed, By: "reconcile:" + action, Hook: true})
		if !errors.Is(err, store.ErrHolderMayAct) {
			t.Fatalf("hook Resolve(failed) of an executing lapsed lease = %v, want ErrHolderMayAct", err)
		}
		same(t, "Effect() after the refused hook", f.effect(c.Key), before)
	})

	t.Run("HookMayCommitALapsedLease", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		at := f.lapsed(c)
		got := f.resolve(&store.ResolveRequest{Now: at, Key: c.Key, To: store.Committed, By: "reconcile:" + action, Hook: true,
			Result: json.RawMessage(`{"charge_id":"ch_hook"}`)})
		if got.State != store.Committed || string(got.Result) != `{"charge_id":"ch_hook"}` {
			t.Errorf("hook Resolve(committed) = %s %s, want committed with the hook's result", got.State, got.Result)
		}
	})

	t.Run("ResolvedMeanwhileAgrees", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		at := f.lapsed(c)
		resolved := f.resolve(&store.ResolveRequest{Now: at, Key: c.Key, To: store.Committed, By: "cli:ana"})
		res := f.record(c.record(at.Add(time.Second), 1, store.Committed))
		if res.Lost || res.Conflict != "" {
			t.Fatalf("holder agreeing with the resolution: Lost %t Conflict %q", res.Lost, res.Conflict)
		}
		got := f.effect(c.Key)
		if got.State != store.Committed || got.ResolvedBy != "cli:ana" || string(got.Result) != string(chargeResult) || got.Conflict != "" {
			t.Errorf("Effect() = %+v; want the resolution kept, with the holder's result", got)
		}
		if resolved.Result != nil {
			t.Errorf("the resolution had result %s, want none (the holder brings it)", resolved.Result)
		}
		if got := docString(t, res.Receipt, "result"); got != "committed" {
			t.Errorf("receipt result = %q, want committed", got)
		}
	})

	t.Run("ResolvedMeanwhileConflicts", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		at := f.lapsed(c)
		f.resolve(&store.ResolveRequest{Now: at, Key: c.Key, To: store.Failed, By: "cli:ana", Note: "provider shows nothing"})
		res := f.record(c.record(at.Add(time.Second), 1, store.Committed))
		if res.Lost || res.Conflict == "" {
			t.Fatalf("holder contradicting the resolution: Lost %t Conflict %q; want a conflict", res.Lost, res.Conflict)
		}
		got := f.effect(c.Key)
		if got.State != store.Failed || got.ResolvedBy != "cli:ana" || got.Conflict != res.Conflict || got.Note != "provider shows nothing" {
			t.Errorf("Effect() = %+v; want failed by cli:ana kept, with the conflict", got)
		}
		if e := docString(t, res.Receipt, "error"); !strings.HasPrefix(e, "outcome_conflict") {
			t.Errorf("receipt error = %q, want it to start with outcome_conflict", e)
		}
		if k := lastKind(f.events(store.EventFilter{EffectKey: c.Key})); k != store.EventOutcomeConflict {
			t.Errorf("last event = %s, want %s", k, store.EventOutcomeConflict)
		}
		// A failed record with a conflict is not renewed: a person resolves it again.
		wantRefused(t, "reserve a conflicted failed key", f.reserve(c.retry().reserve(at.Add(2*time.Second))), false, "outcome_conflict")
		if _, err := f.st.Resolve(t.Context(), &store.ResolveRequest{Now: at.Add(3 * time.Second), Key: c.Key, To: store.Committed,
			By: "reconcile:" + action, Hook: true}); !errors.Is(err, store.ErrNotAmbiguous) {
			t.Errorf("hook Resolve of a conflict = %v, want ErrNotAmbiguous (only a person settles a conflict)", err)
		}
		again := f.resolve(&store.ResolveRequest{Now: at.Add(4 * time.Second), Key: c.Key, To: store.Committed, By: "cli:bo"})
		if again.State != store.Committed || again.Conflict != "" || again.ResolvedBy != "cli:bo" {
			t.Errorf("Resolve of a conflict = %+v, want committed by cli:bo, conflict cleared", again)
		}
		f.verify()
	})

	t.Run("LateAfterRenewal", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		at := f.lapsed(c)
		f.resolve(&store.ResolveRequest{Now: at, Key: c.Key, To: store.Failed, By: "cli:ana"})
		c2 := c.retry()
		f.reserved(c2, at.Add(time.Second))
		res := f.record(c.record(at.Add(2*time.Second), 1, store.Committed))
		if res.Conflict == "" {
			t.Fatalf("holder of attempt 1 reporting committed after attempt 2 began: no conflict")
		}
		got := f.effect(c.Key)
		if got.State != store.Executing || got.Attempt != 2 || got.ActionID != c2.ActionID || got.Conflict == "" {
			t.Errorf("Effect() = %+v; want attempt 2 executing, marked with the conflict", got)
		}
		// Attempt 2's holder still records its own outcome; the conflict stays visible.
		f.record(c2.record(at.Add(3*time.Second), 2, store.Committed))
		if got := f.effect(c.Key); got.State != store.Committed || got.Conflict == "" {
			t.Errorf("after attempt 2 committed: %+v, want committed with the conflict", got)
		}
	})
}

// testKeyConflict covers a call whose key holds an attempt of another action hash: the same
// consequence asked with other arguments.
func testKeyConflict(t *testing.T, b Backend) {
	other := func(c call) call {
		o := c.retry()
		o.Hash = hashOf("billing.charge other arguments")
		return o
	}
	otherArgs := json.RawMessage(`{"amount":9900,"invoice_id":"inv_88"}`)
	cases := []struct {
		name  string
		setup func(f *fixture, c call) time.Time
		state store.State
	}{
		{"Committed", func(f *fixture, c call) time.Time { f.run(c, t0, store.Committed); return t0.Add(time.Hour) }, store.Committed},
		{"InProgress", func(f *fixture, c call) time.Time { f.reserved(c, t0); return t0.Add(time.Second) }, store.Executing},
		{"Ambiguous", func(f *fixture, c call) time.Time { f.run(c, t0, store.Ambiguous); return t0.Add(time.Hour) }, store.Ambiguous},
		{"LeaseLapsed", func(f *fixture, c call) time.Time { f.reserved(c, t0); return t0.Add(2 * lease) }, store.Ambiguous},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, b)
			c := newCall("charge:inv_1")
			now := tc.setup(f, c)
			req := other(c).reserve(now)
			req.Arguments = otherArgs
			res := f.reserve(req)
			wantRefused(t, "reserve with other arguments", res, false, "key_conflict")
			wantBlockedReceipt(t, "reserve with other arguments", res)
			if !strings.Contains(res.Refusal.Detail, "arguments differ") {
				t.Errorf("key_conflict detail = %q, want it to say the arguments differ", res.Refusal.Detail)
			}
			if got := f.effect(c.Key); got.State != tc.state || got.ActionHash != c.Hash {
				t.Errorf("Effect() = %s %s, want %s still of the recorded attempt", got.State, got.ActionHash, tc.state)
			}
			// The same arguments under another principal (a second worker, another action
			// hash) ask for the same consequence: the plain refusal, not a conflict.
			if r := f.reserve(other(c).reserve(now.Add(time.Millisecond))); r.Refusal == nil || r.Refusal.Reason == "key_conflict" {
				t.Errorf("reserve with the same arguments and another action hash: %+v, want the plain refusal", r.Refusal)
			}
			// Another action under the same key is a conflict too.
			req = c.retry().reserve(now.Add(2 * time.Millisecond))
			req.Action = "billing.capture"
			if r := f.reserve(req); r.Refusal == nil || r.Refusal.Reason != "key_conflict" || !strings.Contains(r.Refusal.Detail, "billing.capture") {
				t.Errorf("reserve of another action under the key: %+v, want key_conflict naming it", r.Refusal)
			}
		})
	}

	t.Run("FailedRenewsWithOtherArguments", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.run(c, t0, store.Failed)
		o := other(c)
		req := o.reserve(t0.Add(time.Hour))
		req.Arguments = otherArgs
		res := f.reserve(req)
		wantReserved(t, "renew a failed key with other arguments", res)
		if res.Effect.ActionHash != o.Hash || string(res.Effect.Arguments) != string(otherArgs) || res.Effect.Attempt != 2 {
			t.Errorf("renewal = %+v, want attempt 2 of the new action and arguments", res.Effect)
		}
	})
}

// testResolutionExtras covers what a resolution keeps (result, note) and the executing record
// whose lease lapsed, resolved in one transaction with its ambiguation.
func testResolutionExtras(t *testing.T, b Backend) {
	t.Run("ResultAndNote", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.run(c, t0, store.Ambiguous)
		result := json.RawMessage(`{"charge_id":"ch_found"}`)
		got := f.resolve(&store.ResolveRequest{Now: t0.Add(time.Hour), Key: c.Key, To: store.Committed, By: "cli:ana",
			Result: result, Note: "found in the provider dashboard"})
		if string(got.Result) != string(result) || got.Note != "found in the provider dashboard" {
			t.Errorf("Resolve = %+v, want the result and the note kept", got)
		}
		evs := f.events(store.EventFilter{EffectKey: c.Key})
		if p := payload(t, evs[len(evs)-1]); evs[len(evs)-1].Kind != store.EventEffectResolved || p["note"] != "found in the provider dashboard" {
			t.Errorf("last event %s %v, want effect_resolved with the note", evs[len(evs)-1].Kind, p)
		}
		res := f.reserve(c.retry().reserve(t0.Add(2 * time.Hour)))
		wantRefused(t, "reserve after resolving with a result", res, false, "committed")
		same(t, "the duplicate's stored result", res.Effect.Result, result)
	})

	t.Run("RefusedResultForFailed", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		before := f.run(c, t0, store.Ambiguous)
		for _, req := range []*store.ResolveRequest{
			{Now: t0.Add(time.Hour), Key: c.Key, To: store.Failed, By: "cli:ana", Result: json.RawMessage(`{}`)},
			{Now: t0.Add(time.Hour), Key: c.Key, To: store.Committed, By: "cli:ana", Result: json.RawMessage(`{nope`)},
			{Now: t0.Add(time.Hour), Key: c.Key, To: store.Committed, By: "cli:ana", Note: "bell\a"},
		} {
			if _, err := f.st.Resolve(t.Context(), req); err == nil {
				t.Errorf("Resolve(%s, result %q, note %q) = nil, want an error", req.To, req.Result, req.Note)
			}
		}
		same(t, "Effect() after refused resolutions", f.effect(c.Key), before)
	})

	t.Run("LapsedExecuting", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.reserved(c, t0)
		var before int64
		wc, counts := f.st.(store.WriteCounter)
		if counts {
			before = wc.WriteTransactions()
		}
		now := t0.Add(2 * lease)
		got := f.resolve(&store.ResolveRequest{Now: now, Key: c.Key, To: store.Failed, By: "cli:ana"})
		if counts && wc.WriteTransactions()-before != 1 {
			t.Errorf("Resolve of a lapsed executing record: %d write transactions, want 1", wc.WriteTransactions()-before)
		}
		if got.State != store.Failed || got.Error != store.LeaseExpiredError || !got.LeaseExpiresAt.IsZero() {
			t.Errorf("Resolve of a lapsed executing record = %+v, want failed, lease expired", got)
		}
		evs := kinds(f.events(store.EventFilter{EffectKey: c.Key}))
		if n := len(evs); n < 2 || evs[n-2] != store.EventExecutionAmbiguous || evs[n-1] != store.EventEffectResolved {
			t.Errorf("events = %v, want execution_ambiguous then effect_resolved last", evs)
		}
		wantReserved(t, "renew after the resolution", f.reserve(c.retry().reserve(now.Add(time.Second))))
	})

	t.Run("AnswerNote", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hashOf("x"), t0)
		got, err := f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: t0.Add(time.Minute), ID: a.ID, Grant: false,
			Approver: approver, Note: "amount looks wrong"})
		if err != nil {
			t.Fatalf("AnswerApproval with a note = %v", err)
		}
		if got.Note != "amount looks wrong" || f.approval(a.ID).Note != "amount looks wrong" {
			t.Errorf("answer note = %q, stored %q; want it kept", got.Note, f.approval(a.ID).Note)
		}
		b := f.createApproval(hashOf("y"), t0)
		if _, err := f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: t0.Add(time.Minute), ID: b.ID, Grant: true,
			Approver: approver, Note: "esc\x1b[2J"}); !errors.Is(err, store.ErrAnswerRefused) {
			t.Errorf("AnswerApproval with a control character in the note = %v, want refused", err)
		}
	})
}
