// Package hostile is the table of agent-shaped strings latch's threat tests send to every
// surface that routes or renders text it did not write: effect keys, argument values, action
// names. A surface test ranges over Keys (and Texts) and asserts that each one reaches only its
// own effect and reads, to a person, as what it is. It is imported by tests only.
package hostile

import "strings"

// Shape is one hostile string and what it tries.
type Shape struct {
	Name  string
	Value string
}

// Keys are effect keys (and ids) an agent controls, each shaped to reach another effect through
// a URL, a path, a form or a display: percent escapes a router decodes, dot segments a client or
// proxy normalizes, the path and fragment separators, and text that reads as another key.
var Keys = []Shape{
	{"plain", "pay:inv88"},
	{"percent-encoded digits", "pay:inv%38%38"},
	{"percent-encoded slash", "pay:a%2Fb"},
	{"percent-encoded percent", "pay:%2538%2538"},
	{"dot segment", "pay:x/../inv88"},
	{"dot segment at the start", "../effects/pay:inv88"},
	{"single dot", "./pay:inv88"},
	{"slash", "pay/inv88"},
	{"trailing slash", "pay:inv88/"},
	{"fragment", "pay:inv88#x"},
	{"query", "pay:inv88?x=1"},
	{"backslash", `pay:x\..\inv88`},
	{"space", "pay: inv88"},
	{"plus", "pay:inv+88"},
	{"ampersand", "pay:a&resolve=inv88"},
	{"bidi override", "pay:inv\u202e88"},
	{"zero-width space", "pay:inv\u200b88"},
	{"zero-width joiner", "pay:inv88\u200d"},
	{"escape sequence", "pay:\x1b[2Jinv88"},
	{"newline", "pay:inv\n88"},
	{"tab", "pay:\tinv88"},
	{"html", `pay:<img src=x onerror=alert(1)>`},
	{"quotes", `pay:"inv88'`},
	{"slack mention", "pay:<!channel>"},
	{"slack link", "pay:<https://evil.example|inv88>"},
	{"unicode", "pay:façture-€-日本"},
	{"long", "pay:" + strings.Repeat("x", 4000)},
}

// Texts are argument values and names an agent controls, shaped to mislead a person who reads
// them: invisible characters that make one value read as another, controls that rewrite a
// terminal, markup.
var Texts = []Shape{
	{"zero-width inside", "acct_1\u200b23"},
	{"bidi override", "acct_\u202e321"},
	{"bidi isolate", "acct_\u2066123\u2069"},
	{"escape sequence", "acct_\x1b[31m123"},
	{"carriage return", "acct_999\racct_123"},
	{"html", "<b>acct_123</b>"},
	{"slack markup", "*acct_123* <!here>"},
}

// Invisible returns the characters of s that a person cannot see for what they are — controls,
// zero-width and bidi characters — which no rendering for people may carry through as such.
func Invisible(s string) []rune {
	var out []rune
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x200b || r == 0x200c || r == 0x200d ||
			r == 0x2060 || r == 0xfeff || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f {
			out = append(out, r)
		}
	}
	return out
}

// DeepJSON is a JSON object nested depth levels deep.
func DeepJSON(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}
