package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
)

// coverageConsolePolicy has a rule that fires, one that never does and an action never called.
const coverageConsolePolicy = `schema: latch.policy/v1
actions:
  pay.charge:
    effect: "pay:{invoice}"
    rules:
      - when: { amount_lte: 100 }
        decision: allow
      - when: { amount_gte: 100000 }
        decision: deny
  repo.delete:
    effect: "repo:{name}"
    decision: deny
`

// TestCoveragePage: the Coverage page (in the nav) lists exactly the rules that never fired,
// the action never called, its effect template that never produced a key, and the table of
// calls by rule; an action name an agent chose, which the policy does not list, is escaped and
// its hidden character marked. A window that cannot be read is refused, naming it.
func TestCoveragePage(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: coverageConsolePolicy})
	s.AddAccount(t, "alice", pw)
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "bot"})
	run := func(action, args string) error {
		_, err := s.Guard.Execute(ctx, &latch.Call{Action: action, Arguments: json.RawMessage(args)},
			func(context.Context, json.RawMessage) (any, error) { return nil, nil })
		return err
	}
	for _, inv := range []string{"i1", "i2"} {
		if err := run("pay.charge", `{"invoice":"`+inv+`","amount":50}`); err != nil {
			t.Fatal(err)
		}
	}
	if err := run("wire\u202e<b>x", `{}`); !errors.Is(err, latch.ErrDenied) {
		t.Fatalf("unlisted action = %v, want denied", err)
	}
	c, _ := login(t, s, "alice")
	if page := consoletest.Get(t, c, s.URL+"/approvals"); !strings.Contains(page.Body, `<a href="/coverage">Coverage</a>`) {
		t.Errorf("the nav has no link to the Coverage page")
	}
	page := consoletest.Get(t, c, s.URL+"/coverage")
	if page.Status != 200 {
		t.Fatalf("GET /coverage = %d", page.Status)
	}
	for _, want := range []string{
		`<a href="/coverage" aria-current="page">Coverage</a>`,
		`<p id="calls">3 recorded call(s) decided under this policy.</p>`,
		`<ul><li><code>pay.charge</code> rule[1] (line 8, deny)</li><li><code>repo.delete</code> decision (line 10, deny)</li></ul>`,
		`<h2 id="never-called">Actions never called</h2>` + "\n" + `<ul><li><code>repo.delete</code></li></ul>`,
		`<li><code>repo.delete</code>: <code>repo:{name}</code></li>`,
		"<li><code>" + mark("wire", `\u202e`, "&lt;b&gt;x") + "</code>: 1</li>",
		`<tr><td>pay.charge</td><td>rule[0]</td><td>6</td><td>allow</td><td>2</td></tr>`,
	} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("GET /coverage lacks %s", want)
		}
	}
	for _, h := range hidden {
		if strings.Contains(page.Body, h) {
			t.Errorf("GET /coverage carries the hidden character %q raw", h)
		}
	}
	if strings.Contains(page.Body, "style=") || strings.Contains(page.Body, "<b>") || strings.Count(page.Body, "<script") != 1 {
		t.Errorf("GET /coverage has an inline style, unescaped HTML, or a script beyond the console's own")
	}

	late := consoletest.Get(t, c, s.URL+"/coverage?since=2200-01-01T00:00:00Z")
	if !strings.Contains(late.Body, `<p id="calls">0 recorded call(s)`) || !strings.Contains(late.Body, "<li><code>pay.charge</code> rule[0] (line 6, allow)</li>") {
		t.Errorf("GET /coverage?since=(future) still counts calls or does not list rule[0] as never fired:\n%s", late.Body)
	}
	if far := consoletest.Get(t, c, s.URL+"/coverage?since=2999-01-01T00:00:00Z"); far.Status != 400 || !strings.Contains(far.Body, "want a time between the years 1678 and 2261") {
		t.Errorf("GET /coverage?since=2999-… = %d, want 400 naming the years a store keeps", far.Status)
	}
	bad := consoletest.Get(t, c, s.URL+"/coverage?since=%3Cyesterday%3E")
	if bad.Status != 400 || !strings.Contains(bad.Body, `since &#34;&lt;yesterday&gt;&#34;: want an RFC 3339 time`) {
		t.Errorf("GET /coverage?since=<yesterday> = %d, want 400 naming the window: %.2000s", bad.Status, bad.Body)
	}
}
