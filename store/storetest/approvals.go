package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// wantAnswerError checks that err is an *AnswerError with reason.
func wantAnswerError(t *testing.T, what string, err error, reason string) {
	t.Helper()
	var ae *store.AnswerError
	if !errors.As(err, &ae) || ae.Reason != reason || !errors.Is(err, store.ErrAnswerRefused) {
		t.Errorf("%s = %v, want AnswerError %s matching ErrAnswerRefused", what, err, reason)
	}
}

// withoutAnswers is a as a reservation returns it: without its answers.
func withoutAnswers(a *store.Approval) *store.Approval {
	c := *a
	c.Answers, c.Required = nil, 0
	return &c
}

// testApprovals covers approval requests and their answers (docs/guarantees.md#approvals).
func testApprovals(t *testing.T, b Backend) {
	hash := hashOf("billing.charge inv_1")

	t.Run("CreatePending", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		same(t, "Approval()", f.approval(a.ID), a)
		same(t, "Approvals({})", f.approvals(store.ApprovalFilter{}), []*store.Approval{a})
		same(t, "Approvals(pending)", f.approvals(store.ApprovalFilter{Status: store.Pending}), []*store.Approval{a})
		if got := f.approvals(store.ApprovalFilter{Status: store.Granted}); len(got) != 0 {
			t.Errorf("Approvals(granted) = %v, want none", got)
		}
		evs := f.events(store.EventFilter{ApprovalID: a.ID})
		same(t, "events of CreateApproval", kinds(evs), []string{store.EventApprovalRequested})
	})

	t.Run("ByActionHash", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		other := hashOf("billing.charge inv_2")
		a1 := f.createApproval(hash, t0)
		b1 := f.createApproval(other, t0.Add(time.Second))
		f.answer(a1.ID, true, t0.Add(time.Minute))
		f.answer(b1.ID, true, t0.Add(time.Minute))
		// Another principal's request for the same hash (asked again by the same principal, the
		// unspent grant a1 would be handed back instead).
		n := newApproval(hash, t0.Add(2*time.Minute))
		n.User = "someone-else"
		res, err := f.st.CreateApproval(t.Context(), &store.ApprovalRequest{Now: t0.Add(2 * time.Minute), Approval: n})
		if err != nil || res.Approval == nil || res.Granted {
			t.Fatalf("CreateApproval for another principal = %+v, %v", res, err)
		}
		a2 := res.Approval
		ids := func(as []*store.Approval) []string {
			var out []string
			for _, a := range as {
				out = append(out, a.ID)
			}
			return out
		}
		same(t, "Approvals(hash)", ids(f.approvals(store.ApprovalFilter{ActionHash: hash})), []string{a1.ID, a2.ID})
		same(t, "Approvals(granted, hash)", ids(f.approvals(store.ApprovalFilter{Status: store.Granted, ActionHash: hash})), []string{a1.ID})
		same(t, "Approvals(pending, other hash)", ids(f.approvals(store.ApprovalFilter{Status: store.Pending, ActionHash: other})), []string(nil))
		same(t, "Approvals(granted)", ids(f.approvals(store.ApprovalFilter{Status: store.Granted})), []string{a1.ID, b1.ID})
	})

	for _, grant := range []bool{true, false} {
		name, status, kind := "Grant", store.Granted, store.EventApprovalGranted
		if !grant {
			name, status, kind = "Deny", store.Denied, store.EventApprovalDenied
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, b)
			a := f.createApproval(hash, t0)
			now := t0.Add(time.Minute)
			got := f.answer(a.ID, grant, now)
			want := *a
			want.Status, want.Approver, want.AnsweredAt = status, approver, now
			want.Answers = []store.Answer{{Approver: store.Approver{Name: approver, Method: store.MethodCLI}, Grant: grant, At: now, Required: 1}}
			want.Required = 1
			same(t, "AnswerApproval result", got, &want)
			same(t, "Approval() after the answer", f.approval(a.ID), &want)
			evs := f.events(store.EventFilter{ApprovalID: a.ID})
			same(t, "events", kinds(evs), []string{store.EventApprovalRequested, kind})
		})
	}

	t.Run("AnsweredOnce", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		want := f.answer(a.ID, true, t0.Add(time.Minute))
		for _, grant := range []bool{false, true} {
			_, err := f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: t0.Add(2 * time.Minute), ID: a.ID, Grant: grant, Approver: "user:carol"})
			wantAnswerError(t, "second answer", err, "already_granted")
		}
		same(t, "Approval() after the second answers", f.approval(a.ID), want)
	})

	t.Run("SelfApproval", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		for _, who := range []string{agent, user} {
			_, err := f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: t0.Add(time.Minute), ID: a.ID, Grant: true, Approver: who})
			wantAnswerError(t, "AnswerApproval by "+who, err, "self_approval")
		}
		_, err := f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: t0.Add(time.Minute), ID: a.ID, Grant: true, Approver: "user:bob\nuser:mallory"})
		wantAnswerError(t, "AnswerApproval by a two-line approver", err, "invalid_approver")
		same(t, "Approval() after refused answers", f.approval(a.ID), a)
	})

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		_, err := f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: a.ExpiresAt, ID: a.ID, Grant: true, Approver: approver})
		wantAnswerError(t, "AnswerApproval at expiry", err, "expired")
		want := *a
		want.Status = store.Expired
		same(t, "Approval() after answering an expired request (written expired)", f.approval(a.ID), &want)
		_, err = f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: a.ExpiresAt.Add(time.Minute), ID: a.ID, Grant: true, Approver: approver})
		wantAnswerError(t, "AnswerApproval after expiry was written", err, "already_expired")
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		_, err := f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: t0, ID: newID("apr_"), Grant: true, Approver: approver})
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("AnswerApproval(unknown) = %v, want ErrNotFound", err)
		}
	})

	t.Run("DuplicateID", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		dup := newApproval(hashOf("other"), t0)
		dup.ID = a.ID
		if _, err := f.st.CreateApproval(t.Context(), &store.ApprovalRequest{Now: t0, Approval: dup}); err == nil {
			t.Errorf("CreateApproval with an existing id = nil, want an error")
		}
		same(t, "Approval() after the duplicate", f.approval(a.ID), a)
	})
}

// testReserveWithApproval covers presenting an approval to Reserve (docs/guarantees.md#approvals).
func testReserveWithApproval(t *testing.T, b Backend) {
	// withApproval is a call bound to the approval's hash.
	withApproval := func(key string, a *store.Approval) call {
		c := newCall(key)
		c.Hash, c.ApprovalID = a.ActionHash, a.ID
		return c
	}
	hash := hashOf("billing.charge inv_1")
	now := t0.Add(2 * time.Minute)

	t.Run("PreconditionKept", func(t *testing.T) {
		// The fingerprint captured with a request is read back as stored, and no answer or
		// reservation changes it: the recheck compares against what the approver was shown.
		t.Parallel()
		f := newFixture(t, b)
		a := newApproval(hash, t0)
		a.PreconditionHash, a.PreconditionAt = hashOf("state A"), t0.Add(-time.Second)
		res, err := f.st.CreateApproval(t.Context(), &store.ApprovalRequest{Now: t0, Approval: a})
		if err != nil || res.Approval == nil {
			t.Fatalf("CreateApproval = %+v, %v", res, err)
		}
		if evs := f.events(store.EventFilter{ApprovalID: a.ID}); len(evs) != 1 ||
			!strings.Contains(string(evs[0].Payload), `"precondition":"`+a.PreconditionHash+`"`) ||
			!strings.Contains(string(evs[0].Payload), `"precondition_at":"`+a.PreconditionAt.UTC().Format(time.RFC3339Nano)+`"`) {
			t.Errorf("approval_requested = %s; want the fingerprint and its capture time", evs[0].Payload)
		}
		got := f.approval(a.ID)
		if got.PreconditionHash != a.PreconditionHash || !got.PreconditionAt.Equal(a.PreconditionAt) {
			t.Fatalf("Approval() precondition = %q at %v, want %q at %v", got.PreconditionHash, got.PreconditionAt,
				a.PreconditionHash, a.PreconditionAt)
		}
		granted := f.answer(a.ID, true, t0.Add(time.Minute))
		c := withApproval("charge:inv_1", granted)
		wantReserved(t, "reserve with the granted approval", f.reserve(c.reserve(now)))
		got = f.approval(a.ID)
		if got.Status != store.Consumed || got.PreconditionHash != a.PreconditionHash || !got.PreconditionAt.Equal(a.PreconditionAt) {
			t.Errorf("Approval() after consumption = %s, precondition %q at %v; want consumed, %q at %v", got.Status,
				got.PreconditionHash, got.PreconditionAt, a.PreconditionHash, a.PreconditionAt)
		}
		if plain := f.createApproval(hashOf("other"), t0); plain.PreconditionHash != "" || !plain.PreconditionAt.IsZero() {
			t.Errorf("a request without a fingerprint reads %q at %v, want none", plain.PreconditionHash, plain.PreconditionAt)
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:inv_1")
		c.ApprovalID = newID("apr_")
		res := f.reserve(c.reserve(now))
		wantRefused(t, "reserve with an unknown approval", res, true, "unknown")
		wantBlockedReceipt(t, "reserve with an unknown approval", res)
		f.noEffect(c.Key)
	})

	t.Run("Mismatch", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.granted(hash)
		c := withApproval("charge:inv_1", a)
		c.Hash = hashOf("billing.charge inv_1 mutated")
		res := f.reserve(c.reserve(now))
		wantRefused(t, "reserve a mutated action", res, true, "mismatch")
		wantBlockedReceipt(t, "reserve a mutated action", res)
		same(t, "Approval() after a mismatch (not spent)", f.approval(a.ID), a)
		f.noEffect(c.Key)
	})

	t.Run("ConsumedReplay", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.granted(hash)
		c := withApproval("charge:inv_1", a)
		f.run(c, now, store.Committed)
		spent := f.approval(a.ID)
		// Another key, and the same (committed) key: the approval's reason comes first.
		for _, key := range []string{"charge:inv_2", c.Key} {
			res := f.reserve(withApproval(key, a).reserve(now.Add(time.Minute)))
			wantRefused(t, "replay on "+key, res, true, "consumed")
			wantBlockedReceipt(t, "replay on "+key, res)
		}
		same(t, "Approval() after replays", f.approval(a.ID), spent)
		f.noEffect("charge:inv_2")
	})

	t.Run("Denied", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		a = f.answer(a.ID, false, t0.Add(time.Minute))
		res := f.reserve(withApproval("charge:inv_1", a).reserve(now))
		wantRefused(t, "reserve with a denied approval", res, true, "denied")
		same(t, "Approval()", f.approval(a.ID), a)
		f.noEffect("charge:inv_1")
	})

	t.Run("Pending", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		res := f.reserve(withApproval("charge:inv_1", a).reserve(now))
		wantRefused(t, "reserve with a pending approval", res, true, "pending")
		same(t, "Approval()", f.approval(a.ID), a)
		f.noEffect("charge:inv_1")
	})

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.granted(hash)
		res := f.reserve(withApproval("charge:inv_1", a).reserve(a.ExpiresAt))
		wantRefused(t, "reserve with an expired approval", res, true, "expired")
		wantBlockedReceipt(t, "reserve with an expired approval", res)
		want := *a
		want.Status = store.Expired
		same(t, "ReserveResult.Approval", res.Approval, withoutAnswers(&want))
		same(t, "Approval() (written expired)", f.approval(a.ID), &want)
		f.noEffect("charge:inv_1")
	})

	t.Run("RefusedReservationKeepsApproval", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.granted(hash)
		// The earlier attempts are of the same action (the approval's hash): a refusal for
		// other arguments would be a key_conflict.
		done := newCall("charge:done")
		done.Hash = hash
		f.run(done, t0, store.Committed)
		busy := newCall("charge:busy")
		busy.Hash = hash
		f.reserved(busy, now)
		for _, r := range []struct{ key, reason string }{{done.Key, "committed"}, {busy.Key, "in_progress"}} {
			res := f.reserve(withApproval(r.key, a).reserve(now.Add(time.Second)))
			wantRefused(t, "reserve "+r.key+" with a valid approval", res, false, r.reason)
			same(t, "Approval() after a refused reservation (not spent)", f.approval(a.ID), a)
		}
	})

	t.Run("ReservationConsumes", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.granted(hash)
		c := withApproval("charge:inv_1", a)
		var before int64
		wc, counts := f.st.(store.WriteCounter)
		if counts {
			before = wc.WriteTransactions()
		}
		res := f.reserve(c.reserve(now))
		wantReserved(t, "reserve with a granted approval", res)
		if counts {
			if n := wc.WriteTransactions() - before; n != 1 {
				t.Errorf("reservation and consumption took %d write transactions, want 1", n)
			}
		}
		want := *a
		want.Status, want.ConsumedBy, want.ConsumedAt = store.Consumed, c.ActionID, now
		same(t, "ReserveResult.Approval", res.Approval, withoutAnswers(&want))
		same(t, "Approval() (consumed)", f.approval(a.ID), &want)
		if e := f.effect(c.Key); e.State != store.Executing || e.ActionID != c.ActionID {
			t.Errorf("Effect() = %s by %s, want executing by %s", e.State, e.ActionID, c.ActionID)
		}
		evs := f.events(store.EventFilter{ActionID: c.ActionID})
		same(t, "events", kinds(evs), []string{store.EventEffectReserved, store.EventApprovalConsumed})
	})

	t.Run("ApprovalOnly", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.granted(hash)
		c := withApproval("", a)
		res := f.reserve(c.reserve(now))
		wantReserved(t, "approval-only reserve", res)
		if res.Effect != nil {
			t.Errorf("approval-only reserve: Effect = %+v, want nil", res.Effect)
		}
		want := *a
		want.Status, want.ConsumedBy, want.ConsumedAt = store.Consumed, c.ActionID, now
		same(t, "Approval() (consumed)", f.approval(a.ID), &want)
		if es := f.effects(store.EffectFilter{}); len(es) != 0 {
			t.Errorf("approval-only reserve wrote effects: %v", es)
		}
		res = f.reserve(withApproval("", a).reserve(now))
		wantRefused(t, "approval-only replay", res, true, "consumed")
	})
}
