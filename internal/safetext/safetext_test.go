package safetext

import (
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"apr_0123", "apr_0123"},
		{"charge:inv_88", "charge:inv_88"},
		{"merge:acme/checkout:4471", "merge:acme/checkout:4471"},
		{"", `""`},
		{"a b", `"a b"`},
		{"apr_\x1b]52;c;aGk=\x07", `"apr_\x1b]52;c;aGk=\a"`},
		{"key\u202eevil", `"key\u202eevil"`},
		{"zero\u200bwidth", `"zero\u200bwidth"`},
		{"bad\xff", `"bad\xff"`},
		{`say "hi"`, `"say \"hi\""`},
		{"café", "café"},
	} {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"alice", "alice"},
		{"café", "café"},
		{"al\xffice", `al\xffice`},
		{"\xc3", `\xc3`},
		{"a\xe2\x82", `a\xe2\x82`},
	} {
		if got := Valid(c.in); got != c.want {
			t.Errorf("Valid(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestEscape(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"acct_123", "acct_123"},
		{"refund agreed, see “ticket 7”", "refund agreed, see “ticket 7”"},
		{"日本 café ✓", "日本 café ✓"},
		{"acct_1\u200b23", `acct_1\u200b23`},
		{"gpj\u202eexe.jpg", `gpj\u202eexe.jpg`},
		{"a\tb\nc\rd", `a\tb\nc\rd`},
		{"bell\x07 esc\x1b[2J del\x7f", `bell\x07 esc\x1b[2J del\x7f`},
		{"csi\u009b", `csi\u009b`},
		{"bom\ufeff line\u2028 para\u2029", `bom\ufeff line\u2028 para\u2029`},
		{"tag\U000e0041", `tag\U000e0041`},
		{"bad\xff", `bad\xff`},
		{`back\slash "quoted"`, `back\slash "quoted"`},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := Escape(Escape(c.in)); again != Escape(c.in) {
			t.Errorf("Escape is not idempotent on %q: %q", c.in, again)
		}
		var joined string
		Pieces(c.in, func(s string) { joined += s }, func(s string) { joined += s })
		if joined != c.want {
			t.Errorf("Pieces(%q) joined = %q, want %q", c.in, joined, c.want)
		}
	}
	l := &Layout{Tabs: true, Newlines: true, Sequences: []string{"\x1b[0m"}}
	if got, want := EscapeLayout("a\tb\n\x1b[0m\x1b[2J\r", l), "a\tb\n\x1b[0m\\x1b[2J\\r"; got != want {
		t.Errorf("EscapeLayout = %q, want %q", got, want)
	}
}

func TestPiecesMarksEachEscape(t *testing.T) {
	t.Parallel()
	var got []string
	Pieces("a\u200bb\u202e", func(s string) { got = append(got, "text:"+s) }, func(s string) { got = append(got, "esc:"+s) })
	want := []string{"text:a", `esc:\u200b`, "text:b", `esc:\u202e`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Pieces = %q, want %q", got, want)
	}
}
