package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// testOnExpiry: a pending request whose action denies at expiry is written denied, by
// store.ExpiryApprover, with one approval_denied_at_expiry event and a chained record, on every
// path that finds it expired — the sweeper, a late answer, a reservation presenting it — and a
// granted request nobody spent still expires; a request asked again after it records the
// denial.
func testOnExpiry(t *testing.T, b Backend) {
	// deniedAtExpiry checks what every path leaves: the request denied by expiry at the time it
	// was found, one event saying so, and a chain that verifies with its record.
	deniedAtExpiry := func(t *testing.T, f *fixture, a *store.Approval, at time.Time, by string) {
		t.Helper()
		got := f.approval(a.ID)
		want := *a
		want.Status, want.Approver, want.AnsweredAt = store.Denied, store.ExpiryApprover, at
		want.Answers, want.Required = got.Answers, got.Required
		same(t, "Approval() denied at expiry", got, &want)
		if !got.DeniedAtExpiry() {
			t.Errorf("DeniedAtExpiry() = false for %+v", got)
		}
		evs := eventsOf(f, a.ID, store.EventApprovalDeniedAtExpiry)
		if len(evs) != 1 {
			t.Fatalf("events %s of %s = %v, want one", store.EventApprovalDeniedAtExpiry, a.ID, kinds(evs))
		}
		var p map[string]any
		if err := json.Unmarshal(evs[0].Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p["by"] != by || p["on_expiry"] != "deny" || p["status"] != "pending" || p["action"] != action {
			t.Errorf("event payload = %s, want by %s, on_expiry deny, status pending, action %s", evs[0].Payload, by, action)
		}
		if n := len(eventsOf(f, a.ID, store.EventApprovalInvalidated)); n != 0 {
			t.Errorf("%d approval_invalidated events for a request denied at expiry, want none", n)
		}
		f.verify()
	}
	expiryRecord := func(t *testing.T, f *fixture, id, kind string) {
		t.Helper()
		for _, s := range f.receipts(store.ReceiptFilter{}) {
			d := doc(t, s)
			if d["approval_id"] != id || d["kind"] != kind {
				continue
			}
			ap, _ := d["approval"].(map[string]any)
			if d["result"] != string(store.Denied) || ap["status"] != string(store.Denied) || ap["approver"] != store.ExpiryApprover {
				t.Errorf("record %s of %s = %s, want result denied, approval denied by %s", kind, id, s.Doc, store.ExpiryApprover)
			}
			return
		}
		t.Errorf("no %s record of %s", kind, id)
	}

	t.Run("Sweeper", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		sw, ok := f.st.(store.Sweeper)
		if !ok {
			t.Fatalf("%T sweeps nothing (store.Sweeper)", f.st)
		}
		pending := f.createApproval(hashOf("deny-a"), t0)
		partly := f.createApproval(hashOf("deny-b"), t0)
		if _, err := f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: t0.Add(time.Minute), ID: partly.ID, Grant: true,
			Approver: approver, Required: 2}); err != nil {
			t.Fatalf("first of two grants = %v", err)
		}
		partly = f.approval(partly.ID)
		granted := f.granted(hashOf("deny-c"))
		late := t0.Add(15 * time.Minute)
		for _, a := range []*store.Approval{pending, partly} {
			got, evs, err := sw.ExpireApproval(t.Context(), &store.ExpireRequest{Now: late, ID: a.ID, Deny: true})
			if err != nil {
				t.Fatalf("ExpireApproval(%s, deny) = %v", a.ID, err)
			}
			if got.Status != store.Denied || len(evs) != 1 || evs[0].Kind != store.EventApprovalDeniedAtExpiry || evs[0].ID == 0 {
				t.Errorf("ExpireApproval(%s, deny) = %s, %+v; want denied with one stored %s", a.ID, got.Status, evs, store.EventApprovalDeniedAtExpiry)
			}
			deniedAtExpiry(t, f, a, late, store.ExpiredBySweeper)
			expiryRecord(t, f, a.ID, receipt.KindApprovalExpired)
			if _, _, err := sw.ExpireApproval(t.Context(), &store.ExpireRequest{Now: late, ID: a.ID, Deny: true}); !errors.Is(err, store.ErrNothingToSweep) {
				t.Errorf("second ExpireApproval(%s, deny) = %v, want ErrNothingToSweep", a.ID, err)
			}
		}
		if got := f.approval(partly.ID); len(got.Answers) != 1 {
			t.Errorf("denied at expiry with %d answers, want the one grant it had kept", len(got.Answers))
		}
		// A person granted this one: it expires unspent, never denied.
		got, evs, err := sw.ExpireApproval(t.Context(), &store.ExpireRequest{Now: late, ID: granted.ID, Deny: true})
		if err != nil || got.Status != store.Expired || len(evs) != 1 || evs[0].Kind != store.EventApprovalInvalidated {
			t.Errorf("ExpireApproval(granted, deny) = %+v, %+v, %v; want expired with approval_invalidated", got, evs, err)
		}
		if a := f.approval(granted.ID); a.Status != store.Expired || a.Approver != approver {
			t.Errorf("granted request swept to %s by %s, want expired, still granted by %s", a.Status, a.Approver, approver)
		}
	})

	t.Run("Answer", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hashOf("deny-answer"), t0)
		_, err := f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: a.ExpiresAt, ID: a.ID, Grant: true, Approver: approver,
			DenyAtExpiry: true})
		wantAnswerError(t, "AnswerApproval at expiry (on_expiry deny)", err, "expired")
		var ae *store.AnswerError
		if errors.As(err, &ae) && (ae.Approval == nil || !ae.Approval.DeniedAtExpiry()) {
			t.Errorf("AnswerError.Approval = %+v, want the request denied at expiry", ae.Approval)
		}
		deniedAtExpiry(t, f, a, a.ExpiresAt, store.ExpiredByAnswer)
		expiryRecord(t, f, a.ID, receipt.KindApprovalExpired)
		if got := f.approval(a.ID); len(got.Answers) != 0 {
			t.Errorf("the late answer was recorded: %+v", got.Answers)
		}
		_, err = f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: a.ExpiresAt.Add(time.Minute), ID: a.ID, Grant: true,
			Approver: approver, DenyAtExpiry: true})
		wantAnswerError(t, "AnswerApproval after the denial at expiry", err, "already_denied")
	})

	t.Run("Reservation", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:deny-at-expiry")
		a := f.createApproval(c.Hash, t0)
		c.ApprovalID = a.ID
		req := c.reserve(a.ExpiresAt)
		req.DenyAtExpiry = true
		res := f.reserve(req)
		wantRefused(t, "reserve presenting a request expired unanswered (on_expiry deny)", res, true, "denied")
		wantBlockedReceipt(t, "reserve presenting a request expired unanswered", res)
		if res.Approval == nil || !res.Approval.DeniedAtExpiry() {
			t.Errorf("ReserveResult.Approval = %+v, want denied at expiry", res.Approval)
		}
		if got := docString(t, *res.Receipt, "approver"); got != store.ExpiryApprover {
			t.Errorf("blocked receipt's approver = %q, want %q", got, store.ExpiryApprover)
		}
		deniedAtExpiry(t, f, a, a.ExpiresAt, store.ExpiredByReservation)
		f.noEffect(c.Key)
		// Presented again, it is refused denied, writing nothing more.
		again := c.retry()
		res = f.reserve(again.reserve(a.ExpiresAt.Add(time.Minute)))
		wantRefused(t, "reserve presenting a request denied at expiry", res, true, "denied")
		if n := len(eventsOf(f, a.ID, store.EventApprovalDeniedAtExpiry)); n != 1 {
			t.Errorf("%d denial-at-expiry events after a second presentation, want 1", n)
		}
		// Asked again, the new request records the denial, as after a person's.
		fresh := c.retry()
		fresh.ApprovalID = ""
		ask := f.ask(fresh.ask(a.ExpiresAt.Add(2 * time.Minute)))
		if ask.Reused || ask.Approval.PreviousDenied != a.ID || ask.Approval.PreviousDeniedBy != store.ExpiryApprover {
			t.Errorf("ask after a denial at expiry = %+v, want a new request recording %s denied by %s", ask.Approval, a.ID, store.ExpiryApprover)
		}
		f.verify()
	})

	// Sweepers, late answers and presentations racing on one request: it is denied once, with
	// one event, whichever path wins.
	t.Run("Race", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		sw, ok := f.st.(store.Sweeper)
		if !ok {
			t.Fatalf("%T sweeps nothing (store.Sweeper)", f.st)
		}
		c := newCall("charge:deny-race")
		a := f.createApproval(c.Hash, t0)
		c.ApprovalID = a.ID
		late := a.ExpiresAt.Add(time.Second)
		const n = 4
		var wg sync.WaitGroup
		errs := make(chan error, 3*n)
		for i := range n {
			wg.Go(func() {
				_, _, err := sw.ExpireApproval(t.Context(), &store.ExpireRequest{Now: late, ID: a.ID, Deny: true})
				if err != nil && !errors.Is(err, store.ErrNothingToSweep) {
					errs <- fmt.Errorf("sweeper %d: %w", i, err)
				}
			})
			wg.Go(func() {
				_, err := f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: late, ID: a.ID, Grant: true,
					Approver: fmt.Sprintf("approver-%d", i), DenyAtExpiry: true})
				var ae *store.AnswerError
				if !errors.As(err, &ae) || (ae.Reason != "expired" && ae.Reason != "already_denied") {
					errs <- fmt.Errorf("answer %d = %v, want refused expired or already_denied", i, err)
				}
			})
			wg.Go(func() {
				req := c.retry().reserve(late)
				req.DenyAtExpiry = true
				res, err := f.st.Reserve(t.Context(), req)
				switch {
				case err != nil:
					errs <- fmt.Errorf("reserve %d: %w", i, err)
				case res.Refusal == nil || res.Refusal.Reason != "denied":
					errs <- fmt.Errorf("reserve %d = %+v, want refused denied", i, res.Refusal)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := f.approval(a.ID); !got.DeniedAtExpiry() {
			t.Errorf("after the race: %s by %q, want denied by %s", got.Status, got.Approver, store.ExpiryApprover)
		}
		if n := len(eventsOf(f, a.ID, store.EventApprovalDeniedAtExpiry)); n != 1 {
			t.Errorf("%d %s events after the race, want 1", n, store.EventApprovalDeniedAtExpiry)
		}
		f.noEffect(c.Key)
		f.verify()
	})

	t.Run("DefaultStillExpires", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		c := newCall("charge:expire-by-default")
		a := f.createApproval(c.Hash, t0)
		c.ApprovalID = a.ID
		res := f.reserve(c.reserve(a.ExpiresAt))
		wantRefused(t, "reserve presenting a request expired unanswered (default)", res, true, "expired")
		if got := f.approval(a.ID); got.Status != store.Expired || got.Approver != "" {
			t.Errorf("Approval() = %s by %q, want expired, by nobody", got.Status, got.Approver)
		}
		if n := len(eventsOf(f, a.ID, store.EventApprovalDeniedAtExpiry)); n != 0 {
			t.Errorf("%d denial-at-expiry events by default, want none", n)
		}
	})
}

// eventsOf is the events of kind about approval request id.
func eventsOf(f *fixture, id, kind string) []*store.Event {
	f.t.Helper()
	var out []*store.Event
	for _, e := range f.events(store.EventFilter{ApprovalID: id}) {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}
