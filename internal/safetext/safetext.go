// Package safetext makes strings that came from outside latch (approval ids, effect keys, action
// names, approver names, arguments, notes, error text) safe to show a person or to put into an
// error message or a receipt: text shown must not carry a terminal escape sequence, a bidi
// override or a zero-width character to whoever reads it (Escape, which the CLI and the console
// both use), and a receipt must be valid UTF-8 to be hashed at all (Valid).
package safetext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Quote returns s as it is when it is plain printable text — graphic, no spaces, no quotes, no
// backslashes, no format (bidi, zero-width) characters — and Go-quoted (%q) otherwise, so that
// an id or a key in an error message reads as itself and a hostile one reads as escapes.
func Quote(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r == utf8.RuneError || r == '"' || r == '\\' || r == ' ' || !unicode.IsGraphic(r) ||
			unicode.Is(unicode.Cf, r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Valid returns s with every byte that is not part of valid UTF-8 written as the escape \xNN,
// so that the text can be hashed and stored while the original bytes stay readable. Valid UTF-8
// is returned unchanged.
func Valid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&0xf, 16))
			i++
			continue
		}
		b.WriteString(s[i : i+n])
		i += n
	}
	return b.String()
}
