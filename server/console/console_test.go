package console_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/server/console"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/sqlite"
)

const pw = "correct horse battery"

// pending proposes a refund of 2,500.00 EUR that needs an approval and returns the request.
func pending(t *testing.T, s *consoletest.Server, order string) *latch.Pending {
	t.Helper()
	p, err := s.Guard.Begin(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"}),
		&latch.Call{Action: "billing.refund", Arguments: json.RawMessage(`{"order_id":"` + order + `","amount":250000,"currency":"EUR"}`)})
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("Begin = %+v, %v; want an approval required", p, err)
	}
	return &latch.Pending{ApprovalID: ar.ApprovalID}
}

func approval(t *testing.T, s *consoletest.Server, id string) *store.Approval {
	t.Helper()
	a, err := s.Guard.Store().Approval(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func login(t *testing.T, s *consoletest.Server, name string) (*http.Client, string) {
	t.Helper()
	c := consoletest.Client(t, "")
	if p := consoletest.Login(t, c, s.URL, name, pw); p.Status != http.StatusSeeOther || p.Location != "/approvals" {
		t.Fatalf("login as %s = %d %q, want 303 to /approvals: %s", name, p.Status, p.Location, p.Body)
	}
	page := consoletest.Get(t, c, s.URL+"/approvals")
	return c, consoletest.CSRF(page.Body)
}

func TestPendingPageAndAnswer(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	p := pending(t, s, "ord_1")
	c, csrf := login(t, s, "alice")
	page := consoletest.Get(t, c, s.URL+"/approvals")
	for _, want := range []string{
		"billing-worker will run billing.refund on order:ord_1 in production",
		"€2,500.00 (250000 minor units)", p.ApprovalID, "rule[1]", "2026-11-29", `<span class="tally">0 of 1</span>`, "members of payments-leads",
		`name="decision" value="grant"`, `<label for="note-` + p.ApprovalID + `">Note (optional)</label>`,
	} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("GET /approvals lacks %q", want)
		}
	}
	a := approval(t, s, p.ApprovalID)
	if !strings.Contains(page.Body, a.ActionHash) {
		t.Errorf("GET /approvals lacks the action hash %s", a.ActionHash)
	}
	r := consoletest.Post(t, c, s.URL+"/approvals/"+p.ApprovalID+"/answer", url.Values{"csrf": {csrf}, "decision": {"grant"}, "note": {"checked the ticket"}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("answer = %d: %s", r.Status, r.Body)
	}
	a = approval(t, s, p.ApprovalID)
	if a.Status != store.Granted || a.Approver != "alice" || a.Note != "checked the ticket" {
		t.Errorf("after the answer the request is %s by %q note %q; want granted by alice with the note", a.Status, a.Approver, a.Note)
	}
	if len(a.Answers) != 1 || a.Answers[0].Method != store.MethodSession || !a.Answers[0].Verified {
		t.Errorf("the answer is stored as %+v, want one verified answer by session", a.Answers)
	}
	if page := consoletest.Get(t, c, s.URL+"/approvals"); !strings.Contains(page.Body, "Approved "+p.ApprovalID) {
		t.Errorf("the page after the answer does not say it was approved")
	}
}

func TestSecurityHeadersAndCookies(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		s := consoletest.Start(t, &consoletest.Options{Console: console.Config{Secure: secure}})
		s.AddAccount(t, "alice", pw, "payments-leads")
		c := consoletest.Client(t, "")
		login := consoletest.Get(t, c, s.URL+"/login")
		csp := login.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("CSP %q lacks %q", csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("CSP %q allows inline code", csp)
		}
		for h, want := range map[string]string{"X-Frame-Options": "DENY", "Referrer-Policy": "same-origin",
			"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
			if got := login.Header.Get(h); got != want {
				t.Errorf("GET /login: %s = %q, want %q", h, got, want)
			}
		}
		// A Secure cookie is not sent back over http, so read the Set-Cookie header itself.
		r := consoletest.Post(t, c, s.URL+"/login", url.Values{"csrf": {consoletest.CSRF(login.Body)}, "name": {"alice"}, "password": {pw}})
		sc := r.Header.Get("Set-Cookie")
		name := "latch_session="
		if secure {
			name = "__Host-latch_session="
		}
		if !secure && r.Status != http.StatusSeeOther {
			t.Fatalf("login = %d: %s", r.Status, r.Body)
		}
		cookies := strings.Join(r.Header.Values("Set-Cookie"), "\n")
		if !strings.Contains(cookies, name) || !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") || strings.Contains(sc, "Secure") != secure {
			t.Errorf("Secure=%t: Set-Cookie %q; want %s HttpOnly, SameSite=Strict, Secure only when secure", secure, cookies, name)
		}
	}
}

func TestCSRFRefused(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	p := pending(t, s, "ord_1")
	c, csrf := login(t, s, "alice")
	ev, rc := s.Written(t)
	for name, tc := range map[string]struct {
		form   url.Values
		origin string
	}{
		"no token":     {url.Values{"decision": {"grant"}}, ""},
		"wrong token":  {url.Values{"decision": {"grant"}, "csrf": {csrf[1:] + "x"}}, ""},
		"other origin": {url.Values{"decision": {"grant"}, "csrf": {csrf}}, "http://evil.example"},
	} {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/approvals/"+p.ApprovalID+"/answer", strings.NewReader(tc.form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if r := consoletest.Do(t, c, req); r.Status != http.StatusForbidden || !strings.Contains(r.Body, "security token") {
			t.Errorf("%s: answer = %d, want 403 naming the security token", name, r.Status)
		}
	}
	// The login form has its own token.
	if r := consoletest.Post(t, consoletest.Client(t, ""), s.URL+"/login", url.Values{"name": {"alice"}, "password": {pw}}); r.Status != http.StatusForbidden {
		t.Errorf("login without its token = %d, want 403", r.Status)
	}
	if a := approval(t, s, p.ApprovalID); a.Status != store.Pending {
		t.Errorf("after refused forms the request is %s, want pending", a.Status)
	}
	if e, r := s.Written(t); e != ev || r != rc {
		t.Errorf("refused forms wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}
}

func TestWrongPasswordsRateLimited(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	c := consoletest.Client(t, "")
	for i := range 5 {
		if r := consoletest.Login(t, c, s.URL, "alice", "wrong password "+string(rune('a'+i))); r.Status != http.StatusUnauthorized || !strings.Contains(r.Body, "Wrong name or password") {
			t.Fatalf("wrong password %d = %d, want 401", i+1, r.Status)
		}
	}
	// Locked: even the right password is refused, from this address and for this name.
	r := consoletest.Login(t, c, s.URL, "alice", pw)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || !strings.Contains(r.Body, "Too many wrong passwords") {
		t.Fatalf("right password while locked = %d (Retry-After %q), want 429", r.Status, r.Header.Get("Retry-After"))
	}
	if r := consoletest.Login(t, c, s.URL, "ALICE", pw); r.Status != http.StatusTooManyRequests {
		t.Errorf("another spelling of the name while locked = %d, want 429", r.Status)
	}
	s.Clock.Add(31 * time.Second)
	if r := consoletest.Login(t, c, s.URL, "alice", pw); r.Status != http.StatusSeeOther {
		t.Errorf("right password after the lock = %d, want 303", r.Status)
	}
	// An unknown name is refused like a wrong password.
	if r := consoletest.Login(t, consoletest.Client(t, ""), s.URL, "mallory", pw); r.Status != http.StatusUnauthorized || !strings.Contains(r.Body, "Wrong name or password") {
		t.Errorf("unknown name = %d, want 401 as for a wrong password", r.Status)
	}
}

func TestExpiredSessionRefused(t *testing.T) {
	t.Parallel()
	for name, wait := range map[string]time.Duration{"idle": 31 * time.Minute, "lifetime": 0} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := consoletest.Start(t, &consoletest.Options{Console: console.Config{SessionTTL: time.Hour}})
			s.AddAccount(t, "alice", pw, "payments-leads")
			p := pending(t, s, "ord_1")
			c, csrf := login(t, s, "alice")
			if wait == 0 { // keep the session busy until its lifetime ends
				for range 3 {
					s.Clock.Add(20 * time.Minute)
					consoletest.Get(t, c, s.URL+"/approvals")
				}
				s.Clock.Add(time.Minute)
			} else {
				s.Clock.Add(wait)
			}
			ev, rc := s.Written(t)
			r := consoletest.Post(t, c, s.URL+"/approvals/"+p.ApprovalID+"/answer", url.Values{"csrf": {csrf}, "decision": {"grant"}})
			if r.Status != http.StatusUnauthorized || !strings.Contains(r.Body, "session expired") {
				t.Errorf("answer with an expired session = %d, want 401", r.Status)
			}
			if g := consoletest.Get(t, c, s.URL+"/approvals"); g.Status != http.StatusSeeOther || !strings.HasPrefix(g.Location, "/login") {
				t.Errorf("GET /approvals with an expired session = %d %q, want a redirect to /login", g.Status, g.Location)
			}
			if a := approval(t, s, p.ApprovalID); a.Status != store.Pending {
				t.Errorf("the request is %s, want pending", a.Status)
			}
			if e, r := s.Written(t); e != ev || r != rc {
				t.Errorf("an expired session wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
			}
		})
	}
}

func TestProxyHeader(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Console: console.Config{TrustedProxies: []netip.Prefix{consoletest.Prefix("127.0.0.2")}}})
	p := pending(t, s, "ord_1")
	ev, rc := s.Written(t)

	// From 127.0.0.1, which is not the proxy: refused, whatever the page.
	forger := consoletest.Client(t, "127.0.0.1")
	for _, path := range []string{"/approvals", "/receipts", "/login"} {
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		req.Header.Set("X-Forwarded-User", "dana")
		r := consoletest.Do(t, forger, req)
		if path == "/login" {
			if r.Status != http.StatusOK || strings.Contains(r.Body, "Log out") {
				t.Errorf("GET /login with a forged header = %d, logged in %t; want the login form", r.Status, strings.Contains(r.Body, "Log out"))
			}
			continue
		}
		if r.Status != http.StatusForbidden || !strings.Contains(r.Body, "accepted only from the configured proxy") {
			t.Errorf("GET %s with a forged header = %d, want 403", path, r.Status)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/approvals/"+p.ApprovalID+"/answer", strings.NewReader("decision=grant"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-User", "dana")
	if r := consoletest.Do(t, forger, req); r.Status != http.StatusForbidden {
		t.Errorf("POST answer with a forged header = %d, want 403", r.Status)
	}
	if e, r := s.Written(t); e != ev || r != rc {
		t.Errorf("a forged header wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}

	// From the proxy: logged in as the header says, and answers as that person.
	proxy := consoletest.Client(t, "127.0.0.2")
	get := func(path string) *consoletest.Page {
		req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
		req.Header.Set("X-Forwarded-User", "dana")
		return consoletest.Do(t, proxy, req)
	}
	page := get("/approvals")
	if page.Status != http.StatusOK || !strings.Contains(page.Body, "dana <small>(proxy") {
		t.Fatalf("GET /approvals through the proxy = %d; want dana logged in by proxy", page.Status)
	}
	form := url.Values{"csrf": {consoletest.CSRF(page.Body)}, "decision": {"grant"}}
	req, _ = http.NewRequest(http.MethodPost, s.URL+"/approvals/"+p.ApprovalID+"/answer", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-User", "dana")
	if r := consoletest.Do(t, proxy, req); r.Status != http.StatusSeeOther {
		t.Fatalf("POST answer through the proxy = %d: %s", r.Status, r.Body)
	}
	if a := approval(t, s, p.ApprovalID); a.Status != store.Granted || a.Approver != "dana" || len(a.Answers) != 1 || a.Answers[0].Method != store.MethodProxy || !a.Answers[0].Verified {
		t.Errorf("after the proxy's answer the request is %s by %q with answers %+v, want granted by dana, verified by proxy", a.Status, a.Approver, a.Answers)
	}
	// The proxy session's cookie is worthless without the proxy's header.
	req, _ = http.NewRequest(http.MethodGet, s.URL+"/approvals", nil)
	if r := consoletest.Do(t, proxy, req); r.Status != http.StatusSeeOther {
		t.Errorf("the proxy session's cookie without the header = %d, want a redirect to the login", r.Status)
	}
}

func TestAnsweredRequestRefused(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	s.AddAccount(t, "bob", pw, "payments-leads")
	p := pending(t, s, "ord_1")
	ca, csrfA := login(t, s, "alice")
	cb, csrfB := login(t, s, "bob")
	if r := consoletest.Post(t, ca, s.URL+"/approvals/"+p.ApprovalID+"/answer", url.Values{"csrf": {csrfA}, "decision": {"deny"}, "note": {"no"}}); r.Status != http.StatusSeeOther {
		t.Fatalf("alice's answer = %d: %s", r.Status, r.Body)
	}
	ev, rc := s.Written(t)
	// bob's page was drawn before alice answered; his answer arrives after.
	r := consoletest.Post(t, cb, s.URL+"/approvals/"+p.ApprovalID+"/answer", url.Values{"csrf": {csrfB}, "decision": {"grant"}})
	if r.Status != http.StatusConflict || !strings.Contains(r.Body, "already answered") {
		t.Errorf("bob's late answer = %d, want 409 saying it was already answered", r.Status)
	}
	if a := approval(t, s, p.ApprovalID); a.Status != store.Denied || a.Approver != "alice" {
		t.Errorf("the request is %s by %q, want denied by alice", a.Status, a.Approver)
	}
	if e, r := s.Written(t); e != ev || r != rc {
		t.Errorf("a late answer wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}
	// The denial shows beside the next request for the same action.
	p2 := pending(t, s, "ord_1")
	if page := consoletest.Get(t, cb, s.URL+"/approvals/"+p2.ApprovalID); !strings.Contains(page.Body, "Previously denied") || !strings.Contains(page.Body, "this exact action") {
		t.Errorf("the next request of the same action does not show the earlier denial")
	}
}

func TestSelfApprovalRefused(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "Billing-Worker", pw, "payments-leads")
	p := pending(t, s, "ord_1")
	c, csrf := login(t, s, "billing-worker")
	if page := consoletest.Get(t, c, s.URL+"/approvals"); strings.Contains(page.Body, `value="grant"`) || !strings.Contains(page.Body, "someone else must answer") {
		t.Errorf("the requester sees an approve button on its own request")
	}
	ev, rc := s.Written(t)
	if r := consoletest.Post(t, c, s.URL+"/approvals/"+p.ApprovalID+"/answer", url.Values{"csrf": {csrf}, "decision": {"grant"}}); r.Status != http.StatusForbidden {
		t.Errorf("the requester's own answer = %d, want 403", r.Status)
	}
	if e, r := s.Written(t); e != ev || r != rc {
		t.Errorf("a refused self-approval wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}
}

func TestResolveAmbiguous(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	s.Ambiguous(t, 7, "connection reset by peer")
	c, _ := login(t, s, "alice")
	page := consoletest.Get(t, c, s.URL+"/attention")
	for _, want := range []string{"merge:latch:7", "connection reset by peer", "execution_ambiguous", "It happened (committed)"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("GET /attention lacks %q", want)
		}
	}
	cards := effectCards(page.Body)
	if len(cards) != 1 || len(cards[0].forms) != 1 {
		t.Fatalf("GET /attention shows %d cards, want 1 with its form", len(cards))
	}
	action, fields := follow(t, s.URL+"/attention", cards[0].forms[0].action), cards[0].forms[0].fields
	with := func(more url.Values) url.Values {
		for n, v := range fields {
			more[n] = v
		}
		return more
	}
	ev, rc := s.Written(t)
	if r := consoletest.Post(t, c, action, with(url.Values{"to": {"committed"}, "result": {`{"sha":"abc`}})); r.Status != http.StatusBadRequest {
		t.Errorf("resolve with a result that is not JSON = %d, want 400", r.Status)
	}
	if e, r := s.Written(t); e != ev || r != rc {
		t.Errorf("a refused resolution wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}
	r := consoletest.Post(t, c, action, with(url.Values{"to": {"committed"}, "result": {`{ "sha": "abc",
  "n": 1 }`}, "note": {"merged on GitHub"}}))
	if r.Status != http.StatusSeeOther {
		t.Fatalf("resolve = %d: %s", r.Status, r.Body)
	}
	e, err := s.Guard.Store().Effect(t.Context(), "merge:latch:7")
	if err != nil || e.State != store.Committed || e.ResolvedBy != "console:alice" || e.Note != "merged on GitHub" || string(e.Result) != `{"n":1,"sha":"abc"}` {
		t.Errorf("after resolving the effect is %+v, %v", e, err)
	}
	if page := consoletest.Get(t, c, s.URL+"/attention"); !strings.Contains(page.Body, "Nothing needs attention") {
		t.Errorf("the resolved effect still needs attention")
	}
	if r := consoletest.Post(t, c, action, with(url.Values{"to": {"failed"}})); r.Status != http.StatusConflict {
		t.Errorf("resolving again = %d, want 409", r.Status)
	}
}

func TestReceiptsPage(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"})
	for _, n := range []string{"1", "2"} {
		if _, err := s.Guard.Execute(ctx, &latch.Call{Action: "git.merge", Arguments: json.RawMessage(`{"repo":"latch","number":` + n + `}`)},
			func(context.Context, json.RawMessage) (any, error) { return map[string]string{"sha": "abc" + n}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := login(t, s, "alice")
	page := consoletest.Get(t, c, s.URL+"/receipts")
	if !strings.Contains(page.Body, "Chain verified: 2 receipts") || !strings.Contains(page.Body, "merge:latch:1") || !strings.Contains(page.Body, "merge:latch:2") {
		t.Errorf("GET /receipts lacks the verified chain or a receipt")
	}
	page = consoletest.Get(t, c, s.URL+"/receipts?q=LATCH:2")
	if strings.Contains(page.Body, "merge:latch:1") || !strings.Contains(page.Body, "merge:latch:2") {
		t.Errorf("searching LATCH:2 does not find exactly the second receipt")
	}
	page = consoletest.Get(t, c, s.URL+"/receipts/2")
	if page.Status != http.StatusOK || !strings.Contains(page.Body, "intact in the verified chain") || !strings.Contains(page.Body, `&#34;effect_key&#34;: &#34;merge:latch:2&#34;`) {
		t.Errorf("GET /receipts/2 = %d, lacks the document or the chain status", page.Status)
	}
	if page := consoletest.Get(t, c, s.URL+"/receipts/9"); page.Status != http.StatusNotFound {
		t.Errorf("GET /receipts/9 = %d, want 404", page.Status)
	}
	if strings.Contains(page.Body, "chain-start") {
		t.Errorf("GET /receipts of a chain never pruned names a start")
	}

	// Pruned below a checkpoint of receipt 2: the page says where the chain starts, and why.
	priv, _, err := receipt.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := receipt.ParseSigningKey(priv)
	if _, err := store.SignCheckpoint(t.Context(), s.Guard.Store(), key, time.Now()); err != nil {
		t.Fatal(err)
	}
	rs, err := store.Retention(s.Guard.Store())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Prune(t.Context(), &store.PruneRequest{Now: time.Now(), By: "cli:ops", BeforeSeq: 2}); err != nil {
		t.Fatal(err)
	}
	page = consoletest.Get(t, c, s.URL+"/receipts")
	if !strings.Contains(page.Body, "Chain verified: 2 receipts") || !strings.Contains(page.Body, "The chain starts at #2: pruned below the signed checkpoint of seq 2") {
		t.Errorf("GET /receipts after a prune lacks the verified chain or where it starts:\n%s", page.Body)
	}
}

func TestEventsWithSessionCookie(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	c, _ := login(t, s, "alice")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/v1/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("GET /v1/events with a session = %d %s, want the stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// Only the event stream takes the cookie: the API's other routes want a token.
	if r := consoletest.Get(t, c, s.URL+"/v1/approvals"); r.Status != http.StatusUnauthorized {
		t.Errorf("GET /v1/approvals with a session cookie = %d, want 401", r.Status)
	}
	if r := consoletest.Get(t, consoletest.Client(t, ""), s.URL+"/v1/events"); r.Status != http.StatusUnauthorized {
		t.Errorf("GET /v1/events without a session = %d, want 401", r.Status)
	}
}

func TestAccountRemovedEndsSession(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	c, _ := login(t, s, "alice")
	if _, err := s.Guard.Store().(store.AccountStore).RemoveAccount(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	if r := consoletest.Get(t, c, s.URL+"/approvals"); r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, "/login") {
		t.Errorf("GET /approvals after the account was removed = %d %q, want a redirect to /login", r.Status, r.Location)
	}
}

func TestPasswordRules(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"short", strings.Repeat("x", 73), "\xff\xfe invalid utf8"} {
		if _, err := console.HashPassword(bad); err == nil {
			t.Errorf("HashPassword(%q) succeeded", bad)
		}
	}
}

// payout proposes a payout, which needs two verified grants from treasury.
func payout(t *testing.T, s *consoletest.Server, id string) string {
	t.Helper()
	_, err := s.Guard.Begin(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"}),
		&latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"payout_id":"` + id + `","amount":900000}`)})
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("Begin(payout) = %v; want an approval required", err)
	}
	return ar.ApprovalID
}

func TestTwoOfN(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "tess", pw, "treasury")
	s.AddAccount(t, "tom", pw, "treasury")
	id := payout(t, s, "po_1")
	c1, csrf1 := login(t, s, "tess")
	if page := consoletest.Get(t, c1, s.URL+"/approvals"); !strings.Contains(page.Body, "0 of 2") || !strings.Contains(page.Body, "members of treasury; verified answers only") {
		t.Errorf("the payout's page lacks 0 of 2 or who may answer")
	}
	if r := consoletest.Post(t, c1, s.URL+"/approvals/"+id+"/answer", url.Values{"csrf": {csrf1}, "decision": {"grant"}}); r.Status != http.StatusSeeOther {
		t.Fatalf("tess's grant = %d: %s", r.Status, r.Body)
	}
	page := consoletest.Get(t, c1, s.URL+"/approvals/"+id)
	if !strings.Contains(page.Body, "1 of 2 approvals so far") || !strings.Contains(page.Body, `<span class="tally">1 of 2</span>`) || strings.Contains(page.Body, `value="grant"`) {
		t.Errorf("after one grant tess's page does not say 1 of 2, or still offers her an answer")
	}
	if a := approval(t, s, id); a.Status != store.Pending {
		t.Fatalf("after one of two grants the request is %s, want pending", a.Status)
	}
	// One person counts once: tess's second answer is refused and writes nothing.
	ev, rc := s.Written(t)
	if r := consoletest.Post(t, c1, s.URL+"/approvals/"+id+"/answer", url.Values{"csrf": {csrf1}, "decision": {"grant"}}); r.Status != http.StatusForbidden && r.Status != http.StatusConflict {
		t.Errorf("tess's second grant = %d, want refused", r.Status)
	}
	if e, r := s.Written(t); e != ev || r != rc {
		t.Errorf("a second grant by one person wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}
	c2, csrf2 := login(t, s, "tom")
	if page := consoletest.Get(t, c2, s.URL+"/approvals"); !strings.Contains(page.Body, `id="req-`+id+`"`) || !strings.Contains(page.Body, `value="grant"`) {
		t.Errorf("tom's pending approvals lack the payout tess granted, or its approve button")
	}
	if r := consoletest.Post(t, c2, s.URL+"/approvals/"+id+"/answer", url.Values{"csrf": {csrf2}, "decision": {"grant"}}); r.Status != http.StatusSeeOther {
		t.Fatalf("tom's grant = %d: %s", r.Status, r.Body)
	}
	if a := approval(t, s, id); a.Status != store.Granted || len(a.Answers) != 2 {
		t.Errorf("after two grants the request is %s with %d answers, want granted with 2", a.Status, len(a.Answers))
	}
}

func TestUnentitledRefused(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "eve", pw, "treasury") // a role, but not one billing.refund names
	p := pending(t, s, "ord_1")
	c, csrf := login(t, s, "eve")
	page := consoletest.Get(t, c, s.URL+"/approvals")
	if !strings.Contains(page.Body, p.ApprovalID) || strings.Contains(page.Body, `value="grant"`) || !strings.Contains(page.Body, "not among the approvers") {
		t.Errorf("an unentitled approver sees the request without an explanation, or with an approve button")
	}
	ev, rc := s.Written(t)
	if r := consoletest.Post(t, c, s.URL+"/approvals/"+p.ApprovalID+"/answer", url.Values{"csrf": {csrf}, "decision": {"grant"}}); r.Status != http.StatusForbidden {
		t.Errorf("an unentitled approver's answer = %d, want 403", r.Status)
	}
	// The HTTP API refuses an approver token of the same person alike.
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/approvals/"+p.ApprovalID+"/approve", nil)
	req.Header.Set("Authorization", "Bearer "+s.ApproverToken(t, "eve"))
	if r := consoletest.Do(t, consoletest.Client(t, ""), req); r.Status != http.StatusForbidden || !strings.Contains(r.Body, "approver_not_entitled") {
		t.Errorf("the API's answer for eve = %d %s, want 403 approver_not_entitled", r.Status, r.Body)
	}
	if a := approval(t, s, p.ApprovalID); a.Status != store.Pending {
		t.Errorf("the request is %s, want pending", a.Status)
	}
	if e, r := s.Written(t); e != ev || r != rc {
		t.Errorf("unentitled answers wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}
}

// reads counts what a page reads of a real SQLite store: the listings of approval requests (by
// status) and of effects, and the account reads.
type reads struct {
	*sqlite.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *reads) count(what string) {
	c.mu.Lock()
	c.n[what]++
	c.mu.Unlock()
}

func (c *reads) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func (c *reads) Approvals(ctx context.Context, f store.ApprovalFilter) ([]*store.Approval, error) {
	c.count("approvals:" + cmp.Or(string(f.Status), "all"))
	return c.Store.Approvals(ctx, f)
}

func (c *reads) Effects(ctx context.Context, f store.EffectFilter) ([]*store.Effect, error) {
	what := cmp.Or(string(f.State), "all")
	if f.Unsettled {
		what = "unsettled"
	}
	c.count("effects:" + what)
	return c.Store.Effects(ctx, f)
}

func (c *reads) Account(ctx context.Context, name string) (*store.Account, error) {
	c.count("account")
	return c.Store.Account(ctx, name)
}

// A page load reads each listing it shows once: the approvals page the pending and the denied
// requests (never the whole history) and the unsettled effects once for the layout's count
// (never every effect: the settled ones are nearly all the store holds); Needs attention the
// unsettled effects once, shared with the layout; and the account once per request.
func TestPageReads(t *testing.T) {
	t.Parallel()
	var rd *reads
	s := consoletest.Start(t, &consoletest.Options{Wrap: func(st store.Store) store.Store {
		rd = &reads{Store: st.(*sqlite.Store), n: map[string]int{}}
		return rd
	}})
	s.AddAccount(t, "alice", pw, "payments-leads")
	pending(t, s, "ord_1")
	c, _ := login(t, s, "alice")
	for _, tc := range []struct {
		path string
		want map[string]int
	}{
		{"/approvals", map[string]int{"approvals:pending": 1, "approvals:denied": 1, "effects:unsettled": 1, "account": 1}},
		{"/attention", map[string]int{"approvals:pending": 1, "effects:unsettled": 1, "account": 1}},
	} {
		rd.take()
		if p := consoletest.Get(t, c, s.URL+tc.path); p.Status != http.StatusOK {
			t.Fatalf("GET %s = %d", tc.path, p.Status)
		}
		if got := rd.take(); !maps.Equal(got, tc.want) {
			t.Errorf("GET %s read %v, want %v", tc.path, got, tc.want)
		}
	}
}

// headless is a store whose newest event cannot be read, and which counts reads of the whole
// log (an approval's or an effect's own events are read by their pages anyway).
type headless struct {
	*sqlite.Store
	events atomic.Int32
}

func (h *headless) LastEventID(context.Context) (int64, error) {
	return 0, errors.New("the event head is unavailable")
}

func (h *headless) Events(ctx context.Context, f store.EventFilter) ([]*store.Event, error) {
	if f.ApprovalID == "" && f.EffectKey == "" && f.ActionID == "" {
		h.events.Add(1)
	}
	return h.Store.Events(ctx, f)
}

// A page whose newest event cannot be read is still drawn, without live updates and saying so,
// and without reading the event log instead: a start of 0 would replay every event.
func TestPageWithoutEventHead(t *testing.T) {
	t.Parallel()
	var st *headless
	s := consoletest.Start(t, &consoletest.Options{Wrap: func(inner store.Store) store.Store {
		st = &headless{Store: inner.(*sqlite.Store)}
		return st
	}})
	s.AddAccount(t, "alice", pw, "payments-leads")
	id := pending(t, s, "ord_1")
	c, _ := login(t, s, "alice")
	for _, path := range []string{"/approvals", "/attention", "/approvals/" + id.ApprovalID} {
		p := consoletest.Get(t, c, s.URL+path)
		if p.Status != http.StatusOK {
			t.Fatalf("GET %s = %d", path, p.Status)
		}
		if strings.Contains(p.Body, "data-live") || !strings.Contains(p.Body, "Live updates are off on this page") {
			t.Errorf("GET %s: want no live updates and the notice, got:\n%s", path, p.Body)
		}
	}
	if n := st.events.Load(); n != 0 {
		t.Errorf("the pages read the event log %d times", n)
	}
	// With the head readable, the page starts its live updates from it.
	s2 := consoletest.Start(t, nil)
	s2.AddAccount(t, "alice", pw, "payments-leads")
	pending(t, s2, "ord_2")
	c2, _ := login(t, s2, "alice")
	if p := consoletest.Get(t, c2, s2.URL+"/approvals"); !strings.Contains(p.Body, `data-live="`) || strings.Contains(p.Body, "Live updates are off") {
		t.Errorf("GET /approvals with an event head: want live updates, got:\n%s", p.Body)
	}
}

// Money whose currency an argument names is shown in that currency's own minor units, on the
// console as in the CLI: 250000 yen is ¥250,000, 250000 fils 250.000 dinars.
func TestMoneyInCurrencyOfArgument(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	for _, cur := range []string{"JPY", "KWD", "EUR"} {
		_, err := s.Guard.Begin(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"}),
			&latch.Call{Action: "billing.refund", Arguments: json.RawMessage(`{"order_id":"ord_` + cur + `","amount":250000,"currency":"` + cur + `"}`)})
		var ar *latch.ApprovalRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("Begin(%s) = %v; want an approval required", cur, err)
		}
	}
	c, _ := login(t, s, "alice")
	page := consoletest.Get(t, c, s.URL+"/approvals")
	for _, want := range []string{"JP¥250,000 (250000 minor units)", "KWD 250.000 (250000 minor units)", "€2,500.00 (250000 minor units)"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("GET /approvals lacks %q", want)
		}
	}
	if strings.Contains(page.Body, "JP¥2,500.00") {
		t.Errorf("GET /approvals reads 250000 yen as JP¥2,500.00")
	}
}
