package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/store"
)

// TestResolveInputAsEverywhere: the console reads a resolution as the API, the CLI and the
// operator MCP do (the operator layer's one reading): no outcome, another word, a result with
// failed, a result with a float or a key named twice are each refused 400, naming what is
// wrong, and write nothing; a result given with committed is stored canonical.
func TestResolveInputAsEverywhere(t *testing.T) {
	t.Parallel()
	const pw = "correct horse battery staple"
	cs := consoletest.Start(t, &consoletest.Options{})
	cs.AddAccount(t, "alice", pw)
	key := cs.Ambiguous(t, 3, "connection reset")
	c := consoletest.Client(t, "")
	if p := consoletest.Login(t, c, cs.URL, "alice", pw); p.Status != http.StatusSeeOther {
		t.Fatalf("login = %d %s", p.Status, p.Body)
	}
	post := func(form url.Values) *consoletest.Page {
		t.Helper()
		page := consoletest.Get(t, c, cs.URL+"/attention").Body
		action, seen := consoletest.ResolveForm(page, key)
		if action == "" {
			t.Fatalf("no resolve form for %s", key)
		}
		form.Set("csrf", consoletest.CSRF(page))
		form.Set("seen", seen)
		return consoletest.Post(t, c, cs.URL+action, form)
	}
	ev, rc := cs.Written(t)
	for _, tc := range []struct {
		name string
		form url.Values
		want string
	}{
		{"no outcome", url.Values{}, "Say committed or failed"},
		{"another word", url.Values{"to": {"done"}}, "Say committed or failed"},
		{"a result with failed", url.Values{"to": {"failed"}, "result": {`{"id":1}`}}, "a result goes with to committed"},
		{"a float", url.Values{"to": {"committed"}, "result": {`{"amount":12.5}`}}, "The result cannot be stored"},
		{"a key named twice", url.Values{"to": {"committed"}, "result": {`{"a":1,"a":2}`}}, "The result cannot be stored"},
	} {
		p := post(tc.form)
		if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, tc.want) {
			t.Errorf("%s: %d, want 400 saying %q; body %.300s", tc.name, p.Status, tc.want, p.Body)
		}
	}
	if e, r := cs.Written(t); e != ev || r != rc {
		t.Errorf("refused resolutions wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}
	if p := post(url.Values{"to": {"committed"}, "result": {`{ "id" : "ch_1", "amount" : 5 }`}}); p.Status != http.StatusSeeOther {
		t.Fatalf("committed with a result = %d %.300s", p.Status, p.Body)
	}
	e, err := cs.Guard.Store().Effect(t.Context(), key)
	if err != nil || e.State != store.Committed || string(e.Result) != `{"amount":5,"id":"ch_1"}` {
		t.Errorf("%s = %+v, %v; want committed with the canonical result", key, e, err)
	}
}
