package browsertest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/server/console"
	"github.com/latchkit/latch/store"
)

const pw = "correct horse battery"

// chromium finds the browser: $LATCH_CHROMIUM, else chromium or chromium-browser on PATH. With
// LATCH_REQUIRE_BROWSER=1 (scripts/test.sh sets it) a missing browser fails the test.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LATCH_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("LATCH_REQUIRE_BROWSER") == "1" {
		t.Fatal("LATCH_REQUIRE_BROWSER=1 and no chromium on PATH (apt-get install chromium, or set LATCH_CHROMIUM)")
	}
	t.Skip("no chromium on PATH; scripts/test.sh installs it and requires it")
	return ""
}

// browser starts a headless chromium of its own (its own cookies) at a phone's width.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, chromedp.WindowSize(375, 812), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	// The first action starts the browser: its context has no deadline, or the deadline
	// would stop the browser.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(375, 812)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// step bounds one step of a flow in time.
const step = 60 * time.Second

func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		// What the browser showed when the step failed, for the test's artifacts.
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if png, serr := chromedp.Run(fctx, chromedp.FullScreenshot(100)); serr == nil {
			dir := os.Getenv("LATCH_SCREENSHOTS")
			if dir == "" {
				dir = t.TempDir()
			}
			p := filepath.Join(dir, "failed-"+strings.ReplaceAll(t.Name(), "/", "-")+".png")
			if os.WriteFile(p, png, 0o644) == nil {
				t.Logf("the page when %q failed: %s", what, p)
			}
		}
		t.Fatalf("%s: %v", what, err)
	}
}

// navigate opens url and waits for sel to show. A page that follows the event stream reloads
// itself when something changes, and a reload that starts while the browser is navigating
// aborts the navigation (net::ERR_ABORTED): then it navigates again, a few times at most.
func navigate(t *testing.T, ctx context.Context, what, url, sel string) {
	t.Helper()
	for try := 1; ; try++ {
		sctx, cancel := context.WithTimeout(ctx, step)
		err := chromedp.Do(sctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)))
		cancel()
		if err == nil {
			return
		}
		if try < 4 && strings.Contains(err.Error(), "ERR_ABORTED") {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		run(t, ctx, what, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel))) // fails with the page's screenshot
		return
	}
}

func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// shot writes a full-page PNG of what the browser shows to $LATCH_SCREENSHOTS (else a temporary
// directory), named name.png.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("LATCH_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return value(t, ctx, "read "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// login logs in through the form with the keyboard alone: the name field has focus, Tab
// moves to the password, Enter submits.
func login(t *testing.T, ctx context.Context, base, name string, screenshot bool) {
	t.Helper()
	navigate(t, ctx, "open the console", base+"/approvals", "#name")
	run(t, ctx, "type the name and password",
		chromedp.Focus(chromedp.CSS("#name")), chromedp.KeyEvent(name), chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(pw))
	if screenshot {
		shot(t, ctx, "login")
	}
	run(t, ctx, "submit the login", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("form.who")))
}

func propose(t *testing.T, s *consoletest.Server, order string, amount int, wait bool) (<-chan *latch.Receipt, <-chan error) {
	t.Helper()
	rcs, errs := make(chan *latch.Receipt, 1), make(chan error, 1)
	ctx, cancel := context.WithTimeout(latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"}), 2*time.Minute)
	go func() {
		defer cancel()
		args, _ := json.Marshal(map[string]any{"order_id": order, "amount": amount, "currency": "EUR"})
		rc, err := s.Guard.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: args, Options: &latch.Options{Wait: wait}},
			func(context.Context, json.RawMessage) (any, error) {
				return map[string]string{"refund_id": "re_" + order}, nil
			})
		rcs <- rc
		errs <- err
	}()
	return rcs, errs
}

func pendingID(t *testing.T, s *consoletest.Server) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		list, err := s.Guard.Store().Approvals(context.Background(), store.ApprovalFilter{Status: store.Pending})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > 0 {
			return list[len(list)-1].ID
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no approval request appeared")
	return ""
}

// A person logs in, sees a request appear that a real waiting call made (live, without
// reloading), reads it, approves it with a note, and the waiting call proceeds and commits.
func TestApproveWaitingCall(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	ctx := browser(t)
	login(t, ctx, s.URL, "alice", true)
	if got := text(t, ctx, "main"); !strings.Contains(got, "Nothing is waiting") {
		t.Fatalf("before any call the page says %q", got)
	}
	rcs, errs := propose(t, s, "ord_1", 250000, true)
	// The page follows the event stream and shows the request without being told to reload.
	run(t, ctx, "wait for the request to appear", chromedp.WaitVisible(chromedp.CSS("article.request")))
	summary := text(t, ctx, "article.request .summary")
	if !strings.Contains(summary, "Refund €2,500.00 (250000 minor units)") || !strings.Contains(summary, "billing-worker will run billing.refund on order:ord_1") {
		t.Errorf("the request reads %q", summary)
	}
	id := pendingID(t, s)
	facts := text(t, ctx, "article.request .facts")
	a, _ := s.Guard.Store().Approval(context.Background(), id)
	for _, want := range []string{a.ActionHash, "rule[1]", "2026-11-29", "0 of 1", "left", "members of payments-leads"} {
		if !strings.Contains(facts, want) {
			t.Errorf("the request's facts lack %q: %s", want, facts)
		}
	}
	shot(t, ctx, "approvals")
	run(t, ctx, "approve with a note",
		chromedp.SendKeys(chromedp.CSS("#note-"+id), "refund agreed with the customer"),
		chromedp.Click(chromedp.CSS("button.grant")))
	select {
	case rc := <-rcs:
		if err := <-errs; err != nil {
			t.Fatalf("the waiting call ended with %v", err)
		}
		if rc.Result != "committed" || rc.Approver != "alice" || rc.ApprovalID != id {
			t.Errorf("the waiting call's receipt: result %s, approver %q, approval %s; want committed by alice with %s", rc.Result, rc.Approver, rc.ApprovalID, id)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the waiting call did not proceed after the approval")
	}
	// The receipts page shows the call's receipt and the verified chain.
	navigate(t, ctx, "open the receipts", s.URL+"/receipts", "#chain")
	if got := text(t, ctx, "#chain"); !strings.Contains(got, "Chain verified") {
		t.Errorf("the receipts page says %q", got)
	}
	shot(t, ctx, "receipts")
	run(t, ctx, "open one receipt", chromedp.Click(chromedp.CSS("table.receipts tbody tr:first-child a")), chromedp.WaitVisible(chromedp.CSS("pre.doc")))
	if got := text(t, ctx, "pre.doc"); !strings.Contains(got, `"approver": "alice"`) {
		t.Errorf("the receipt's document lacks the approver: %s", got)
	}
	shot(t, ctx, "receipt")
}

// A form sent without its CSRF token is refused and writes nothing.
func TestCSRFlessPostRefused(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	propose(t, s, "ord_2", 250000, false)
	id := pendingID(t, s)
	ctx := browser(t)
	login(t, ctx, s.URL, "alice", false)
	navigate(t, ctx, "show the request", s.URL+"/approvals/"+id, "button.grant")
	ev, rc := s.Written(t)
	removed := value(t, ctx, "remove the token", chromedp.Evaluate[int](`(function(){var n=0;document.querySelectorAll('article input[name=csrf]').forEach(function(e){e.remove();n++});return n})()`))
	if removed != 1 {
		t.Fatalf("removed %d token fields, want 1", removed)
	}
	run(t, ctx, "approve without a token", chromedp.Click(chromedp.CSS("button.grant")), chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := text(t, ctx, "#error"); !strings.Contains(got, "security token is missing or wrong") {
		t.Errorf("the refusal says %q", got)
	}
	if a, _ := s.Guard.Store().Approval(context.Background(), id); a.Status != store.Pending {
		t.Errorf("the request is %s, want pending", a.Status)
	}
	if e, r := s.Written(t); e != ev || r != rc {
		t.Errorf("a CSRF-less POST wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}
}

// A browser that sends the proxy's header itself, from an address that is not the proxy's,
// is refused; the same header from the proxy's address logs the person in.
func TestForgedProxyHeaderRefused(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Console: console.Config{TrustedProxies: []netip.Prefix{consoletest.Prefix("127.0.0.2")}}})
	ctx := browser(t)
	run(t, ctx, "send a forged header",
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"X-Forwarded-User": "alice"}})
			return err
		}),
		chromedp.Navigate(s.URL+"/approvals"), chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := text(t, ctx, "#error"); !strings.Contains(got, "accepted only from the configured proxy addresses") || !strings.Contains(got, "127.0.0.1") {
		t.Errorf("the refusal says %q", got)
	}
	shot(t, ctx, "forged-proxy-header")
	// From the proxy's address the header is believed.
	c := consoletest.Client(t, "127.0.0.2")
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/approvals", nil)
	req.Header.Set("X-Forwarded-User", "alice")
	if p := consoletest.Do(t, c, req); p.Status != http.StatusOK || !strings.Contains(p.Body, "alice <small>(proxy") {
		t.Errorf("the header from the proxy's address = %d; want alice logged in by proxy", p.Status)
	}
}

// A session past its lifetime answers nothing: the form is refused and the request stays pending.
func TestExpiredSessionRefused(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	propose(t, s, "ord_3", 250000, false)
	id := pendingID(t, s)
	ctx := browser(t)
	login(t, ctx, s.URL, "alice", false)
	navigate(t, ctx, "show the request", s.URL+"/approvals/"+id, "button.grant")
	s.Clock.Add(console.DefaultSessionTTL + time.Minute)
	ev, rc := s.Written(t)
	run(t, ctx, "approve after expiry", chromedp.Click(chromedp.CSS("button.grant")), chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := text(t, ctx, "#error"); !strings.Contains(got, "session expired") {
		t.Errorf("the refusal says %q", got)
	}
	if a, _ := s.Guard.Store().Approval(context.Background(), id); a.Status != store.Pending {
		t.Errorf("the request is %s, want pending", a.Status)
	}
	if e, r := s.Written(t); e != ev || r != rc {
		t.Errorf("an expired session wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}
	navigate(t, ctx, "reload", s.URL+"/approvals", "#name")
	loc := value(t, ctx, "read the location", chromedp.Location())
	if !strings.Contains(loc, "/login") {
		t.Errorf("an expired session's page goes to %s, want the login", loc)
	}
}

// Someone else answers while a person is typing a note: the page says something changed
// instead of reloading (the note is kept), and the late answer is refused with nothing written.
func TestAnswerToAnsweredRequestRefused(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	propose(t, s, "ord_4", 250000, false)
	id := pendingID(t, s)
	ctx := browser(t)
	login(t, ctx, s.URL, "alice", false)
	run(t, ctx, "start a note", chromedp.WaitVisible(chromedp.CSS("#note-"+id)),
		chromedp.SendKeys(chromedp.CSS("#note-"+id), "looks fine"))
	if _, err := s.Guard.Deny(context.Background(), id, "dana"); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "see the change announced", chromedp.WaitVisible(chromedp.CSS("#live")))
	if got := text(t, ctx, "#live"); !strings.Contains(got, "Something changed") {
		t.Errorf("the live notice says %q", got)
	}
	ev, rc := s.Written(t)
	run(t, ctx, "approve late", chromedp.Click(chromedp.CSS("button.grant")), chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := text(t, ctx, "#error"); !strings.Contains(got, "already answered (denied)") {
		t.Errorf("the refusal says %q", got)
	}
	shot(t, ctx, "already-answered")
	if a, _ := s.Guard.Store().Approval(context.Background(), id); a.Status != store.Denied || a.Approver != "dana" {
		t.Errorf("the request is %s by %q, want denied by dana", a.Status, a.Approver)
	}
	if e, r := s.Written(t); e != ev || r != rc {
		t.Errorf("a late answer wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}
}

// An effect whose outcome is unknown shows under Needs attention with its error and
// receipts, and a person resolves it committed with a note.
func TestResolveAmbiguousEffect(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	s.Ambiguous(t, 7, "read tcp: connection reset by peer")
	ctx := browser(t)
	login(t, ctx, s.URL, "alice", false)
	navigate(t, ctx, "open needs attention", s.URL+"/attention", "article.effect")
	if got := text(t, ctx, "article.effect"); !strings.Contains(got, "merge:latch:7") || !strings.Contains(got, "connection reset by peer") {
		t.Errorf("the effect reads %q", got)
	}
	shot(t, ctx, "attention")
	run(t, ctx, "resolve committed",
		chromedp.Click(chromedp.CSS(`input[name=to][value=committed]`)),
		chromedp.SendKeys(chromedp.CSS(`textarea[name=note]`), "the merge is on main"),
		chromedp.Click(chromedp.CSS("form.resolve button")),
		chromedp.WaitVisible(chromedp.CSS("p.flash")))
	if got := text(t, ctx, "p.flash"); !strings.Contains(got, "Resolved merge:latch:7 as committed") {
		t.Errorf("after resolving, the page says %q", got)
	}
	e, err := s.Guard.Store().Effect(context.Background(), "merge:latch:7")
	if err != nil || e.State != store.Committed || e.ResolvedBy != "console:alice" || e.Note != "the merge is on main" {
		t.Errorf("the effect after resolving: %+v, %v", e, err)
	}
}

// Needs attention follows the event stream: an effect that becomes ambiguous while the page
// is open appears without the person reloading it.
func TestAttentionLive(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	ctx := browser(t)
	login(t, ctx, s.URL, "alice", false)
	navigate(t, ctx, "open needs attention", s.URL+"/attention", "p.empty")
	if got := text(t, ctx, "main"); !strings.Contains(got, "Nothing needs attention") {
		t.Fatalf("before any call the page says %q", got)
	}
	s.Ambiguous(t, 9, "read tcp: i/o timeout")
	run(t, ctx, "wait for the effect to appear", chromedp.WaitVisible(chromedp.CSS("article.effect")))
	if got := text(t, ctx, "article.effect"); !strings.Contains(got, "merge:latch:9") || !strings.Contains(got, "i/o timeout") {
		t.Errorf("the effect reads %q", got)
	}
}

// A payout needs two people: the first approver's grant leaves it pending ("1 of 2"), the
// second's grants it and the waiting call proceeds.
func TestTwoApproversNeeded(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "tess", pw, "treasury")
	s.AddAccount(t, "tom", pw, "treasury")
	rcs, errs := make(chan *latch.Receipt, 1), make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"}), 2*time.Minute)
		defer cancel()
		rc, err := s.Guard.Execute(ctx, &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"payout_id":"po_9","amount":900000}`), Options: &latch.Options{Wait: true}},
			func(context.Context, json.RawMessage) (any, error) { return map[string]string{"payout": "sent"}, nil })
		rcs <- rc
		errs <- err
	}()
	id := pendingID(t, s)
	first := browser(t)
	login(t, first, s.URL, "tess", false)
	run(t, first, "tess grants", chromedp.WaitVisible(chromedp.CSS("#req-"+id+" button.grant")), chromedp.Click(chromedp.CSS("#req-"+id+" button.grant")))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		a, err := s.Guard.Store().Approval(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Answers) == 1 {
			if a.Status != store.Pending || a.Answers[0].Name != "tess" || a.Answers[0].Method != store.MethodSession || !a.Answers[0].Verified {
				t.Fatalf("after tess's grant the request is %s with %+v; want pending with her verified session answer", a.Status, a.Answers)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("tess's grant was not recorded")
		}
	}
	navigate(t, first, "open the request", s.URL+"/approvals/"+id, ".tally")
	if got := text(t, first, ".tally"); got != "1 of 2" {
		t.Errorf("the tally reads %q, want 1 of 2", got)
	}
	if n := value(t, first, "count buttons", chromedp.Evaluate[int](`document.querySelectorAll("button.grant").length`)); n != 0 {
		t.Errorf("tess is offered %d approve buttons after answering", n)
	}
	shot(t, first, "two-of-n")
	select {
	case <-rcs:
		t.Fatal("the call proceeded after one of two grants")
	default:
	}
	second := browser(t)
	login(t, second, s.URL, "tom", false)
	if a, err := s.Guard.Store().Approval(context.Background(), id); err != nil || a.Status != store.Pending {
		t.Fatalf("before the second grant the request is %+v, %v; want pending", a, err)
	}
	// The grant lets the waiting call run at once, and the page reloads on its events: the
	// call's receipt, not the page's flash message, is what to wait for.
	run(t, second, "tom grants", chromedp.WaitVisible(chromedp.CSS("#req-"+id+" button.grant")), chromedp.Click(chromedp.CSS("#req-"+id+" button.grant")))
	select {
	case rc := <-rcs:
		if err := <-errs; err != nil || rc.Result != "committed" {
			t.Fatalf("the waiting payout ended %v, %v; want committed", rc, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the waiting payout did not proceed after the second grant")
	}
}

// An approver whose roles the action does not name reads the request but gets no approve
// button, and the HTTP API refuses the same person's token.
func TestUnentitledSeesNoButton(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "eve", pw, "treasury")
	propose(t, s, "ord_5", 250000, false)
	id := pendingID(t, s)
	ctx := browser(t)
	login(t, ctx, s.URL, "eve", false)
	run(t, ctx, "show the request", chromedp.WaitVisible(chromedp.CSS("#req-"+id+" .why-not")))
	if got := text(t, ctx, "#req-"+id+" .why-not"); !strings.Contains(got, "not among the approvers of billing.refund") {
		t.Errorf("eve reads %q", got)
	}
	if n := value(t, ctx, "count buttons", chromedp.Evaluate[int](`document.querySelectorAll("button.grant, button.deny").length`)); n != 0 {
		t.Errorf("eve is offered %d answer buttons", n)
	}
	shot(t, ctx, "not-entitled")
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/approvals/"+id+"/approve", nil)
	req.Header.Set("Authorization", "Bearer "+s.ApproverToken(t, "eve"))
	if r := consoletest.Do(t, consoletest.Client(t, ""), req); r.Status != http.StatusForbidden || !strings.Contains(r.Body, "approver_not_entitled") {
		t.Errorf("the API's answer for eve = %d %s, want 403 approver_not_entitled", r.Status, r.Body)
	}
	if a, _ := s.Guard.Store().Approval(context.Background(), id); a.Status != store.Pending {
		t.Errorf("the request is %s, want pending", a.Status)
	}
}

// markCard gives the id "pick" to the Needs attention card whose key reads shown, and returns
// how many cards read so.
func markCard(t *testing.T, ctx context.Context, shown string) int {
	t.Helper()
	k, _ := json.Marshal(shown)
	js := `(function(k){var n=0;document.querySelectorAll("article.effect").forEach(function(a){a.removeAttribute("id");` +
		`if(a.querySelector("h2 code").textContent===k){a.id="pick";n++}});return n})(` + string(k) + `)`
	return value(t, ctx, "find the card of "+shown, chromedp.Evaluate[int](js))
}

// A decoy effect whose key percent-decodes to another's (pay:inv%38%38 → pay:inv88), one whose
// key hides a zero-width space, and one with dot segments each show their own card; a real
// browser that submits a decoy's form resolves the decoy and leaves the victim ambiguous. The
// hidden character is shown as a marked escape.
func TestDecoyFormResolvesOnlyItsOwn(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	victim := s.AmbiguousCharge(t, "inv88")
	decoys := []string{s.AmbiguousCharge(t, "inv%38%38"), s.AmbiguousCharge(t, "inv\u200b88"), s.AmbiguousCharge(t, "x/../../pay:inv88")}
	ctx := browser(t)
	login(t, ctx, s.URL, "alice", false)
	for _, decoy := range decoys {
		navigate(t, ctx, "open needs attention", s.URL+"/attention", "article.effect")
		shown := strings.ReplaceAll(decoy, "\u200b", `\u200b`)
		if n := markCard(t, ctx, shown); n != 1 {
			t.Fatalf("%d cards read %q, want 1", n, shown)
		}
		if strings.Contains(decoy, "\u200b") {
			if got := text(t, ctx, "#pick h2 code .esc"); got != `\u200b` {
				t.Errorf("the zero-width space is marked %q, want \\u200b", got)
			}
			shot(t, ctx, "hidden-character")
		}
		// With a note, as a person would write one: while a note is typed the page does not
		// reload itself on the resolution's own event, which would race the form's redirect.
		run(t, ctx, "resolve the decoy failed",
			chromedp.Click(chromedp.CSS(`#pick input[name=to][value=failed]`)),
			chromedp.SendKeys(chromedp.CSS(`#pick textarea[name=note]`), "no charge at the provider"),
			chromedp.Click(chromedp.CSS("#pick form.resolve button")),
			chromedp.WaitVisible(chromedp.CSS("p.flash")))
		for key, want := range map[string]store.State{decoy: store.Failed, victim: store.Ambiguous} {
			if e, err := s.Guard.Store().Effect(context.Background(), key); err != nil || e.State != want {
				t.Errorf("after the decoy %q's form, effect %q is %s (%v); want %s", decoy, key, e.State, err, want)
			}
		}
	}
}

// A link to the login page that asks to return to /<TAB>/evil.example (which a browser reads as
// //evil.example, another site) lands on the console's own page after login.
func TestLoginNextStaysOnConsole(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	ctx := browser(t)
	for _, next := range []string{"%2F%09%2Fevil.example", "%2F%5Cevil.example", "%2F%0A%2Fevil.example"} {
		navigate(t, ctx, "open the login link", s.URL+"/login?next="+next, "#name")
		run(t, ctx, "log in",
			chromedp.Focus(chromedp.CSS("#name")), chromedp.KeyEvent("alice"), chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(pw),
			chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("form.who")))
		loc := value(t, ctx, "read the location", chromedp.Location())
		if !strings.HasPrefix(loc, s.URL+"/approvals") {
			t.Errorf("after login with next=%s the browser is at %s, want %s/approvals", next, loc, s.URL)
		}
		run(t, ctx, "log out", chromedp.Click(chromedp.CSS("form.who button")), chromedp.WaitVisible(chromedp.CSS("#name")))
	}
}
