package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// standingDoc is the canonical action document of a billing.charge of invoice by the cast's
// principal.
func standingDoc(invoice string, amount int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"arguments":{"amount":%d,"invoice_id":%q},"environment":"production","name":%q,"principal":{"agent":%q,"user":%q},"resource":null,"schema":"latch.action/v1"}`,
		amount, invoice, action, agent, user))
}

// grantStanding stores a request for invoice inv_0 and grants it with terms under a fresh
// standing id, returning the standing approval the grant created.
func (f *fixture) grantStanding(terms store.StandingTerms) *store.Standing {
	f.t.Helper()
	a := newApproval(hashOf("standing inv_0"), t0)
	a.Action = standingDoc("inv_0", 100)
	if _, err := f.st.CreateApproval(f.t.Context(), &store.ApprovalRequest{Now: t0, Approval: a}); err != nil {
		f.t.Fatalf("CreateApproval = %v", err)
	}
	req := &store.AnswerRequest{Now: t0.Add(time.Minute), ID: a.ID, Grant: true, Approver: approver, Standing: &terms,
		StandingID: newID(store.StandingPrefix)}
	if _, err := f.st.AnswerApproval(f.t.Context(), req); err != nil {
		f.t.Fatalf("AnswerApproval with standing terms = %v", err)
	}
	s, err := f.st.(store.StandingStore).Standing(f.t.Context(), req.StandingID)
	if err != nil {
		f.t.Fatalf("Standing(%s) = %v", req.StandingID, err)
	}
	return s
}

// standingUse is the reservation of invoice's charge presenting standing approval id.
func standingUse(id, invoice string, amount int, now time.Time) *store.ReserveRequest {
	c := newCall("charge:" + invoice)
	c.ApprovalID = id
	req := c.reserve(now)
	req.Document = standingDoc(invoice, amount)
	return req
}

// testStanding covers standing approvals (docs/approvals.md#standing-approvals): the grant that
// decides a request creates one; each reservation presenting it spends a use in its own
// transaction — exactly Uses of any number of racing reservations — and a refused one spends
// nothing; a revocation ends it.
func testStanding(t *testing.T, b Backend) {
	terms := store.StandingTerms{Uses: 3, For: store.Duration(time.Hour), Vary: []string{"invoice_id"}, Max: map[string]int64{"amount": 500}}

	t.Run("Spend", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		s := f.grantStanding(terms)
		if s.Uses != 0 || s.Status != store.StandingActive || !s.ExpiresAt.Equal(t0.Add(time.Minute+time.Hour)) || len(s.GrantedBy) != 1 {
			t.Fatalf("granted standing approval = %+v", s)
		}
		now := t0.Add(2 * time.Minute)
		if res := f.reserve(standingUse(s.ID, "inv_1", 900, now)); res.Refusal == nil || res.Refusal.Reason != "mismatch" {
			t.Errorf("a use outside the bounds = %+v, want refused mismatch", res.Refusal)
		}
		res := f.reserve(standingUse(s.ID, "inv_1", 400, now))
		if res.Refusal != nil || !res.Reserved || res.Standing == nil || res.Standing.Uses != 1 {
			t.Fatalf("a use within the bounds = %+v, %+v", res.Refusal, res.Standing)
		}
		dup := standingUse(s.ID, "inv_1", 400, now)
		if res := f.reserve(dup); res.Refusal == nil || res.Refusal.Reason != "in_progress" {
			t.Errorf("a duplicate = %+v, want refused in_progress", res.Refusal)
		}
		cur, err := f.st.(store.StandingStore).Standing(t.Context(), s.ID)
		if err != nil || cur.Uses != 1 {
			t.Errorf("after one use and two refusals: %+v, %v; want 1 use", cur, err)
		}
		if got, err := f.st.(store.StandingStore).Standings(t.Context(), store.StandingFilter{State: store.StandingActive, Now: now}); err != nil || len(got) != 1 {
			t.Errorf("Standings(active) = %d, %v; want 1", len(got), err)
		}
		if _, err := f.st.(store.StandingStore).RevokeStanding(t.Context(), &store.RevokeStandingRequest{Now: now, ID: s.ID, By: approver}); err != nil {
			t.Fatal(err)
		}
		if res := f.reserve(standingUse(s.ID, "inv_2", 100, now)); res.Refusal == nil || res.Refusal.Reason != "revoked" {
			t.Errorf("a use after the revocation = %+v, want refused revoked", res.Refusal)
		}
		if _, err := f.st.(store.StandingStore).RevokeStanding(t.Context(), &store.RevokeStandingRequest{Now: now, ID: s.ID, By: approver}); err == nil {
			t.Error("revoking twice succeeded")
		}
		evs := kinds(f.events(store.EventFilter{ApprovalID: s.From}))
		same(t, "events of the request", evs, []string{store.EventApprovalRequested, store.EventApprovalGranted, store.EventStandingGranted, store.EventStandingRevoked})
	})

	t.Run("Race", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		s := f.grantStanding(terms)
		const n = 8
		var wg sync.WaitGroup
		results := make([]*store.ReserveResult, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = f.st.Reserve(t.Context(), standingUse(s.ID, fmt.Sprintf("inv_r%d", i), 100, t0.Add(2*time.Minute)))
			}()
		}
		wg.Wait()
		reserved, exhausted := 0, 0
		for i := range n {
			switch {
			case errs[i] != nil:
				t.Fatalf("Reserve %d = %v", i, errs[i])
			case results[i].Reserved && results[i].Refusal == nil:
				reserved++
			case results[i].Refusal != nil && results[i].Refusal.Reason == "exhausted":
				exhausted++
			default:
				t.Errorf("Reserve %d = %+v", i, results[i].Refusal)
			}
		}
		if reserved != terms.Uses || exhausted != n-terms.Uses {
			t.Errorf("%d racing uses of %d: %d reserved, %d exhausted; want %d and %d", n, terms.Uses, reserved, exhausted, terms.Uses, n-terms.Uses)
		}
	})
}
