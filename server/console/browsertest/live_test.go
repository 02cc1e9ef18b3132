package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/store"
)

// begin reserves git.merge of pull request number as billing-worker under a lease of lease and
// never reports an outcome, as a holder that died would; it returns the effect key.
func begin(t *testing.T, s *consoletest.Server, number int, lease time.Duration) string {
	t.Helper()
	_, err := s.Guard.Begin(latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"}),
		&latch.Call{Action: "git.merge", Arguments: json.RawMessage(fmt.Sprintf(`{"repo":"latch","number":%d}`, number)),
			Options: &latch.Options{Lease: lease}})
	if err != nil {
		t.Fatalf("Begin(git.merge %d): %v", number, err)
	}
	return fmt.Sprintf("merge:latch:%d", number)
}

// waitText waits until the element sel shows text including want, across the page's own
// reloads (a read while the page reloads fails, and is tried again).
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(step); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := chromedp.Run(sctx, chromedp.Evaluate[string](`(document.querySelector(`+strconv.Quote(sel)+`) || {}).textContent || ""`))
		cancel()
		if err == nil {
			if got = v; strings.Contains(got, want) {
				return
			}
		}
	}
	t.Fatalf("%s reads %q, want it to include %q without a reload by the person", sel, got, want)
}

// Needs attention shows an effect whose holder died as soon as its lease lapses, though no
// event says so (no sweeper runs here to write it ambiguous): both an effect executing when the
// page was drawn and one reserved while it is open.
func TestAttentionShowsLapsedLease(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	first := begin(t, s, 11, 10*time.Second)
	ctx := browser(t)
	login(t, ctx, s.URL, "alice", false)
	navigate(t, ctx, "open needs attention", s.URL+"/attention", "p.empty")
	run(t, ctx, "wait for the first lease to lapse", chromedp.WaitVisible(chromedp.CSS("article.effect")))
	if got := text(t, ctx, "main"); !strings.Contains(got, first) || !strings.Contains(got, "lease lapsed") {
		t.Errorf("after the first lease lapsed the page reads %q", got)
	}

	second := begin(t, s, 12, 5*time.Second)
	run(t, ctx, "wait for the second lease to lapse", chromedp.WaitVisible(chromedp.CSS("article.effect:nth-of-type(2)")))
	if got := text(t, ctx, "main"); !strings.Contains(got, second) {
		t.Errorf("after the second lease lapsed the page reads %q", got)
	}
	e, err := s.Guard.Store().Effect(context.Background(), second)
	if err != nil || e.State != store.Executing {
		t.Fatalf("the second effect is %+v, %v; want still executing (nothing wrote it)", e, err)
	}
	evs, err := s.Guard.Store().Events(context.Background(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == store.EventExecutionAmbiguous {
			t.Errorf("an event announced a lapse (%s of %s): the page did not redraw on its own", e.Kind, e.EffectKey)
		}
	}
}

const remindLivePolicy = `schema: latch.policy/v1
approvers:
  roles:
    leads: []
    heads: []
actions:
  refund.issue:
    effect: "refund:{id}"
    decision: approve
    approval_ttl: 2h
    approvers:
      roles: [leads]
      remind_after: 10m
      escalate_after: 30m
      escalate_to: {roles: [heads]}
`

// A request's page follows its reminder and escalation: when the sweeper sends them, the
// Reminder and Escalation rows say so without the person reloading, and once it is escalated a
// member of the role it escalates to, who could only read it, finds the answer form.
func TestRequestPageFollowsReminders(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: remindLivePolicy})
	s.AddAccount(t, "dana", pw, "heads")
	_, err := s.Guard.Begin(latch.WithPrincipal(context.Background(), latch.Principal{Agent: "bot"}),
		&latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"id":"r1"}`)})
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("Begin = %v; want an approval required", err)
	}
	sweep := func(reminded, escalated int) {
		t.Helper()
		rep, err := s.Guard.Sweep(context.Background())
		if err != nil || len(rep.Reminded) != reminded || len(rep.Escalated) != escalated {
			t.Fatalf("Sweep = %+v, %v; want %d reminded, %d escalated", rep, err, reminded, escalated)
		}
	}
	ctx := browser(t)
	login(t, ctx, s.URL, "dana", false)
	navigate(t, ctx, "open the request", s.URL+"/approvals/"+ar.ApprovalID, "dd.reminder")
	if got := text(t, ctx, "dd.reminder"); !strings.Contains(got, "not sent") {
		t.Fatalf("before the sweep the reminder reads %q", got)
	}
	if got := text(t, ctx, "p.why-not"); !strings.Contains(got, "not among the approvers") {
		t.Fatalf("before the escalation dana reads %q", got)
	}

	s.Clock.Add(15 * time.Minute)
	sweep(1, 0)
	waitText(t, ctx, "dd.reminder", ", sent ")

	s.Clock.Add(20 * time.Minute)
	sweep(0, 1)
	run(t, ctx, "wait for the answer form after the escalation", chromedp.WaitVisible(chromedp.CSS("form.answer")))
	if got := text(t, ctx, "dd.escalation"); !strings.Contains(got, "escalated: those it names may answer now") {
		t.Errorf("after the escalation the row reads %q", got)
	}
}

// The Standing page follows uses and revocations: a call admitted by a standing approval while
// the page is open shows as one more use without the person reloading it.
func TestStandingPageFollowsUses(t *testing.T) {
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
		Standing: &store.StandingTerms{Uses: 3, For: store.Duration(time.Hour), Vary: []string{"order_id"}}}
	if _, err := s.Guard.Answer(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	login(t, ctx, s.URL, "alice", false)
	navigate(t, ctx, "open the Standing page", s.URL+"/standing", "article.standing")
	if got := text(t, ctx, "article.standing"); !strings.Contains(got, "0 of 3") {
		t.Fatalf("before any use the card reads %q", got)
	}
	if err := run1(latch.WithApproval(bot, req.StandingID), "o-2"); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "article.standing", "1 of 3")
}

// A page drawn as a form's answer (a refused standing grant) that the event stream then redraws
// is read again from the request's own address, never reloaded: a reload would send the form
// once more, unasked.
func TestRefusedFormRedrawnNotResent(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: standingPolicy})
	s.AddAccount(t, "alice", pw, "leads")
	bot := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "bot"})
	ask := func(order string) string {
		_, err := s.Guard.Execute(bot, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"order_id":"` + order + `","amount":300}`)},
			func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
		var ar *latch.ApprovalRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("call for %s: %v", order, err)
		}
		return ar.ApprovalID
	}
	id := ask("o-1")
	ctx := browser(t)
	login(t, ctx, s.URL, "alice", false)
	navigate(t, ctx, "show the request", s.URL+"/approvals/"+id, "fieldset.standing")
	run(t, ctx, "ask for more uses than the policy allows",
		chromedp.SetValue(chromedp.CSS("#st-uses-"+id), "9"), chromedp.SetValue(chromedp.CSS("#st-for-"+id), "1h"),
		chromedp.Click(chromedp.CSS("button.standing")), chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := text(t, ctx, "#error"); !strings.Contains(got, "standing_too_wide") {
		t.Fatalf("the refusal says %q", got)
	}
	ask("o-2") // an event the page follows
	waitText(t, ctx, "h1", "Approval request")
	for deadline := time.Now().Add(step); ; time.Sleep(200 * time.Millisecond) {
		loc := value(t, ctx, "read the address", chromedp.Location())
		if strings.HasSuffix(loc, "/approvals/"+id) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page stayed at %s, want it redrawn from /approvals/%s", loc, id)
		}
	}
	if n := value(t, ctx, "count the error notes", chromedp.Evaluate[int](`document.querySelectorAll("#error").length`)); n != 0 {
		t.Errorf("the redrawn page shows %d refusals: the form was sent again", n)
	}
	if list, err := s.Guard.Standings(context.Background(), store.StandingFilter{}); err != nil || len(list) != 0 {
		t.Errorf("standing approvals after the redraw: %v, %v", list, err)
	}
}
