package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// testNudges: a reminder and an escalation of a pending request are each recorded once, when
// due, with their event; not before, not on a request answered or expired, not a reminder after
// the escalation; sweepers racing on one request record it once.
func testNudges(t *testing.T, b Backend) {
	nudger := func(t *testing.T, st store.Store) store.Nudger {
		t.Helper()
		nd, ok := st.(store.Nudger)
		if !ok {
			t.Fatalf("%T records no reminders (store.Nudger)", st)
		}
		return nd
	}
	remind := func(id string, now time.Time) *store.NudgeRequest {
		return &store.NudgeRequest{Now: now, ID: id, Kind: store.NudgeRemind, After: 5 * time.Minute, Sweeper: "sweeper-1",
			Required: 2, Roles: []string{"leads"}}
	}
	escalate := func(id string, now time.Time) *store.NudgeRequest {
		return &store.NudgeRequest{Now: now, ID: id, Kind: store.NudgeEscalate, After: 10 * time.Minute, Sweeper: "sweeper-2",
			Required: 2, Roles: []string{"heads"}, People: []string{"erin"}}
	}
	nothing := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrNothingToSweep) {
			t.Errorf("%s = %v, want ErrNothingToSweep", what, err)
		}
	}
	t.Run("Once", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		nd := nudger(t, f.st)
		a := f.createApproval(hashOf("nudge"), t0)
		_, _, err := nd.NudgeApproval(t.Context(), remind(a.ID, t0.Add(5*time.Minute-time.Second)))
		nothing(t, "reminder before remind_after", err)
		got, evs, err := nd.NudgeApproval(t.Context(), remind(a.ID, t0.Add(5*time.Minute)))
		if err != nil {
			t.Fatalf("reminder when due = %v", err)
		}
		if got == nil || got.ID != a.ID || len(evs) != 1 || evs[0].Kind != store.EventApprovalReminded || evs[0].ID == 0 ||
			evs[0].ApprovalID != a.ID || !strings.Contains(string(evs[0].Payload), `"roles":["leads"]`) ||
			!strings.Contains(string(evs[0].Payload), `"progress":"0 of 2"`) {
			t.Errorf("reminder = %+v, %+v; want the request and one approval_reminded naming leads, 0 of 2", got, evs)
		}
		_, _, err = nd.NudgeApproval(t.Context(), remind(a.ID, t0.Add(6*time.Minute)))
		nothing(t, "second reminder", err)
		_, _, err = nd.NudgeApproval(t.Context(), escalate(a.ID, t0.Add(9*time.Minute)))
		nothing(t, "escalation before escalate_after", err)
		_, evs, err = nd.NudgeApproval(t.Context(), escalate(a.ID, t0.Add(10*time.Minute)))
		if err != nil || len(evs) != 1 || evs[0].Kind != store.EventApprovalEscalated ||
			!strings.Contains(string(evs[0].Payload), `"people":["erin"]`) {
			t.Fatalf("escalation when due = %+v, %v; want one approval_escalated naming erin", evs, err)
		}
		_, _, err = nd.NudgeApproval(t.Context(), escalate(a.ID, t0.Add(11*time.Minute)))
		nothing(t, "second escalation", err)

		// A sweeper that was down through both moments: the escalation, and no reminder after it.
		late := f.createApproval(hashOf("nudge-late"), t0)
		if _, _, err := nd.NudgeApproval(t.Context(), escalate(late.ID, t0.Add(12*time.Minute))); err != nil {
			t.Fatalf("escalation = %v", err)
		}
		_, _, err = nd.NudgeApproval(t.Context(), remind(late.ID, t0.Add(12*time.Minute)))
		nothing(t, "reminder after the escalation", err)

		denied := f.createApproval(hashOf("nudge-denied"), t0)
		f.answer(denied.ID, false, t0.Add(time.Minute))
		_, _, err = nd.NudgeApproval(t.Context(), remind(denied.ID, t0.Add(5*time.Minute)))
		nothing(t, "reminder of a denied request", err)
		expired := f.createApproval(hashOf("nudge-expired"), t0)
		_, _, err = nd.NudgeApproval(t.Context(), remind(expired.ID, expired.ExpiresAt))
		nothing(t, "reminder of an expired request", err)
		_, _, err = nd.NudgeApproval(t.Context(), remind(newID("apr_"), t0.Add(5*time.Minute)))
		nothing(t, "reminder of no request", err)
		bad := remind(a.ID, t0.Add(5*time.Minute))
		bad.Kind = "shout"
		if _, _, err := nd.NudgeApproval(t.Context(), bad); err == nil || errors.Is(err, store.ErrNothingToSweep) {
			t.Errorf("nudge of kind shout = %v, want an input error", err)
		}

		stored, err := f.st.Events(t.Context(), store.EventFilter{ApprovalID: a.ID})
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range stored {
			if e.Kind == store.EventApprovalReminded || e.Kind == store.EventApprovalEscalated {
				kinds = append(kinds, e.Kind)
			}
		}
		if strings.Join(kinds, " ") != "approval_reminded approval_escalated" {
			t.Errorf("stored nudges %v, want one reminder, then one escalation", kinds)
		}
	})
	t.Run("Race", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		nd := nudger(t, f.st)
		for i, kind := range []store.NudgeKind{store.NudgeRemind, store.NudgeEscalate} {
			a := f.createApproval(hashOf("nudge-race-"+string(kind)), t0)
			const n = 8
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range n {
				wg.Go(func() {
					req := remind(a.ID, t0.Add(11*time.Minute))
					if i == 1 {
						req = escalate(a.ID, t0.Add(11*time.Minute))
					}
					_, _, err := nd.NudgeApproval(t.Context(), req)
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			wrote := 0
			for err := range errs {
				switch {
				case err == nil:
					wrote++
				case !errors.Is(err, store.ErrNothingToSweep):
					t.Errorf("NudgeApproval(%s) = %v", kind, err)
				}
			}
			evs, err := f.st.Events(t.Context(), store.EventFilter{ApprovalID: a.ID})
			if err != nil {
				t.Fatal(err)
			}
			recorded := 0
			for _, e := range evs {
				if e.Kind == store.NudgeEventKind(kind) {
					recorded++
				}
			}
			if wrote != 1 || recorded != 1 {
				t.Errorf("%s: %d of %d racing sweepers wrote, %d events stored; want 1 and 1", kind, wrote, n, recorded)
			}
		}
	})
}
