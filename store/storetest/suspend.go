package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// suspender returns the fixture's store as a store.Suspender, failing the test when it is not.
func (f *fixture) suspender() store.Suspender {
	f.t.Helper()
	s, ok := f.st.(store.Suspender)
	if !ok {
		f.t.Fatalf("%s store %T does not implement store.Suspender", f.b.Name, f.st)
	}
	return s
}

var argumentsHash = store.TokenHash(string(arguments)) // the hex SHA-256 of the canonical arguments

func suspendReq(c call, now time.Time, token string, max int) *store.SuspendRequest {
	return &store.SuspendRequest{Now: now, Key: c.Key, ActionID: c.ActionID, Attempt: 1, TokenHash: store.TokenHash(token),
		ArgumentsHash: argumentsHash, Agent: agent, User: user, Request: []byte(`{"ask":"confirm"}`),
		Until: now.Add(5 * time.Minute), MaxRounds: max}
}

func resumeReq(c call, now time.Time, token string) *store.ResumeRequest {
	return &store.ResumeRequest{Now: now, ActionID: c.ActionID, Token: token, ArgumentsHash: argumentsHash, Agent: agent,
		User: user, InputKeys: []string{"confirm"}, InputHash: hashOf("input")[len("sha256:"):], Until: now.Add(lease)}
}

// wantSuspensionRefused fails the test unless err is a *store.SuspensionError with reason.
func wantSuspensionRefused(t *testing.T, what string, err error, reason string) {
	t.Helper()
	var se *store.SuspensionError
	if !errors.As(err, &se) || se.Reason != reason || !errors.Is(err, store.ErrSuspensionRefused) {
		t.Errorf("%s = %v, want a SuspensionError %s", what, err, reason)
	}
}

func testSuspensions(t *testing.T, b Backend) {
	t.Run("SuspendResumeOnce", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		s := f.suspender()
		c := newCall("charge:inv_1")
		f.reserved(c, t0)
		at := t0.Add(10 * time.Second)
		res, err := s.Suspend(t.Context(), suspendReq(c, at, "tok-1", 0))
		if err != nil {
			t.Fatalf("Suspend = %v", err)
		}
		if res.Suspension.Round != 1 || !res.Effect.LeaseExpiresAt.Equal(at.Add(5*time.Minute)) || res.Effect.State != store.Executing {
			t.Errorf("Suspend = round %d, effect %+v; want round 1, executing, lease %v", res.Suspension.Round, res.Effect, at.Add(5*time.Minute))
		}
		if e := f.effect(c.Key); e.State != store.Executing || e.Attempt != 1 || !e.LeaseExpiresAt.Equal(at.Add(5*time.Minute)) {
			t.Errorf("effect after Suspend = %+v, want executing, attempt 1, lease extended", e)
		}
		// Under the suspension the key is held: a duplicate is refused in_progress.
		wantRefused(t, "reserve while suspended", f.reserve(c.retry().reserve(t0.Add(2*lease))), false, "in_progress")
		_, err = s.Suspend(t.Context(), suspendReq(c, at.Add(time.Second), "tok-2", 0))
		wantSuspensionRefused(t, "Suspend while suspended", err, store.SuspendOpen)

		now := at.Add(time.Minute)
		refusals := []struct {
			name   string
			mod    func(*store.ResumeRequest)
			reason string
		}{
			{"wrong token", func(r *store.ResumeRequest) { r.Token = "tok-x" }, store.SuspensionToken},
			{"empty token", func(r *store.ResumeRequest) { r.Token = "" }, store.SuspensionToken},
			{"other agent", func(r *store.ResumeRequest) { r.Agent = "agent:other" }, store.SuspensionHolder},
			{"other user", func(r *store.ResumeRequest) { r.User = "user:eve" }, store.SuspensionHolder},
			{"other arguments", func(r *store.ResumeRequest) { r.ArgumentsHash = store.TokenHash("{}") }, store.SuspensionArguments},
			{"other action", func(r *store.ResumeRequest) { r.ActionID = newID("act_") }, store.NotSuspended},
		}
		for _, r := range refusals {
			req := resumeReq(c, now, "tok-1")
			r.mod(req)
			_, err := s.Resume(t.Context(), req)
			wantSuspensionRefused(t, "Resume with "+r.name, err, r.reason)
		}
		res, err = s.Resume(t.Context(), resumeReq(c, now, "tok-1"))
		if err != nil {
			t.Fatalf("Resume with the token = %v", err)
		}
		if res.Suspension.ResumedAt.IsZero() || len(res.Suspension.InputKeys) != 1 || res.Effect.State != store.Executing {
			t.Errorf("Resume = %+v, %+v; want spent with its input keys, executing", res.Suspension, res.Effect)
		}
		_, err = s.Resume(t.Context(), resumeReq(c, now.Add(time.Second), "tok-1"))
		wantSuspensionRefused(t, "Resume again with the same token", err, store.SuspensionResumed)

		sps, err := s.Suspensions(t.Context(), c.ActionID)
		if err != nil || len(sps) != 1 || sps[0].Open() || sps[0].TokenHash != store.TokenHash("tok-1") ||
			sps[0].InputHash == "" || string(sps[0].Request) != `{"ask":"confirm"}` {
			t.Fatalf("Suspensions = %+v, %v; want one spent round", sps, err)
		}
		var kinds []string
		for _, e := range f.events(store.EventFilter{ActionID: c.ActionID}) {
			kinds = append(kinds, e.Kind)
		}
		if n := count(kinds, store.EventExecutionSuspended); n != 1 {
			t.Errorf("%d execution_suspended events, want 1: %v", n, kinds)
		}
		if n := count(kinds, store.EventExecutionResumed); n != 1 {
			t.Errorf("%d execution_resumed events, want 1: %v", n, kinds)
		}
		// The holder records its outcome as any holder does: one receipt for the execution.
		f.record(c.record(now.Add(time.Second), 1, store.Committed))
		if e := f.effect(c.Key); e.State != store.Committed {
			t.Errorf("effect after the resumed leg committed = %s, want committed", e.State)
		}
		if n := len(f.receipts(store.ReceiptFilter{ActionID: c.ActionID})); n != 1 {
			t.Errorf("%d receipts of the action, want 1", n)
		}
		f.verify()
	})

	t.Run("RoundsBounded", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		s := f.suspender()
		c := newCall("charge:inv_1")
		f.reserved(c, t0)
		now := t0
		for i := range 2 {
			now = now.Add(time.Second)
			tok := "tok-" + string(rune('a'+i))
			if _, err := s.Suspend(t.Context(), suspendReq(c, now, tok, 2)); err != nil {
				t.Fatalf("Suspend round %d = %v", i+1, err)
			}
			if _, err := s.Resume(t.Context(), resumeReq(c, now, tok)); err != nil {
				t.Fatalf("Resume round %d = %v", i+1, err)
			}
		}
		before := f.effect(c.Key)
		_, err := s.Suspend(t.Context(), suspendReq(c, now.Add(time.Second), "tok-c", 2))
		wantSuspensionRefused(t, "Suspend past the bound", err, store.SuspendRounds)
		same(t, "effect after a refused Suspend", f.effect(c.Key), before)
	})

	t.Run("LapsedLeaseIsAmbiguous", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		s := f.suspender()
		c := newCall("charge:inv_1")
		f.reserved(c, t0)
		res, err := s.Suspend(t.Context(), suspendReq(c, t0, "tok-1", 0))
		if err != nil {
			t.Fatalf("Suspend = %v", err)
		}
		late := res.Effect.LeaseExpiresAt.Add(time.Second)
		_, err = s.Resume(t.Context(), resumeReq(c, late, "tok-1"))
		wantSuspensionRefused(t, "Resume after the lease lapsed", err, store.SuspensionLeaseLost)
		// The lapse was committed with the refusal: the record is ambiguous, and stays so.
		if e := f.effect(c.Key); e.State != store.Ambiguous {
			t.Fatalf("effect after a resume on a lapsed lease = %s, want ambiguous", e.State)
		}
		_, err = s.Resume(t.Context(), resumeReq(c, late.Add(time.Second), "tok-1"))
		wantSuspensionRefused(t, "Resume again", err, store.SuspensionLeaseLost)
		wantRefused(t, "reserve after the lapse", f.reserve(c.retry().reserve(late.Add(time.Minute))), false, "ambiguous")
		f.verify()
	})

	t.Run("SuspendAfterLapseRefused", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		s := f.suspender()
		c := newCall("charge:inv_1")
		f.reserved(c, t0)
		_, err := s.Suspend(t.Context(), suspendReq(c, t0.Add(lease), "tok-1", 0))
		wantSuspensionRefused(t, "Suspend at the lease's end", err, store.SuspensionLeaseLost)
		if sps, _ := s.Suspensions(t.Context(), c.ActionID); len(sps) != 0 {
			t.Errorf("Suspensions after a refused Suspend = %+v, want none", sps)
		}
	})

	t.Run("ConcurrentResumesOneWins", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		s := f.suspender()
		c := newCall("charge:inv_1")
		f.reserved(c, t0)
		if _, err := s.Suspend(t.Context(), suspendReq(c, t0, "tok-1", 0)); err != nil {
			t.Fatalf("Suspend = %v", err)
		}
		var wins, resumed atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				_, err := s.Resume(t.Context(), resumeReq(c, t0.Add(time.Second), "tok-1"))
				var se *store.SuspensionError
				switch {
				case err == nil:
					wins.Add(1)
				case errors.As(err, &se) && se.Reason == store.SuspensionResumed:
					resumed.Add(1)
				default:
					t.Errorf("concurrent Resume = %v", err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 || resumed.Load() != 7 {
			t.Errorf("concurrent resumes: %d won, %d refused suspension_resumed; want 1 and 7", wins.Load(), resumed.Load())
		}
	})
}

func count(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}
