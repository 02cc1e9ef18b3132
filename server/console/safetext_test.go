package console_test

import (
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
)

// hidden are characters that change how text reads without showing themselves: bidi overrides
// and marks, zero-width characters, controls (ESC, BEL, DEL, C1), line separators, the BOM.
var hidden = []string{"\u202e", "\u202d", "\u2066", "\u200f", "\u200b", "\u200d", "\ufeff", "\u2028",
	"\x01", "\x07", "\x1b", "\x7f", "\u009b", "\r"}

// Agent-supplied text — arguments, principals, effect keys, errors, flash and refusal
// messages — is shown with every hidden character marked as a visible escape, on every page:
// no page carries one raw, "acct_1<ZWSP>23" never reads as "acct_123", and HTML is still
// escaped.
func TestHostileTextMarked(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	order := "ord_1\u200b23<script>alert(1)</script>"
	args, _ := json.Marshal(map[string]any{"order_id": order, "amount": 250000, "currency": "EUR"})
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing\u202eworker", User: "ana\x1b[2J"})
	_, err := s.Guard.Begin(ctx, &latch.Call{Action: "billing.refund", Arguments: args})
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("Begin = %v, want an approval required", err)
	}
	s.AmbiguousCharge(t, "acct_1\u200b23\u202e\x07\u2028")
	c, _ := login(t, s, "alice")

	pages := map[string]*consoletest.Page{}
	for _, p := range []string{"/approvals", "/approvals/" + ar.ApprovalID, "/attention", "/receipts", "/receipts/1",
		"/approvals/apr_" + url.PathEscape("\u202e\u200b")} {
		pages[p] = consoletest.Get(t, c, s.URL+p)
	}
	// A flash message that names the key: resolve the effect from its card.
	att := pages["/attention"]
	cards := effectCards(att.Body)
	if len(cards) != 1 || len(cards[0].forms) != 1 {
		t.Fatalf("Needs attention shows %d cards, want 1", len(cards))
	}
	form := url.Values{"to": {"failed"}}
	for n, v := range cards[0].forms[0].fields {
		form[n] = v
	}
	if r := consoletest.Post(t, c, follow(t, s.URL+"/attention", cards[0].forms[0].action), form); r.Status != http.StatusSeeOther {
		t.Fatalf("resolve = %d", r.Status)
	}
	pages["/attention after resolving"] = consoletest.Get(t, c, s.URL+"/attention")

	for name, p := range pages {
		for _, h := range hidden {
			if strings.Contains(p.Body, h) {
				t.Errorf("GET %s (%d) carries the hidden character %q raw", name, p.Status, h)
			}
		}
		if strings.Contains(p.Body, "<script>alert") {
			t.Errorf("GET %s carries the argument's HTML unescaped", name)
		}
	}
	for name, want := range map[string][]string{
		"/approvals": {
			mark("ord_1", `\u200b`, "23&lt;script&gt;alert(1)&lt;/script&gt;"), // the argument, and the summary
			mark("billing", `\u202e`, "worker"), mark("ana", `\x1b`, "[2J"),
		},
		"/approvals/" + ar.ApprovalID: {mark("ord_1", `\u200b`, "23&lt;script&gt;"), mark("billing", `\u202e`, "worker")},
		"/attention":                  {mark("pay:acct_1", `\u200b`, "23") + mark("", `\u202e`, "") + mark("", `\x07`, "") + mark("", `\u2028`, "")},
		"/receipts":                   {mark("pay:acct_1", `\u200b`, "23")},
		"/receipts/1":                 {mark("pay:acct_1", `\u200b`, "23")},
		"/attention after resolving":  {"Resolved " + mark("pay:acct_1", `\u200b`, "23")},
	} {
		for _, w := range want {
			if !strings.Contains(pages[name].Body, w) {
				t.Errorf("GET %s does not mark the hidden characters: lacks %s", name, w)
			}
		}
	}
	if !strings.Contains(pages["/approvals"].Body, template.HTMLEscapeString("€2,500.00")) {
		t.Errorf("the approvals page lost the money display")
	}
}

// mark is how a page shows before, then the escape esc marked, then after.
func mark(before, esc, after string) string {
	return before + `<span class="esc" title="a hidden character, shown as its code">` + esc + `</span>` + after
}
