package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// testAnswers covers answers from several people: M-of-N, one person once whatever the
// spelling, method or session, the self-approval check in every spelling, verified answers,
// and answers racing (docs/approvals.md).
func testAnswers(t *testing.T, b Backend) {
	hash := hashOf("billing.refund inv_1")
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	ask := func(f *fixture, req store.AnswerRequest) (*store.Approval, error) {
		return f.st.AnswerApproval(f.t.Context(), &req)
	}
	// unchanged checks that a refused answer wrote nothing: the request and its events are as before.
	unchanged := func(t *testing.T, f *fixture, what string, before *store.Approval, events int) {
		t.Helper()
		same(t, "Approval() after "+what, f.approval(before.ID), before)
		if evs := f.events(store.EventFilter{ApprovalID: before.ID}); len(evs) != events {
			t.Errorf("events after %s = %v, want %d (nothing written)", what, kinds(evs), events)
		}
	}

	t.Run("TwoOfN", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		first, err := ask(f, store.AnswerRequest{Now: at(1), ID: a.ID, Grant: true, Approver: "alice", Method: store.MethodSession, Verified: true, Note: "looks right", Required: 2})
		if err != nil {
			t.Fatalf("first grant: %v", err)
		}
		alice := store.Answer{Approver: store.Approver{Name: "alice", Method: store.MethodSession, Verified: true}, Grant: true, Note: "looks right", At: at(1), Required: 2}
		want := *a
		want.Answers, want.Required = []store.Answer{alice}, 2
		same(t, "after 1 of 2", first, &want)
		same(t, "Approval() after 1 of 2", f.approval(a.ID), &want)
		if got := store.Progress(first, 0); got != "1 of 2" {
			t.Errorf("Progress after one grant = %q, want 1 of 2", got)
		}
		// A request still pending cannot be spent.
		c := newCall("refund:inv_1")
		c.Hash, c.ApprovalID = hash, a.ID
		res := f.reserve(c.reserve(at(2)))
		wantRefused(t, "reserve with 1 of 2 grants", res, true, "pending")

		second, err := ask(f, store.AnswerRequest{Now: at(3), ID: a.ID, Grant: true, Approver: "bob", Method: store.MethodToken, Verified: true, Required: 2})
		if err != nil {
			t.Fatalf("second grant: %v", err)
		}
		bob := store.Answer{Approver: store.Approver{Name: "bob", Method: store.MethodToken, Verified: true}, Grant: true, At: at(3), Required: 2}
		want.Status, want.Approver, want.AnsweredAt = store.Granted, "bob", at(3)
		want.Answers = []store.Answer{alice, bob}
		same(t, "after 2 of 2", second, &want)
		same(t, "Approval() after 2 of 2", f.approval(a.ID), &want)
		evs := f.events(store.EventFilter{ApprovalID: a.ID})
		same(t, "events", kinds(evs)[len(evs)-2:], []string{store.EventApprovalAnswered, store.EventApprovalGranted})
		if got := f.approvals(store.ApprovalFilter{Status: store.Granted}); len(got) != 1 || len(got[0].Answers) != 2 {
			t.Errorf("Approvals(granted) = %v, want the request with its 2 answers", got)
		}
		res = f.reserve(c.reserve(at(4)))
		wantReserved(t, "reserve with 2 of 2 grants", res)
	})

	t.Run("OnePersonCountsOnce", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		if _, err := ask(f, store.AnswerRequest{Now: at(1), ID: a.ID, Grant: true, Approver: "alice", Method: store.MethodSession, Verified: true, Required: 2}); err != nil {
			t.Fatal(err)
		}
		before := f.approval(a.ID)
		events := len(f.events(store.EventFilter{ApprovalID: a.ID}))
		// Another session, a token, the CLI, another spelling: the same person.
		for _, again := range []store.AnswerRequest{
			{Approver: "alice", Method: store.MethodSession, Verified: true, Grant: true},
			{Approver: "ALICE", Method: store.MethodToken, Verified: true, Grant: true},
			{Approver: " Alice ", Method: store.MethodCLI, Grant: true},
			{Approver: "ａｌｉｃｅ", Method: store.MethodJWT, Verified: true, Grant: true},
			{Approver: "alice", Method: store.MethodProxy, Verified: true, Grant: false},
		} {
			again.Now, again.ID, again.Required = at(2), a.ID, 2
			_, err := ask(f, again)
			wantAnswerError(t, fmt.Sprintf("answer again as %s", again.Approver), err, store.ReasonAlreadyAnswered)
		}
		unchanged(t, f, "answers by the same person", before, events)
	})

	t.Run("OneDenyDenies", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		if _, err := ask(f, store.AnswerRequest{Now: at(1), ID: a.ID, Grant: true, Approver: "alice", Required: 3}); err != nil {
			t.Fatal(err)
		}
		got, err := ask(f, store.AnswerRequest{Now: at(2), ID: a.ID, Grant: false, Approver: "bob", Note: "wrong account", Required: 3})
		if err != nil {
			t.Fatalf("deny: %v", err)
		}
		if got.Status != store.Denied || got.Approver != "bob" || got.Note != "wrong account" || len(got.Answers) != 2 {
			t.Errorf("after a deny = %s by %s (%q), %d answers; want denied by bob with the note, 2 answers", got.Status, got.Approver, got.Note, len(got.Answers))
		}
		events := len(f.events(store.EventFilter{ApprovalID: a.ID}))
		_, err = ask(f, store.AnswerRequest{Now: at(3), ID: a.ID, Grant: true, Approver: "carol", Required: 3})
		wantAnswerError(t, "a grant after the deny", err, "already_denied")
		unchanged(t, f, "a grant after the deny", got, events)
	})

	t.Run("SelfApprovalInAnySpelling", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0) // agent:billing for user:ana
		for _, who := range []string{"USER:ANA", " user:ana ", "User:Ana", "ｕｓｅｒ:ａｎａ", "Agent:Billing", "AGENT:BILLING"} {
			for _, m := range []string{store.MethodCLI, store.MethodSession} {
				_, err := ask(f, store.AnswerRequest{Now: at(1), ID: a.ID, Grant: true, Approver: who, Method: m, Verified: m != store.MethodCLI})
				wantAnswerError(t, "answer by "+who+" over "+m, err, store.ReasonSelfApproval)
			}
		}
		unchanged(t, f, "self-approvals", a, 1)
	})

	t.Run("VerifiedRequired", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		_, err := ask(f, store.AnswerRequest{Now: at(1), ID: a.ID, Grant: true, Approver: "alice", RequireVerified: true})
		wantAnswerError(t, "an unverified answer to a request that requires verified ones", err, store.ReasonNotVerified)
		_, err = ask(f, store.AnswerRequest{Now: at(1), ID: a.ID, Grant: false, Approver: "alice", RequireVerified: true})
		wantAnswerError(t, "an unverified deny", err, store.ReasonNotVerified)
		unchanged(t, f, "unverified answers", a, 1)
		got, err := ask(f, store.AnswerRequest{Now: at(2), ID: a.ID, Grant: true, Approver: "alice", Method: store.MethodSession, Verified: true, RequireVerified: true})
		if err != nil || got.Status != store.Granted || !got.Answers[0].Verified {
			t.Errorf("a verified answer = %v, %v; want granted, verified", got, err)
		}
	})

	// Every method of store.Methods is stored and read back as given: slack too, which a
	// store before its migration (SQLite 20, Postgres 19) refused by its check.
	t.Run("EveryMethod", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		for i, m := range store.Methods {
			a := f.createApproval(hashOf("method "+m), t0)
			name := fmt.Sprintf("approver-%d", i)
			got, err := ask(f, store.AnswerRequest{Now: at(1), ID: a.ID, Grant: true, Approver: name, Method: m, Verified: m != store.MethodCLI})
			if err != nil {
				t.Fatalf("AnswerApproval(method %s) = %v", m, err)
			}
			stored := f.approval(a.ID)
			for _, ap := range []*store.Approval{got, stored} {
				if ap.Status != store.Granted || len(ap.Answers) != 1 || ap.Answers[0].Method != m || ap.Answers[0].Verified != (m != store.MethodCLI) {
					t.Errorf("answer by method %s = %s %+v, want granted with one answer of method %s", m, ap.Status, ap.Answers, m)
				}
			}
		}
		f.verify()
	})

	t.Run("BadMethod", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		for _, req := range []store.AnswerRequest{
			{Approver: "alice", Method: "pigeon", Verified: true},
			{Approver: "alice", Method: store.MethodCLI, Verified: true}, // the CLI never verifies
			{Approver: "alice", Verified: true},
			{Approver: "alice", Required: -1},
		} {
			req.Now, req.ID, req.Grant = at(1), a.ID, true
			_, err := ask(f, req)
			var ie *store.InputError
			if !errors.As(err, &ie) || !errors.Is(err, store.ErrInvalidInput) {
				t.Errorf("AnswerApproval(method %q, verified %t, required %d) = %v, want an InputError", req.Method, req.Verified, req.Required, err)
			}
		}
		unchanged(t, f, "answers with a bad method", a, 1)
	})

	t.Run("ConcurrentGrantsCountEachOnce", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		const n, required = 8, 3
		_, errs := race(n, func(i int) (*store.Approval, error) {
			return ask(f, store.AnswerRequest{Now: at(1), ID: a.ID, Grant: true, Approver: fmt.Sprintf("approver-%d", i),
				Method: store.MethodSession, Verified: true, Required: required})
		})
		ok := 0
		for i, err := range errs {
			if err == nil {
				ok++
				continue
			}
			wantAnswerError(t, fmt.Sprintf("grant %d after the request was granted", i), err, "already_granted")
		}
		got := f.approval(a.ID)
		if ok != required || got.Status != store.Granted || len(got.Answers) != required || store.Grants(got.Answers, true) != required {
			t.Errorf("after %d racing grants: %d accepted, status %s, %d answers; want %d accepted, granted, %d answers",
				n, ok, got.Status, len(got.Answers), required, required)
		}
	})

	t.Run("ConcurrentAnswersOfOnePerson", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		spellings := []string{"dora", "Dora", "DORA", " dora", "ｄｏｒａ", "dOrA", "dora ", "Dora"}
		_, errs := race(len(spellings), func(i int) (*store.Approval, error) {
			return ask(f, store.AnswerRequest{Now: at(1), ID: a.ID, Grant: true, Approver: spellings[i],
				Method: store.MethodSession, Verified: true, Required: 2})
		})
		ok := 0
		for i, err := range errs {
			if err == nil {
				ok++
				continue
			}
			wantAnswerError(t, fmt.Sprintf("answer %d as %q", i, spellings[i]), err, store.ReasonAlreadyAnswered)
		}
		got := f.approval(a.ID)
		if ok != 1 || got.Status != store.Pending || len(got.Answers) != 1 {
			t.Errorf("one person answering %d times at once: %d accepted, status %s, %d answers; want 1, pending, 1",
				len(spellings), ok, got.Status, len(got.Answers))
		}
	})

	t.Run("ConcurrentGrantAndDeny", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := f.createApproval(hash, t0)
		if _, err := ask(f, store.AnswerRequest{Now: at(1), ID: a.ID, Grant: true, Approver: "alice", Required: 2}); err != nil {
			t.Fatal(err)
		}
		_, errs := race(2, func(i int) (*store.Approval, error) {
			return ask(f, store.AnswerRequest{Now: at(2), ID: a.ID, Grant: i == 0, Approver: []string{"bob", "carol"}[i], Required: 2})
		})
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("grant and deny racing: errors %v; want exactly one to win", errs)
		}
		got := f.approval(a.ID)
		switch {
		case errs[0] == nil && (got.Status != store.Granted || got.Approver != "bob"):
			t.Errorf("the grant won but the request is %s by %s", got.Status, got.Approver)
		case errs[1] == nil && (got.Status != store.Denied || got.Approver != "carol"):
			t.Errorf("the deny won but the request is %s by %s", got.Status, got.Approver)
		}
		if len(got.Answers) != 2 {
			t.Errorf("answers after the race = %d, want 2 (alice and the winner)", len(got.Answers))
		}
	})
}
