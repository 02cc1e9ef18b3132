package cli

import (
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Terminal safety. Arguments, ids, names, keys and error texts come from agents and callers, and
// human output puts them on an operator's terminal. A raw ESC can move the cursor, rewrite what
// was printed or (OSC 52) write the clipboard; a bidi override (U+202E) makes "gpj.exe" read as
// "exe.jpg". Every human-readable byte the CLI writes goes through termSafe: on stdout and
// stderr through a termWriter, and in table cells directly, so that column widths are measured
// on what is printed. JSON output is written past it (rawWriter) and stays exactly as stored:
// JSON strings already escape control characters, and a bidi character inside a JSON string is
// data, not layout.

// termSafe returns s with every character that could act on a terminal written as a visible
// escape: C0 controls and DEL as \xNN (\t, \n and \r in Go's spelling), C1 controls, bidi and
// other format characters (zero-width, BOM) and line or paragraph separators as \uXXXX, and
// bytes that are not UTF-8 as \xNN. In layout mode, tabs and newlines (the CLI's own layout) and
// the three colour sequences the CLI itself writes (green, red, reset) are kept.
func termSafe(s string, layout bool) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, n, layout) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		if layout && s[i] == 0x1b {
			if sgr := ownColour(s[i:]); sgr != "" {
				b.WriteString(sgr)
				i += len(sgr)
				continue
			}
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !needsEscape(r, n, layout) {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x` + hex2(s[i]))
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80:
			b.WriteString(`\x` + hex2(byte(r)))
		case r <= 0xffff:
			b.WriteString(`\u` + pad(strconv.FormatInt(int64(r), 16), 4))
		default:
			b.WriteString(`\U` + pad(strconv.FormatInt(int64(r), 16), 8))
		}
		i += n
	}
	return b.String()
}

// needsEscape reports whether the character r (n bytes of UTF-8; RuneError of 1 byte is an
// invalid byte) must be escaped.
func needsEscape(r rune, n int, layout bool) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true
	case r == '\t' || r == '\n':
		return !layout
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

// ownColours are the only escape sequences the CLI writes itself (mark).
var ownColours = []string{"\x1b[32m", "\x1b[31m", "\x1b[0m"}

func ownColour(s string) string {
	for _, c := range ownColours {
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

// termWriter writes human output through termSafe (layout mode). A character or one of the
// CLI's colour sequences split across two writes is held until its end arrives.
type termWriter struct {
	w     io.Writer
	carry []byte
}

func newTermWriter(w io.Writer) *termWriter { return &termWriter{w: w} }

func (t *termWriter) Write(p []byte) (int, error) {
	buf := append(t.carry, p...)
	t.carry = nil
	keep := len(buf)
	for k := 1; k <= utf8.UTFMax && k <= len(buf); k++ {
		c := buf[len(buf)-k]
		if c < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(buf[len(buf)-k:]) {
				keep = len(buf) - k
			}
			break
		}
	}
	if i := strings.LastIndexByte(string(buf[:keep]), 0x1b); i >= 0 {
		tail := string(buf[i:keep])
		for _, c := range ownColours {
			if len(tail) < len(c) && strings.HasPrefix(c, tail) {
				keep = i
				break
			}
		}
	}
	if keep < len(buf) {
		t.carry = append([]byte(nil), buf[keep:]...)
	}
	if keep == 0 {
		return len(p), nil
	}
	if _, err := io.WriteString(t.w, termSafe(string(buf[:keep]), true)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// flush writes what is held back, escaped.
func (t *termWriter) flush() {
	if len(t.carry) > 0 {
		io.WriteString(t.w, termSafe(string(t.carry), true))
		t.carry = nil
	}
}

// rawWriter is w without the terminal escaping, for JSON output, which must stay exact.
func rawWriter(w io.Writer) io.Writer {
	if t, ok := w.(*termWriter); ok {
		t.flush()
		return t.w
	}
	return w
}
