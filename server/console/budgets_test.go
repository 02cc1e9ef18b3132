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

// budgetsPolicy budgets pay.charge per principal.
const budgetsPolicy = `schema: latch.policy/v1
actions:
  pay.charge:
    effect: "pay:{invoice}"
    arguments:
      invoice: { type: string }
    decision: allow
    budgets:
      - {metric: count, limit: 4, window: P1D, per: principal}
`

// TestBudgetsPage: the Budgets page (in the nav) draws one bar per budget in force — a native
// meter of consumed against the limit, no script and no inline style — with the charges it holds
// and why, an ambiguous one linked to Needs attention; the principal and the effect keys, which
// an agent chose, are marked where they hide characters.
func TestBudgetsPage(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, &consoletest.Options{Policy: budgetsPolicy})
	s.AddAccount(t, "alice", pw)
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "bot\u202egro"})
	for _, c := range []struct {
		invoice string
		fail    error
	}{{"inv_1", nil}, {"inv\u200b2<b>", errors.New("connection reset")}} {
		args, _ := json.Marshal(map[string]string{"invoice": c.invoice})
		if _, err := s.Guard.Execute(ctx, &latch.Call{Action: "pay.charge", Arguments: args},
			func(context.Context, json.RawMessage) (any, error) { return nil, c.fail }); (err != nil) != (c.fail != nil) {
			t.Fatalf("Execute(%q) = %v", c.invoice, err)
		}
	}
	c, _ := login(t, s, "alice")
	if page := consoletest.Get(t, c, s.URL+"/approvals"); !strings.Contains(page.Body, `<a href="/budgets">Budgets</a>`) {
		t.Errorf("the nav has no link to the Budgets page")
	}
	page := consoletest.Get(t, c, s.URL+"/budgets")
	if page.Status != 200 {
		t.Fatalf("GET /budgets = %d", page.Status)
	}
	for _, want := range []string{
		`<a href="/budgets" aria-current="page">Budgets</a>`,
		`<meter id="m-0" min="0" max="4" value="2" high="3" optimum="0">2 of 4</meter>`,
		"2 of 4 count (50%) in P1D; 2 remain",
		"action:pay.charge:principal:" + mark("bot", `\u202e`, "gro"),
		"<code>pay:inv_1</code>",
		"<code>pay:" + mark("inv", `\u200b`, "2&lt;b&gt;") + "</code>",
		`<span class="status status-ambiguous">ambiguous</span> — its effect is ambiguous: held until a person resolves it`,
		`<a href="/attention">Resolve it</a>`,
		"Held charges (2)",
	} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("GET /budgets lacks %s", want)
		}
	}
	for _, h := range hidden {
		if strings.Contains(page.Body, h) {
			t.Errorf("GET /budgets carries the hidden character %q raw", h)
		}
	}
	if strings.Contains(page.Body, "style=") || strings.Contains(page.Body, "<b>") || strings.Count(page.Body, "<script") != 1 {
		t.Errorf("GET /budgets has an inline style, unescaped HTML, or a script beyond the console's own")
	}
}
