package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/store"
)

// editablePolicy is the test servers' policy with a refund's amount editable by its approvers:
// only lowered, not below 100.00.
var editablePolicy = strings.Replace(consoletest.Policy, `        type: integer
        min: 1
        display: { label: Refund, money: { minor_units: 2, currency_arg: currency } }`, `        type: integer
        min: 1
        display: { label: Refund, money: { minor_units: 2, currency_arg: currency } }
        editable: { decrease: true, min: 10000 }`, 1)

// An approver lowers a refund's amount in the console's "Approve with changes" form, on both
// stores. A widening value sent anyway (the field's max removed) is refused and writes nothing;
// the lowered one grants the request. The agent's waiting call, which asked for €2,500.00, is
// refused with the approved arguments; presenting them runs the refund once, and its receipt
// names both amounts and the editor. The requested amount stays refused.
func TestApproveWithEditsInConsole(t *testing.T) {
	t.Parallel()
	if !strings.Contains(editablePolicy, "editable:") {
		t.Fatal("the test policy's refund amount was not made editable: consoletest.Policy changed")
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := consoletest.Start(t, &consoletest.Options{Backend: backend, Policy: editablePolicy})
			s.AddAccount(t, "alice", pw, "payments-leads")
			rcs, errs := propose(t, s, "ord_e1", 250000, true)
			id := pendingID(t, s)
			ctx := browser(t)
			login(t, ctx, s.URL, "alice", false)
			field := "#set-" + id + "-amount"
			navigate(t, ctx, "show the request", s.URL+"/approvals/"+id, field)
			if got := text(t, ctx, "fieldset.edit"); !strings.Contains(got, "at most 250000, at least 10000") {
				t.Errorf("the edit form says %q, want its bounds", got)
			}

			// A raised amount, sent past the field's own max: refused by the server.
			ev, rc := s.Written(t)
			run(t, ctx, "raise the amount past the field's max",
				chromedp.RemoveAttribute(chromedp.CSS(field), "max"),
				chromedp.SetValue(chromedp.CSS(field), "300000"),
				chromedp.Click(chromedp.CSS("button.edit")), chromedp.WaitVisible(chromedp.CSS("#error")))
			if got := text(t, ctx, "#error"); !strings.Contains(got, "edit_widens") || !strings.Contains(got, "may only decrease") {
				t.Errorf("the refusal says %q, want edit_widens", got)
			}
			if e, r := s.Written(t); e != ev || r != rc {
				t.Errorf("a widening edit wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
			}
			if a, _ := s.Guard.Store().Approval(context.Background(), id); a.Status != store.Pending {
				t.Fatalf("after the widening edit the request is %s, want pending", a.Status)
			}

			// €2,000.00 instead of €2,500.00.
			navigate(t, ctx, "show the request again", s.URL+"/approvals/"+id, field)
			shot(t, ctx, "approve-with-edits")
			run(t, ctx, "lower the amount and approve",
				chromedp.SetValue(chromedp.CSS(field), "200000"),
				chromedp.SendKeys(chromedp.CSS("#note-"+id), "partial refund agreed"),
				chromedp.Click(chromedp.CSS("button.edit")), chromedp.WaitVisible(chromedp.CSS("p.flash")))
			if got := text(t, ctx, "p.flash"); !strings.Contains(got, "with your changes") {
				t.Errorf("the page says %q", got)
			}

			var approved json.RawMessage
			select {
			case rc := <-rcs:
				err := <-errs
				var me *latch.ApprovalMismatchError
				if rc == nil || rc.Result != "blocked" || !errors.As(err, &me) || me.ApprovalID != id {
					t.Fatalf("the waiting call for 250000 ended with %v (receipt %+v), want approval_mismatch", err, rc)
				}
				approved = me.Arguments
			case <-time.After(60 * time.Second):
				t.Fatal("the waiting call did not end after the answer")
			}
			if string(approved) != `{"amount":200000,"currency":"EUR","order_id":"ord_e1"}` {
				t.Fatalf("the approved arguments = %s", approved)
			}

			agent := latch.WithApproval(latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"}), id)
			var ran atomic.Int64
			refund := func(args json.RawMessage) (*latch.Receipt, error) {
				return s.Guard.Execute(agent, &latch.Call{Action: "billing.refund", Arguments: args},
					func(context.Context, json.RawMessage) (any, error) {
						ran.Add(1)
						return map[string]string{"refund_id": "re_e1"}, nil
					})
			}
			rc2, err := refund(approved)
			if err != nil || ran.Load() != 1 || rc2.Result != "committed" {
				t.Fatalf("presenting the approved arguments = %v (ran %d)", err, ran.Load())
			}
			e := rc2.ApprovalEdit
			if e == nil || !strings.Contains(string(e.RequestedArguments), `"amount":250000`) || !strings.Contains(string(rc2.Arguments), `"amount":200000`) ||
				len(e.EditedBy) != 1 || e.EditedBy[0] != "session:alice" {
				t.Errorf("the receipt's approval_edit = %+v, arguments %s; want 250000 requested, 200000 run, edited by session:alice", e, rc2.Arguments)
			}
			if _, err := refund(json.RawMessage(`{"amount":250000,"currency":"EUR","order_id":"ord_e1"}`)); !errors.Is(err, latch.ErrApprovalMismatch) || ran.Load() != 1 {
				t.Errorf("presenting the requested amount after = %v (ran %d), want refused", err, ran.Load())
			}

			// The request page names the edit and what was requested.
			navigate(t, ctx, "show the granted request", s.URL+"/approvals/"+id, "dd.edits")
			if got := text(t, ctx, "dd.edits"); !strings.Contains(got, "by session:alice") || !strings.Contains(got, "amount 250000 → 200000") {
				t.Errorf("the request page's edit reads %q", got)
			}
		})
	}
}
