package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/store"
)

// events opens the event stream with c's session cookie and returns its status.
func events(t *testing.T, c *http.Client, base string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func loggedIn(t *testing.T, c *http.Client, base, who string) bool {
	t.Helper()
	p := consoletest.Get(t, c, base+"/approvals")
	return p.Status == http.StatusOK && strings.Contains(p.Body, who+" <small>(session")
}

// sessionHash is the store's key of the session c holds for base.
func sessionHash(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	u, _ := url.Parse(base)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "latch_session" {
			return store.SessionHash(ck.Value)
		}
	}
	t.Fatal("no session cookie")
	return ""
}

// Sessions live in the store: a session made by one server is honoured by another on the same
// store (a replica) and by the next server after a restart; a logout on one is refused by the
// other at once, pages and event stream alike; an account's removal ends its sessions in the
// store. Both stores.
func TestSessionsInStore(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			a := consoletest.Start(t, &consoletest.Options{Backend: backend})
			a.AddAccount(t, "alice", pw, "payments-leads")
			b := consoletest.Start(t, &consoletest.Options{StoreURL: a.StoreURL})
			p := pending(t, a, "ord_1")

			// Logged in on a, answered on b: the cookie (the browser sends it to both, as to
			// replicas behind one address) and the CSRF token of a's page are b's too.
			c, csrf := login(t, a, "alice")
			if !loggedIn(t, c, b.URL, "alice") {
				t.Fatalf("a session made by one server is not honoured by a replica on the same store")
			}
			if st := events(t, c, b.URL); st != http.StatusOK {
				t.Errorf("the replica's event stream with the session = %d, want 200", st)
			}
			if r := consoletest.Post(t, c, b.URL+"/approvals/"+p.ApprovalID+"/answer", url.Values{"csrf": {csrf}, "decision": {"grant"}}); r.Status != http.StatusSeeOther {
				t.Errorf("an answer on the replica with the first server's form = %d: %s", r.Status, r.Body)
			}
			if a := approval(t, a, p.ApprovalID); a.Status != store.Granted || a.Approver != "alice" {
				t.Errorf("after the answer on the replica the request is %s by %q", a.Status, a.Approver)
			}

			// A logout on b is refused by a at once, pages and event stream alike, even with a
			// copy of the cookie (another tab's, a thief's): the session is gone from the store.
			u, _ := url.Parse(a.URL)
			stale := consoletest.Client(t, "")
			stale.Jar.SetCookies(u, c.Jar.Cookies(u))
			h := sessionHash(t, c, a.URL)
			page := consoletest.Get(t, c, b.URL+"/approvals")
			if r := consoletest.Post(t, c, b.URL+"/logout", url.Values{"csrf": {consoletest.CSRF(page.Body)}}); r.Status != http.StatusSeeOther {
				t.Fatalf("logout on the replica = %d", r.Status)
			}
			if loggedIn(t, stale, a.URL, "alice") {
				t.Errorf("a session logged out on the replica is still honoured by the first server")
			}
			if st := events(t, stale, a.URL); st != http.StatusUnauthorized {
				t.Errorf("the first server's event stream with a session logged out on the replica = %d, want 401", st)
			}
			if _, err := a.Guard.Store().(store.SessionStore).Session(t.Context(), h); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("after logout the store still has the session: %v", err)
			}

			// Restart: the next server on the store honours a session of the last.
			c3, _ := login(t, a, "alice")
			a.Stop()
			next := consoletest.Start(t, &consoletest.Options{StoreURL: a.StoreURL})
			if !loggedIn(t, c3, next.URL, "alice") {
				t.Errorf("a session did not survive a restart")
			}
			if st := events(t, c3, next.URL); st != http.StatusOK {
				t.Errorf("after a restart the event stream with the session = %d, want 200", st)
			}
			// The account's removal ends its sessions in the store, for every server.
			h3 := sessionHash(t, c3, next.URL)
			if _, err := next.Guard.Store().(store.AccountStore).RemoveAccount(t.Context(), "alice"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Guard.Store().(store.SessionStore).Session(t.Context(), h3); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("after the account's removal its session remains: %v", err)
			}
			if loggedIn(t, c3, b.URL, "alice") || events(t, c3, b.URL) != http.StatusUnauthorized {
				t.Errorf("after the account's removal its session is still honoured")
			}
		})
	}
}

// A flash message is shown only when this session's own form left it: a cookie set by anyone
// else (a sibling site's cookie, another session's message) shows nothing.
func TestForgedFlashNotShown(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	s.AddAccount(t, "bob", pw, "payments-leads")
	p := pending(t, s, "ord_1")
	ca, csrfA := login(t, s, "alice")
	cb, _ := login(t, s, "bob")
	u, _ := url.Parse(s.URL)
	// alice's answer leaves her a flash; bob gets a copy of her cookie.
	if r := consoletest.Post(t, ca, s.URL+"/approvals/"+p.ApprovalID+"/answer", url.Values{"csrf": {csrfA}, "decision": {"deny"}}); r.Status != http.StatusSeeOther {
		t.Fatalf("answer = %d", r.Status)
	}
	var flash *http.Cookie
	for _, ck := range ca.Jar.Cookies(u) {
		if ck.Name == "latch_flash" {
			flash = ck
		}
	}
	if flash == nil {
		t.Fatal("the answer left no flash cookie")
	}
	cb.Jar.SetCookies(u, []*http.Cookie{flash})
	if page := consoletest.Get(t, cb, s.URL+"/approvals"); strings.Contains(page.Body, "Denied "+p.ApprovalID) {
		t.Errorf("bob's page shows the flash alice's form left")
	}
	cb.Jar.SetCookies(u, []*http.Cookie{{Name: "latch_flash", Value: "QXBwcm92ZWQgZXZlcnl0aGluZw.forged"}})
	if page := consoletest.Get(t, cb, s.URL+"/approvals"); strings.Contains(page.Body, "Approved everything") {
		t.Errorf("a forged flash cookie is shown")
	}
	if page := consoletest.Get(t, ca, s.URL+"/approvals"); !strings.Contains(page.Body, "Denied "+p.ApprovalID) {
		t.Errorf("alice's own page does not show her flash")
	}
}
