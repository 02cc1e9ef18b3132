package safetext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every character that could change how the text around it reads written
// as a visible escape: C0 controls and DEL as \xNN (\t, \n and \r in Go's spelling), C1
// controls, bidi and other format characters (zero-width, BOM) and line or paragraph separators
// as \uXXXX, and bytes that are not UTF-8 as \xNN. Everything else — letters of any script,
// spaces, punctuation — is kept, so a note or an error reads as written while "acct_1\u200b23"
// can never pass for "acct_123". It is the one marking of agent-supplied text that every
// human surface uses: the CLI's output and the console's pages.
func Escape(s string) string { return EscapeLayout(s, nil) }

// Layout is what EscapeLayout keeps of a writer's own layout: tabs and newlines, and escape
// sequences the writer itself writes (the CLI's colours).
type Layout struct {
	Tabs, Newlines bool
	Sequences      []string
}

// EscapeLayout is Escape keeping what l allows (nil: nothing).
func EscapeLayout(s string, l *Layout) string {
	if !l.needed(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	l.Pieces(s, func(t string) { b.WriteString(t) }, func(e string) { b.WriteString(e) })
	return b.String()
}

// Pieces calls text for each run of s that Escape keeps and escaped for each escape it writes
// instead of a character, in order: a page can mark the escapes (Escape is the pieces joined).
func Pieces(s string, text, escaped func(string)) { (*Layout)(nil).Pieces(s, text, escaped) }

// Pieces is Pieces keeping what l allows (nil: nothing); EscapeLayout is its pieces joined.
func (l *Layout) Pieces(s string, text, escaped func(string)) {
	if l == nil {
		l = &Layout{}
	}
	start := 0
	for i := 0; i < len(s); {
		if s[i] == 0x1b {
			if seq := l.sequence(s[i:]); seq != "" {
				i += len(seq)
				continue
			}
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !l.escapes(r, n) {
			i += n
			continue
		}
		if start < i {
			text(s[start:i])
		}
		escaped(escapeOne(s[i:i+n], r))
		i += n
		start = i
	}
	if start < len(s) {
		text(s[start:])
	}
}

// needed reports whether s holds anything that l escapes (an ESC counts, even one that starts
// a sequence l keeps: Pieces tells them apart).
func (l *Layout) needed(s string) bool {
	if l == nil {
		l = &Layout{}
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == 0x1b || l.escapes(r, n) {
			return true
		}
		i += n
	}
	return false
}

// escapeOne is the escape of the character r, whose bytes are c.
func escapeOne(c string, r rune) string {
	switch {
	case r == utf8.RuneError && len(c) == 1:
		return `\x` + hex2(c[0])
	case r == '\t':
		return `\t`
	case r == '\n':
		return `\n`
	case r == '\r':
		return `\r`
	case r < 0x80:
		return `\x` + hex2(byte(r))
	case r <= 0xffff:
		return `\u` + pad(strconv.FormatInt(int64(r), 16), 4)
	}
	return `\U` + pad(strconv.FormatInt(int64(r), 16), 8)
}

// escapes reports whether the character r (n bytes of UTF-8; RuneError of 1 byte is an invalid
// byte) is written as an escape.
func (l *Layout) escapes(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true
	case r == '\t':
		return !l.Tabs
	case r == '\n':
		return !l.Newlines
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x80:
		return false
	case r <= 0x9f: // C1 controls, among them CSI (U+009B) and OSC (U+009D)
		return true
	}
	// Format characters: the bidi embeddings, overrides and isolates, the marks, zero-width
	// characters, the BOM; and the line and paragraph separators.
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}

// sequence is the one of l's own sequences that s starts with, "" when none.
func (l *Layout) sequence(s string) string {
	if l == nil {
		return ""
	}
	for _, c := range l.Sequences {
		if strings.HasPrefix(s, c) {
			return c
		}
	}
	return ""
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}

func pad(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return strings.Repeat("0", n-len(s)) + s
}
