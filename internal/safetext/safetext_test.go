package safetext

import "testing"

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
