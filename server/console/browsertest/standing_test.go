package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/store"
)

const standingPolicy = `schema: latch.policy/v1
approvers:
  roles:
    leads: []
actions:
  refund.issue:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer }
    decision: approve
    approvers:
      roles: [leads]
      standing: { max_uses: 5, max_for: 2h }
`

// A person opens the Standing page, reads what a standing approval admits, and revokes it with
// a note by its button; the page says so, and a call presenting it afterwards is refused.
func TestRevokeStanding(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: standingPolicy})
	s.AddAccount(t, "alice", pw, "leads")
	bot := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "bot"})
	run1 := func(ctx context.Context, order string) error {
		_, err := s.Guard.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"order_id":"` + order + `","amount":300}`)},
			func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
		return err
	}
	var ar *latch.ApprovalRequiredError
	if err := run1(bot, "o-1"); !errors.As(err, &ar) {
		t.Fatalf("first call: %v", err)
	}
	req := &store.AnswerRequest{ID: ar.ApprovalID, Grant: true, Approver: "alice", Method: store.MethodSession, Verified: true,
		Standing: &store.StandingTerms{Uses: 3, For: store.Duration(time.Hour), Max: map[string]int64{"amount": 500}, Vary: []string{"order_id"}}}
	if _, err := s.Guard.Answer(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := run1(latch.WithApproval(bot, req.StandingID), "o-2"); err != nil {
		t.Fatal(err)
	}

	ctx := browser(t)
	login(t, ctx, s.URL, "alice", false)
	run(t, ctx, "open the Standing page", chromedp.Click(chromedp.CSS(`nav a[href="/standing"]`)), chromedp.WaitVisible(chromedp.CSS("article.standing")))
	card := text(t, ctx, "article.standing")
	for _, want := range []string{req.StandingID, "refund.issue", "bot", "amount ≤ 500, order_id any", "1 of 3", ar.ApprovalID} {
		if !strings.Contains(card, want) {
			t.Errorf("the standing approval's card lacks %q: %s", want, card)
		}
	}
	shot(t, ctx, "standing")
	run(t, ctx, "revoke with a note",
		chromedp.SendKeys(chromedp.CSS("form.revoke input[name=note]"), "incident 42"),
		chromedp.Click(chromedp.CSS("form.revoke button")),
		chromedp.WaitVisible(chromedp.CSS("p.flash")))
	if got := text(t, ctx, "p.flash"); !strings.Contains(got, "Revoked "+req.StandingID) || !strings.Contains(got, "after 1 of 3 uses") {
		t.Errorf("after revoking, the page says %q", got)
	}
	cur, err := s.Guard.Standing(context.Background(), req.StandingID)
	if err != nil || cur.Status != store.StandingRevoked || cur.RevokedBy != "alice" || cur.Note != "incident 42" {
		t.Errorf("the standing approval after the button: %+v, %v", cur, err)
	}
	if err := run1(latch.WithApproval(bot, req.StandingID), "o-3"); latch.RefusalOf(err) == nil || latch.RefusalOf(err).Reason != latch.ReasonApprovalRevoked {
		t.Errorf("a call after the revocation: %v, want approval_revoked", err)
	}
}

// A person opens a request, asks for more than the policy allows and reads the refusal, then
// grants a standing approval of 2 uses with its bounds by the form's button: the page names it,
// two calls within the bounds run presenting it, a third is refused exhausted.
func TestGrantStandingInConsole(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: standingPolicy})
	s.AddAccount(t, "alice", pw, "leads")
	bot := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "bot"})
	run1 := func(ctx context.Context, order string, amount int) error {
		_, err := s.Guard.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(fmt.Sprintf(`{"order_id":%q,"amount":%d}`, order, amount))},
			func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
		return err
	}
	var ar *latch.ApprovalRequiredError
	if err := run1(bot, "o-1", 300); !errors.As(err, &ar) {
		t.Fatalf("first call: %v", err)
	}
	id := ar.ApprovalID

	ctx := browser(t)
	login(t, ctx, s.URL, "alice", false)
	navigate(t, ctx, "show the request", s.URL+"/approvals/"+id, "fieldset.standing")
	if got := text(t, ctx, "fieldset.standing"); !strings.Contains(got, "at most 5 uses for at most 2h") {
		t.Errorf("the standing form says %q, want the policy's bounds", got)
	}
	fill := func(what, dur string) {
		run(t, ctx, what,
			chromedp.SetValue(chromedp.CSS("#st-uses-"+id), "2"),
			chromedp.SetValue(chromedp.CSS("#st-for-"+id), dur),
			chromedp.SetValue(chromedp.CSS("#st-arg-"+id+"-amount"), "max"),
			chromedp.SetValue(chromedp.CSS("#st-max-"+id+"-amount"), "500"),
			chromedp.SetValue(chromedp.CSS("#st-arg-"+id+"-order_id"), "vary"))
	}
	fill("ask for three hours", "3h")
	run(t, ctx, "send it", chromedp.Click(chromedp.CSS("button.standing")), chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := text(t, ctx, "#error"); !strings.Contains(got, "Refused (standing_too_wide)") || !strings.Contains(got, "Nothing was changed") {
		t.Errorf("the refusal says %q, want standing_too_wide and that nothing was changed", got)
	}
	if list, err := s.Guard.Standings(context.Background(), store.StandingFilter{}); err != nil || len(list) != 0 {
		t.Fatalf("after the refusal: standing approvals %v, %v", list, err)
	}

	navigate(t, ctx, "show the request again", s.URL+"/approvals/"+id, "fieldset.standing")
	fill("fill the form within the policy", "1h")
	shot(t, ctx, "grant-standing")
	run(t, ctx, "grant standing", chromedp.Click(chromedp.CSS("button.standing")), chromedp.WaitVisible(chromedp.CSS("p.flash")))
	list, err := s.Guard.Standings(context.Background(), store.StandingFilter{})
	if err != nil || len(list) != 1 {
		t.Fatalf("after the button: standing approvals %v, %v", list, err)
	}
	sta := list[0]
	if got := text(t, ctx, "p.flash"); !strings.Contains(got, "Granted standing approval "+sta.ID+": up to 2 calls of refund.issue") ||
		!strings.Contains(got, "amount ≤ 500, order_id any") {
		t.Errorf("after granting, the page says %q", got)
	}
	if sta.Terms.Uses != 2 || time.Duration(sta.Terms.For) != time.Hour || sta.Terms.Max["amount"] != 500 || len(sta.Terms.Vary) != 1 || sta.GrantedBy[0] != "alice" {
		t.Errorf("the standing approval: %+v", sta)
	}
	with := latch.WithApproval(bot, sta.ID)
	for i, amount := range []int{500, 120} {
		if err := run1(with, fmt.Sprintf("o-%d", i+2), amount); err != nil {
			t.Fatalf("call %d presenting %s: %v", i+1, sta.ID, err)
		}
	}
	if err := run1(with, "o-4", 100); latch.RefusalOf(err) == nil || latch.RefusalOf(err).Reason != latch.ReasonApprovalExhausted {
		t.Errorf("a third call: %v, want approval_exhausted", err)
	}
	navigate(t, ctx, "show the granted request", s.URL+"/approvals/"+id, "dd.granted-standing")
	if got := text(t, ctx, "dd.granted-standing"); !strings.Contains(got, sta.ID) || !strings.Contains(got, "up to 2 further calls") {
		t.Errorf("the request page's standing row reads %q", got)
	}
}
