package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// ask is the approval request for c at now, probing c's reservation: what the pipeline stores
// before a human is asked about a call.
func (c call) ask(now time.Time) *store.ApprovalRequest {
	a := newApproval(c.Hash, now)
	probe := c.reserve(now)
	probe.Receipt.Decision = "approve"
	return &store.ApprovalRequest{Now: now, Approval: a, Probe: probe,
		Events: []store.Event{store.NewEvent(store.EventActionProposed, now, c.ActionID, c.Key, "", map[string]any{"action": action})}}
}

func (f *fixture) ask(req *store.ApprovalRequest) *store.ApprovalResult {
	f.t.Helper()
	res, err := f.st.CreateApproval(f.t.Context(), req)
	if err != nil {
		f.t.Fatalf("CreateApproval(%s) = %v", req.Approval.ID, err)
	}
	return res
}

// testApprovalProbe covers CreateApproval's probe: a human is asked only about a call whose
// reservation would not be refused; otherwise the call gets the refusal Reserve would give, its
// receipt written, and no request is stored (docs/guarantees.md#approvals).
func testApprovalProbe(t *testing.T, b Backend) {
	later := t0.Add(time.Hour)
	refusals := []struct {
		name   string
		setup  func(f *fixture, c call) // leaves c.Key in the state under test
		call   func(c call) call        // the call that asks (default: a retry of c)
		reason string
		lapsed bool // the probe writes the record ambiguous, as Reserve would
	}{
		{name: "Committed", setup: func(f *fixture, c call) { f.run(c, t0, store.Committed) }, reason: "committed"},
		{name: "InProgress", setup: func(f *fixture, c call) { f.reserved(c, later.Add(-time.Second)) }, reason: "in_progress"},
		{name: "Ambiguous", setup: func(f *fixture, c call) { f.run(c, t0, store.Ambiguous) }, reason: "ambiguous"},
		{name: "LeaseLapsed", setup: func(f *fixture, c call) { f.reserved(c, t0) }, reason: "ambiguous", lapsed: true},
		{name: "KeyConflict", setup: func(f *fixture, c call) { f.run(c, t0, store.Committed) }, reason: "key_conflict",
			call: func(c call) call { c = c.retry(); c.Hash = hashOf("other arguments"); return c }},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Twin stores in the same state: one is asked, the other reserved, and the two
			// refusals must be the same.
			f, twin := newFixture(t, b), newFixture(t, b)
			c := newCall("charge:inv_1")
			tc.setup(f, c)
			tc.setup(twin, c)
			asker := c.retry()
			if tc.call != nil {
				asker = tc.call(c)
			}
			req := asker.ask(later)
			if tc.name == "KeyConflict" {
				req.Probe.Arguments = json.RawMessage(`{"amount":1,"invoice_id":"inv_1"}`)
			}
			before := f.head()
			res := f.ask(req)
			if res.Approval != nil || res.Refused == nil {
				t.Fatalf("CreateApproval = request %+v, refusal %+v; want refused %s and no request", res.Approval, res.Refused, tc.reason)
			}
			wantRefused(t, "probe", res.Refused, false, tc.reason)
			wantBlockedReceipt(t, "probe", res.Refused)
			if got := docString(t, *res.Refused.Receipt, "decision"); got != "approve" {
				t.Errorf("receipt decision = %q, want approve (the call's)", got)
			}
			if h := f.head(); h.Seq != before.Seq+1 {
				t.Errorf("head moved from %d to %d, want one receipt appended", before.Seq, h.Seq)
			}
			if as := f.approvals(store.ApprovalFilter{}); len(as) != 0 {
				t.Errorf("Approvals() = %d requests, want none stored", len(as))
			}
			evs := f.events(store.EventFilter{ActionID: asker.ActionID})
			same(t, "events of the refused request", kinds(evs), wantProbeEvents(tc.lapsed))
			if len(res.Events) != len(evs) {
				t.Errorf("ApprovalResult.Events = %d events, want the %d written", len(res.Events), len(evs))
			}

			// Reserve on the twin refuses the same way, with the same message.
			rreq := req.Probe
			rreq.Events = req.Events
			twinRes := twin.reserve(rreq)
			wantRefused(t, "reserve on the twin", twinRes, false, tc.reason)
			same(t, "refusal (probe vs Reserve)", res.Refused.Refusal, twinRes.Refusal)
			same(t, "effect (probe vs Reserve)", res.Refused.Effect, twinRes.Effect)
			same(t, "Effect() after the probe", f.effect(c.Key), twin.effect(c.Key))
			if tc.lapsed && f.effect(c.Key).State != store.Ambiguous {
				t.Errorf("Effect() after probing a lapsed lease = %s, want ambiguous", f.effect(c.Key).State)
			}
			f.verify()
		})
	}

	for _, tc := range []struct {
		name  string
		setup func(f *fixture, c call) *store.Effect
	}{
		{"NoRecord", func(*fixture, call) *store.Effect { return nil }},
		{"FailedRenewable", func(f *fixture, c call) *store.Effect { return f.run(c, t0, store.Failed) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, b)
			c := newCall("charge:inv_1")
			before := tc.setup(f, c)
			head := f.head()
			req := c.retry().ask(later)
			res := f.ask(req)
			if res.Refused != nil || res.Approval == nil {
				t.Fatalf("CreateApproval refused %+v, want a request stored", res.Refused)
			}
			same(t, "Approval()", f.approval(req.Approval.ID), res.Approval)
			if h := f.head(); h != head {
				t.Errorf("head moved from %d to %d: a stored request writes no receipt", head.Seq, h.Seq)
			}
			if before == nil {
				f.noEffect(c.Key)
			} else {
				same(t, "Effect() (the probe reserves nothing)", f.effect(c.Key), before)
			}
			evs := f.events(store.EventFilter{ApprovalID: req.Approval.ID})
			same(t, "events of the request", kinds(evs), []string{store.EventActionProposed, store.EventApprovalRequested})
		})
	}

	// A reservation that renews a failed key and commits, racing the request: the request is
	// either refused, or stored before the reservation (its events come first). A probe read
	// outside the request's transaction would let the reservation slip in between.
	t.Run("RaceWithCommit", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		const keys = 12
		for k := range keys {
			c := newCall(fmt.Sprintf("charge:inv_%d", k))
			f.run(c, t0, store.Failed)
			runner, asker := c.retry(), c.retry()
			_, errs := race(2, func(i int) (*store.ApprovalResult, error) {
				if i == 0 {
					res, err := f.st.Reserve(t.Context(), runner.reserve(later))
					if err != nil || !res.Reserved {
						return nil, fmt.Errorf("reserve: %v %+v", err, res)
					}
					_, err = f.st.Record(t.Context(), runner.record(later, res.Effect.Attempt, store.Committed))
					return nil, err
				}
				res, err := f.st.CreateApproval(t.Context(), asker.ask(later))
				if err == nil && res.Refused != nil && res.Refused.Refusal.Reason != "in_progress" && res.Refused.Refusal.Reason != "committed" {
					err = fmt.Errorf("refused %s, want in_progress or committed", res.Refused.Refusal.Reason)
				}
				return res, err
			})
			for _, err := range errs {
				if err != nil {
					t.Fatalf("key %d: %v", k, err)
				}
			}
			var reserved, requested int64
			for _, e := range f.events(store.EventFilter{EffectKey: c.Key}) {
				switch {
				case e.Kind == store.EventEffectReserved && e.ActionID == runner.ActionID:
					reserved = e.ID
				case e.Kind == store.EventApprovalRequested:
					requested = e.ID
				}
			}
			if requested != 0 && requested > reserved {
				t.Errorf("key %d: request stored (event %d) after the reservation it probed (event %d) was made", k, requested, reserved)
			}
		}
	})
}

func wantProbeEvents(lapsed bool) []string {
	if lapsed {
		return []string{store.EventActionProposed, store.EventExecutionAmbiguous, store.EventEffectRefused}
	}
	return []string{store.EventActionProposed, store.EventEffectRefused}
}

// testApprovalAgain covers asking again for the same action (docs/guarantees.md#approvals): a
// pending request is handed back instead of a new one, and a request asked after a denial says
// so.
func testApprovalAgain(t *testing.T, b Backend) {
	t.Run("ReusesPending", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		first := f.ask(c.ask(t0))
		again := c.retry()
		req := again.ask(t0.Add(time.Minute))
		res := f.ask(req)
		if !res.Reused || res.Approval == nil || res.Approval.ID != first.Approval.ID || !res.Approval.ExpiresAt.Equal(first.Approval.ExpiresAt) {
			t.Fatalf("second ask = %+v (reused %t), want request %s back with its expiry %s", res.Approval, res.Reused, first.Approval.ID, first.Approval.ExpiresAt)
		}
		same(t, "Approvals()", f.approvals(store.ApprovalFilter{}), []*store.Approval{first.Approval})
		evs := f.events(store.EventFilter{ActionID: again.ActionID})
		same(t, "events of the second ask", kinds(evs), []string{store.EventActionProposed, store.EventApprovalReused})
		for _, e := range evs {
			if e.ApprovalID != first.Approval.ID {
				t.Errorf("event %s names approval %q, want %s", e.Kind, e.ApprovalID, first.Approval.ID)
			}
		}
	})

	t.Run("ExpiredNotReused", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		first := f.ask(c.ask(t0))
		res := f.ask(c.retry().ask(first.Approval.ExpiresAt))
		if res.Reused || res.Approval.ID == first.Approval.ID {
			t.Errorf("ask at the first request's expiry reused it, want a new request")
		}
	})

	t.Run("OtherPrincipalNotReused", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		first := f.ask(c.ask(t0))
		req := c.retry().ask(t0.Add(time.Minute))
		req.Approval.Agent = "agent:other"
		res := f.ask(req)
		if res.Reused || res.Approval.ID == first.Approval.ID {
			t.Errorf("another principal's ask reused %s, want a new request", first.Approval.ID)
		}
	})

	t.Run("AfterDenial", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		first := f.ask(c.ask(t0))
		f.answer(first.Approval.ID, false, t0.Add(time.Minute))
		req := c.retry().ask(t0.Add(2 * time.Minute))
		res := f.ask(req)
		if res.Reused || res.Approval.PreviousDenied != first.Approval.ID || res.Approval.PreviousDeniedBy != approver {
			t.Fatalf("ask after a denial = %+v, want a new request recording %s denied by %s", res.Approval, first.Approval.ID, approver)
		}
		same(t, "Approval() (stored with the previous denial)", f.approval(res.Approval.ID), res.Approval)
		evs := f.events(store.EventFilter{ApprovalID: res.Approval.ID})
		var payload map[string]any
		for _, e := range evs {
			if e.Kind == store.EventApprovalRequested {
				_ = json.Unmarshal(e.Payload, &payload)
			}
		}
		if payload["previous_denied"] != first.Approval.ID || payload["previous_denied_by"] != approver {
			t.Errorf("approval_requested payload = %v, want previous_denied %s by %s", payload, first.Approval.ID, approver)
		}
		// Asked a third time while the second is pending: the second comes back, as it is.
		third := f.ask(c.retry().ask(t0.Add(3 * time.Minute)))
		if !third.Reused || third.Approval.ID != res.Approval.ID || third.Approval.PreviousDenied != first.Approval.ID {
			t.Errorf("third ask = %+v (reused %t), want %s back", third.Approval, third.Reused, res.Approval.ID)
		}
	})

	t.Run("LastAnswerGranted", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		first := f.ask(c.ask(t0))
		f.answer(first.Approval.ID, false, t0.Add(time.Minute))
		second := f.ask(c.retry().ask(t0.Add(2 * time.Minute)))
		f.answer(second.Approval.ID, true, t0.Add(3*time.Minute))
		// The grant landed after the caller looked for one: asking again hands it back, writes
		// nothing, and the call presents it.
		before := len(f.events(store.EventFilter{}))
		third := f.ask(c.retry().ask(t0.Add(4 * time.Minute)))
		if !third.Granted || third.Reused || third.Approval.ID != second.Approval.ID || third.Approval.Status != store.Granted {
			t.Errorf("ask after an unspent grant = %+v (granted %t, reused %t), want the grant %s handed back", third.Approval, third.Granted, third.Reused, second.Approval.ID)
		}
		if after := len(f.events(store.EventFilter{})); after != before {
			t.Errorf("asking with a grant unspent wrote %d events, want none", after-before)
		}
		// Spent, it is no longer handed back: the next ask is a new request, with no previous denial.
		r := c.retry()
		req := r.reserve(t0.Add(5 * time.Minute))
		req.ApprovalID = second.Approval.ID
		if res := f.reserve(req); !res.Reserved {
			t.Fatalf("reserve presenting the grant = %+v", res.Refusal)
		}
		f.record(r.record(t0.Add(6*time.Minute), 1, store.Failed))
		fourth := f.ask(c.retry().ask(t0.Add(7 * time.Minute)))
		if fourth.Granted || fourth.Reused || fourth.Approval.ID == second.Approval.ID || fourth.Approval.PreviousDenied != "" {
			t.Errorf("ask after the grant was spent = %+v (granted %t, reused %t), want a new request with no previous denial", fourth.Approval, fourth.Granted, fourth.Reused)
		}
	})

	t.Run("RefusalBeforeReuse", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		f.ask(c.ask(t0))
		f.run(newCall("charge:inv_1"), t0.Add(time.Minute), store.Committed) // the key ran meanwhile
		res := f.ask(c.retry().ask(t0.Add(2 * time.Minute)))
		if res.Refused == nil || res.Approval != nil {
			t.Fatalf("ask for a committed key with a request pending = %+v, want the refusal", res)
		}
		wantRefused(t, "probe", res.Refused, false, "committed")
	})

	t.Run("ConcurrentAskers", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		results, errs := race(8, func(int) (*store.ApprovalResult, error) {
			return f.st.CreateApproval(t.Context(), c.retry().ask(t0))
		})
		ids := map[string]bool{}
		reused := 0
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("ask %d: %v", i, errs[i])
			}
			ids[res.Approval.ID] = true
			if res.Reused {
				reused++
			}
		}
		if len(ids) != 1 || reused != 7 {
			t.Errorf("8 concurrent asks got %d requests (%d reused), want one request, handed back 7 times", len(ids), reused)
		}
		if n := len(f.approvals(store.ApprovalFilter{})); n != 1 {
			t.Errorf("Approvals() holds %d requests, want 1", n)
		}
	})
}
