package browsertest

import (
	"context"
	"encoding/json"
	"errors"
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
