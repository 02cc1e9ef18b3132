package console_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/internal/hostile"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// hostileInvoices are invoice ids an agent may send, each making the effect key pay:ID: the
// shapes that a URL, a path cleaner, a browser or a reader's eye takes for something else — the
// shared table of every surface (internal/hostile.Keys, those of the form pay:ID that a store
// keeps) and the console's own.
var hostileInvoices = withShared([]string{
	"inv%38%38",       // percent-decodes to the victim's inv88
	"inv%2F88", "%2F", // an escaped slash
	"inv%0088", "%", "%zz", // a NUL escape, a lone percent, a malformed escape
	"/../inv88", // dot segments that a path cleaner removes
	"x/../../effects/pay:inv88",
	"./inv88", "..", "inv/88", "inv88/",
	"inv#88", "inv?88", "inv?to=committed", // a fragment, a query
	"inv\u202e88", // a bidi override
	"inv\u200b88", // a zero-width space: reads as inv88
	"inv\x0188", "inv\n88", "inv\r\n88", "inv\t88", "inv\x1b[2J88",
	"inv 88", "inv\\88", `inv"88'<b>`,
	strings.Repeat("8", 1000), // near the 1,024 bytes a store keeps
	strings.Repeat("日", 300),  // long, and not ASCII
	"ínv-88 ✓ 日本",
})

// withShared is own and the invoice ids of internal/hostile.Keys not in it: the keys of the form
// pay:ID, but the plain victim pay:inv88 and those longer than a store keeps.
func withShared(own []string) []string {
	out := own
	for _, k := range hostile.Keys {
		if inv, ok := strings.CutPrefix(k.Value, "pay:"); ok && inv != "inv88" && len(k.Value) <= store.MaxText && !slices.Contains(out, inv) {
			out = append(out, inv)
		}
	}
	return out
}

var (
	effectCard  = regexp.MustCompile(`(?s)<article class="card effect"[^>]*>(.*?)</article>`)
	cardKey     = regexp.MustCompile(`(?s)<h2[^>]*>\s*<code>(.*?)</code>`)
	formRe      = regexp.MustCompile(`(?s)<form\b([^>]*)>(.*?)</form>`)
	inputRe     = regexp.MustCompile(`<input\b[^>]*>`)
	attrRe      = regexp.MustCompile(`\b(action|name|value|type|href)="([^"]*)"`)
	hrefRe      = regexp.MustCompile(`<a\b[^>]*\bhref="([^"]*)"`)
	tagRe       = regexp.MustCompile(`<[^>]*>`)
	receiptLink = regexp.MustCompile(`^/receipts/(\d+)$`)
)

// pageForm is a form of a page as a browser would send it: its action and its hidden fields.
type pageForm struct {
	action string
	fields url.Values
}

// shownCard is one effect's card on Needs attention.
type shownCard struct {
	key   string // the key as the card shows it (tags dropped, entities decoded)
	forms []pageForm
	links []string
}

func attrs(tag string) map[string]string {
	out := map[string]string{}
	for _, m := range attrRe.FindAllStringSubmatch(tag, -1) {
		out[m[1]] = html.UnescapeString(m[2])
	}
	return out
}

func forms(body string) []pageForm {
	var out []pageForm
	for _, m := range formRe.FindAllStringSubmatch(body, -1) {
		f := pageForm{action: attrs(m[1])["action"], fields: url.Values{}}
		for _, in := range inputRe.FindAllString(m[2], -1) {
			if a := attrs(in); a["type"] == "hidden" {
				f.fields.Add(a["name"], a["value"])
			}
		}
		out = append(out, f)
	}
	return out
}

func links(body string) []string {
	var out []string
	for _, m := range hrefRe.FindAllStringSubmatch(body, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

func effectCards(body string) []shownCard {
	var out []shownCard
	for _, m := range effectCard.FindAllStringSubmatch(body, -1) {
		c := shownCard{forms: forms(m[1]), links: links(m[1])}
		if k := cardKey.FindStringSubmatch(m[1]); k != nil {
			c.key = html.UnescapeString(tagRe.ReplaceAllString(k[1], ""))
		}
		out = append(out, c)
	}
	return out
}

// follow resolves ref against the page at base as a browser does.
func follow(t *testing.T, base, ref string) string {
	t.Helper()
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	r, err := url.Parse(ref)
	if err != nil {
		t.Fatalf("the page links to %q, which is not a URL: %v", ref, err)
	}
	u := b.ResolveReference(r)
	u.Fragment = ""
	return u.String()
}

// receiptKey is the effect key of receipt seq.
func receiptKey(t *testing.T, s *consoletest.Server, seq string) string {
	t.Helper()
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for rc, err := range s.Guard.Store().Receipts(t.Context(), store.ReceiptFilter{AfterSeq: n - 1}) {
		if err != nil {
			t.Fatal(err)
		}
		d, err := receipt.Parse(rc.Doc)
		if err != nil {
			t.Fatal(err)
		}
		return d.EffectKey
	}
	t.Fatalf("no receipt %d", n)
	return ""
}

func effectStates(t *testing.T, s *consoletest.Server, keys []string) map[string]store.State {
	t.Helper()
	out := map[string]store.State{}
	for _, k := range keys {
		e, err := s.Guard.Store().Effect(t.Context(), k)
		if err != nil {
			t.Fatalf("Effect(%q): %v", k, err)
		}
		out[k] = e.State
	}
	return out
}

// Every effect key an agent can send reaches exactly its own effect from Needs attention: its
// card's resolve form resolves it and nothing else, and its links lead to its own receipts. A
// decoy whose key percent-decodes, path-cleans or reads as another's never resolves the other:
// the victim stays ambiguous until its own card is used.
func TestHostileKeysResolveOwnEffect(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	victim := s.AmbiguousCharge(t, "inv88")
	keys := []string{victim}
	for _, inv := range hostileInvoices {
		keys = append(keys, s.AmbiguousCharge(t, inv))
	}
	c, _ := login(t, s, "alice")
	attention := s.URL + "/attention"
	// The victim last: every decoy is used while it is still ambiguous.
	order := append(append([]string{}, keys[1:]...), victim)
	for _, k := range order {
		page := consoletest.Get(t, c, attention)
		if page.Status != http.StatusOK {
			t.Fatalf("GET /attention = %d", page.Status)
		}
		var mine *shownCard
		cards := effectCards(page.Body)
		for i := range cards {
			if cards[i].key == k || cards[i].key == safetext.Escape(k) {
				if mine != nil {
					t.Fatalf("two cards show the key %q", k)
				}
				mine = &cards[i]
			}
		}
		if mine == nil {
			t.Errorf("no card shows the key %q", k)
			continue
		}
		// Links only read: each answers, writes nothing, and a receipt link is this effect's.
		ev, rc := s.Written(t)
		for _, l := range mine.links {
			p := consoletest.Get(t, c, follow(t, attention, l))
			if p.Status != http.StatusOK {
				t.Errorf("key %q: its link %q answers %d", k, l, p.Status)
			}
			if m := receiptLink.FindStringSubmatch(l); m != nil {
				if got := receiptKey(t, s, m[1]); got != k {
					t.Errorf("key %q: its receipt link %q shows the receipt of %q", k, l, got)
				}
			}
		}
		if e, r := s.Written(t); e != ev || r != rc {
			t.Errorf("key %q: following its links wrote: events %d → %d, receipts %d → %d", k, ev, e, rc, r)
		}
		if len(mine.links) == 0 {
			t.Errorf("key %q: its card links to none of its receipts", k)
		}
		if len(mine.forms) != 1 {
			t.Errorf("key %q: its card has %d forms, want 1", k, len(mine.forms))
			continue
		}
		before := effectStates(t, s, keys)
		f := mine.forms[0]
		form := url.Values{}
		for n, v := range f.fields {
			form[n] = v
		}
		form.Set("to", "failed")
		form.Set("note", "checked the provider: no charge")
		r := consoletest.Post(t, c, follow(t, attention, f.action), form)
		if r.Status != http.StatusSeeOther {
			t.Errorf("key %q: its resolve form (action %q) answered %d: %s", k, f.action, r.Status, html.UnescapeString(tagRe.ReplaceAllString(r.Body, "")))
		}
		after := effectStates(t, s, keys)
		for _, o := range keys {
			switch {
			case o == k && after[o] != store.Failed:
				t.Errorf("key %q: its own form left it %s, want failed", k, after[o])
			case o != k && after[o] != before[o]:
				t.Errorf("key %q: its form changed ANOTHER effect %q: %s → %s", k, o, before[o], after[o])
			}
		}
	}
}

// A card answers for the effect as it showed it: after the page was drawn, the effect was
// resolved failed and a retry left a second attempt ambiguous; the old card's form is refused
// and the second attempt stays ambiguous for someone to check.
func TestStaleCardRefused(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	key := s.AmbiguousCharge(t, "inv_7")
	c, _ := login(t, s, "alice")
	page := consoletest.Get(t, c, s.URL+"/attention")
	cards := effectCards(page.Body)
	if len(cards) != 1 || len(cards[0].forms) != 1 {
		t.Fatalf("Needs attention shows %d cards, want 1 with a form", len(cards))
	}
	if _, err := s.Guard.ResolveEffect(t.Context(), &store.ResolveRequest{Key: key, To: store.Failed, By: "cli:ops"}); err != nil {
		t.Fatal(err)
	}
	s.AmbiguousCharge(t, "inv_7") // the retry: attempt 2, ambiguous again
	ev, rc := s.Written(t)
	f := cards[0].forms[0]
	form := url.Values{"to": {"committed"}}
	for n, v := range f.fields {
		form[n] = v
	}
	r := consoletest.Post(t, c, follow(t, s.URL+"/attention", f.action), form)
	if r.Status != http.StatusConflict || !strings.Contains(r.Body, "changed since your page was drawn") {
		t.Errorf("the stale card's form = %d, want 409 saying the effect changed", r.Status)
	}
	if e, err := s.Guard.Store().Effect(t.Context(), key); err != nil || e.State != store.Ambiguous || e.Attempt != 2 {
		t.Errorf("after the stale form the effect is %+v, %v; want attempt 2 ambiguous", e, err)
	}
	if e, r := s.Written(t); e != ev || r != rc {
		t.Errorf("a stale form wrote: events %d → %d, receipts %d → %d", ev, e, rc, r)
	}
}
