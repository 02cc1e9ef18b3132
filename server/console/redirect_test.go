package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/consoletest"
)

// hostileNext are places a link to the login page may ask to return to: each would leave the
// console if it were followed as given (browsers drop tabs and line breaks from a URL, read a
// backslash as a slash, and take //host as another site).
var hostileNext = []string{
	"/\t/evil.example", "/%09/evil.example", "\t//evil.example", " //evil.example",
	"/\n/evil.example", "/\r\n/evil.example", "/\r/evil.example",
	"//evil.example", "///evil.example", "//evil.example/approvals",
	"/\\evil.example", "\\\\evil.example", "/\\/evil.example",
	"%2F%2Fevil.example", "/%2F/evil.example", "/%2f%2fevil.example", "/%5Cevil.example",
	"https://evil.example", "https:evil.example", "http:/evil.example", "HTTPS://evil.example",
	"javascript:alert(1)", "data:text/html,hi", "evil.example", "./evil.example",
	"/.//evil.example", "/..//evil.example", "/approvals/..//evil.example",
	"/\u3000/evil.example", "/\u2215\u2215evil.example", "/\x00/evil.example",
	"/nowhere", "/static/console.js", "/login",
}

// raw sends req with c's cookies and returns the answer unread past its status and Location:
// http.Client refuses a Location with a control character before a test could look at it.
func raw(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	for _, ck := range c.Jar.Cookies(req.URL) {
		req.AddCookie(ck)
	}
	resp, err := c.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

func rawGet(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return raw(t, c, req)
}

func rawPost(t *testing.T, c *http.Client, u string, form url.Values) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return raw(t, c, req)
}

// where follows a redirect's Location as a browser would read it (tabs and line breaks
// dropped, a backslash read as a slash) from the console at base.
func where(t *testing.T, base, loc string) *url.URL {
	t.Helper()
	b, _ := url.Parse(base + "/login")
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(strings.TrimLeft(loc, " \x00\t\n\r"))
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatalf("Location %q is not a URL: %v", loc, err)
	}
	return b.ResolveReference(u)
}

// After login, and from the login page of someone logged in already, the console goes back only
// to one of its own pages: a next that would leave it — or that names no page of it — goes to
// the pending approvals instead.
func TestLoginNextStaysOnConsole(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	in, _ := login(t, s, "alice")
	base, _ := url.Parse(s.URL)
	check := func(how, next, loc string) {
		t.Helper()
		u := where(t, s.URL, loc)
		if u.Scheme != base.Scheme || u.Host != base.Host || u.Path != "/approvals" {
			t.Errorf("%s with next %q goes to %q (read %s), want /approvals of the console", how, next, loc, u)
			return
		}
		if p := consoletest.Get(t, in, u.String()); p.Status != http.StatusOK || !strings.Contains(p.Body, "<h1>Pending approvals</h1>") {
			t.Errorf("%s with next %q: %s answers %d, not the console's page", how, next, u, p.Status)
		}
	}
	for _, next := range hostileNext {
		// Logged in already: GET /login?next= redirects at once.
		if st, loc := rawGet(t, in, s.URL+"/login?next="+url.QueryEscape(next)); st != http.StatusSeeOther {
			t.Errorf("GET /login?next=%q logged in = %d, want 303", next, st)
		} else {
			check("GET /login", next, loc)
		}
		// Logging in: the form carries next as the login page gave it.
		c := consoletest.Client(t, "")
		page := consoletest.Get(t, c, s.URL+"/login?next="+url.QueryEscape(next))
		form := forms(page.Body)
		if len(form) != 1 {
			t.Fatalf("the login page has %d forms", len(form))
		}
		f := form[0].fields
		f.Set("name", "alice")
		f.Set("password", pw)
		st, loc := rawPost(t, c, s.URL+"/login", f)
		if st != http.StatusSeeOther {
			t.Fatalf("login with next %q = %d", next, st)
		}
		check("POST /login", next, loc)
		// And a next posted as it came, not as the page gave it.
		c = consoletest.Client(t, "")
		f.Set("next", next)
		f.Set("csrf", consoletest.CSRF(consoletest.Get(t, c, s.URL+"/login").Body))
		if st, loc := rawPost(t, c, s.URL+"/login", f); st != http.StatusSeeOther {
			t.Errorf("login with a raw next %q = %d", next, st)
		} else {
			check("POST /login (raw next)", next, loc)
		}
	}
	// A page of the console is returned to, query and all.
	for _, next := range []string{"/attention", "/receipts?q=merge%3Alatch", "/approvals"} {
		r := consoletest.Get(t, in, s.URL+"/login?next="+url.QueryEscape(next))
		if r.Status != http.StatusSeeOther || r.Location != next {
			t.Errorf("GET /login?next=%q logged in = %d %q, want 303 to it", next, r.Status, r.Location)
		}
	}
	// A page asked for before login is where the login returns to.
	c := consoletest.Client(t, "")
	r := consoletest.Get(t, c, s.URL+"/receipts?q=a%26next%3D%2F%2Fevil.example")
	if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, "/login?next=") {
		t.Fatalf("GET /receipts logged out = %d %q, want a redirect to the login", r.Status, r.Location)
	}
	page := consoletest.Get(t, c, s.URL+r.Location)
	f := forms(page.Body)[0].fields
	f.Set("name", "alice")
	f.Set("password", pw)
	if r := consoletest.Post(t, c, s.URL+"/login", f); r.Location != "/receipts?q=a%26next%3D%2F%2Fevil.example" {
		t.Errorf("the login returns to %q, want the receipts search asked for", r.Location)
	}
}
