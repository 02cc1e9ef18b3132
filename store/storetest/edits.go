package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// testEdits covers a grant with an edit (docs/approvals.md#approve-with-edits): the request
// then binds the edited action — its hash and document — the answer's event keeps what the
// edit changed (store.EditsOf), a reservation presenting the requested action is refused
// mismatch and one presenting the edited action spends it; an edit made against a hash the
// request no longer binds is refused edit_stale, and an edit that is not the request's action
// with other arguments, or arguments to set that nobody checked, are refused as invalid input.
// Every refusal writes nothing.
func testEdits(t *testing.T, b Backend) {
	doc := func(amount int) (json.RawMessage, string) {
		d, err := canon.Marshal(map[string]any{"schema": "latch.action/v1", "name": action,
			"arguments": map[string]any{"amount": int64(amount)}})
		if err != nil {
			t.Fatal(err)
		}
		return d, canon.Sum(d)
	}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	requested, reqHash := doc(500)
	edited, editHash := doc(400)
	change := []store.EditChange{{Argument: "amount", From: json.RawMessage("500"), To: json.RawMessage("400")}}
	create := func(f *fixture) *store.Approval {
		a := newApproval(reqHash, t0)
		a.Action = requested
		res, err := f.st.CreateApproval(f.t.Context(), &store.ApprovalRequest{Now: t0, Approval: a})
		if err != nil || res.Approval == nil {
			f.t.Fatalf("CreateApproval = %+v, %v", res, err)
		}
		return res.Approval
	}
	edit := &store.Edit{From: reqHash, Action: edited, Hash: editHash, Changes: change}

	t.Run("BindsTheEditedAction", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := create(f)
		got, err := f.st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: at(1), ID: a.ID, Grant: true, Approver: "alice",
			Method: store.MethodSession, Verified: true, Set: json.RawMessage(`{"amount":400}`), Edit: edit})
		if err != nil {
			t.Fatalf("grant with an edit: %v", err)
		}
		stored := f.approval(a.ID)
		if got.Status != store.Granted || stored.ActionHash != editHash || string(stored.Action) != string(edited) {
			t.Fatalf("after the edit: %s bound to %s (%s); want granted, bound to %s", stored.Status, stored.ActionHash, stored.Action, editHash)
		}
		evs := f.events(store.EventFilter{ApprovalID: a.ID})
		edits, err := store.EditsOf(evs)
		if err != nil || len(edits) != 1 {
			t.Fatalf("EditsOf(%v) = %+v, %v; want one edit", kinds(evs), edits, err)
		}
		e := edits[0]
		if e.By != "alice" || e.Method != store.MethodSession || e.From != reqHash || e.Hash != editHash ||
			string(e.Requested) != `{"amount":500}` || len(e.Changes) != 1 || string(e.Changes[0].To) != "400" || !e.At.Equal(at(1)) {
			t.Errorf("the edit read back = %+v", e)
		}
		old := newCall("charge:e1")
		old.Hash, old.ApprovalID = reqHash, a.ID
		wantRefused(t, "reserve with the requested action", f.reserve(old.reserve(at(2))), true, "mismatch")
		if s := f.approval(a.ID).Status; s != store.Granted {
			t.Fatalf("after the refused reservation the approval is %s, want granted", s)
		}
		c := newCall("charge:e1")
		c.Hash, c.ApprovalID = editHash, a.ID
		if res := f.reserve(c.reserve(at(3))); !res.Reserved || res.Approval == nil || res.Approval.Status != store.Consumed {
			t.Fatalf("reserve with the edited action = %+v, want reserved, the approval consumed", res)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, b)
		a := create(f)
		before := f.approval(a.ID)
		events := len(f.events(store.EventFilter{ApprovalID: a.ID}))
		answer := func(req store.AnswerRequest) error {
			req.Now, req.ID, req.Approver = at(1), a.ID, "alice"
			_, err := f.st.AnswerApproval(t.Context(), &req)
			return err
		}
		renamed, renamedHash := func() (json.RawMessage, string) {
			d, _ := canon.Marshal(map[string]any{"schema": "latch.action/v1", "name": "other.action", "arguments": map[string]any{"amount": int64(400)}})
			return d, canon.Sum(d)
		}()
		wantAnswerError(t, "an edit against another hash", answer(store.AnswerRequest{Grant: true,
			Edit: &store.Edit{From: hashOf("elsewhere"), Action: edited, Hash: editHash, Changes: change}}), store.ReasonEditStale)
		wantAnswerError(t, "a deny with an edit", answer(store.AnswerRequest{Grant: false, Edit: edit}), policy.ReasonEditInvalid)
		for _, c := range []struct {
			what string
			req  store.AnswerRequest
		}{
			{"an edit of another action", store.AnswerRequest{Grant: true, Edit: &store.Edit{From: reqHash, Action: renamed, Hash: renamedHash, Changes: change}}},
			{"an edit whose hash is not its document's", store.AnswerRequest{Grant: true, Edit: &store.Edit{From: reqHash, Action: edited, Hash: reqHash, Changes: change}}},
			{"an edit that changes nothing", store.AnswerRequest{Grant: true, Edit: &store.Edit{From: reqHash, Action: requested, Hash: reqHash, Changes: change}}},
			{"arguments to set nobody checked", store.AnswerRequest{Grant: true, Set: json.RawMessage(`{"amount":1}`)}},
		} {
			if err := answer(c.req); !errors.Is(err, store.ErrInvalidInput) {
				t.Errorf("%s = %v, want invalid input", c.what, err)
			}
		}
		same(t, "Approval() after refused edits", f.approval(a.ID), before)
		if evs := f.events(store.EventFilter{ApprovalID: a.ID}); len(evs) != events {
			t.Errorf("events after refused edits = %v, want %d (nothing written)", kinds(evs), events)
		}
	})
}
