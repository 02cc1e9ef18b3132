package cli

import (
	"io"
	"strings"
	"unicode/utf8"

	"github.com/latchkit/latch/internal/safetext"
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
// escape (safetext.Escape: the one marking every human surface uses). In layout mode, tabs and
// newlines (the CLI's own layout) and the three colour sequences the CLI itself writes (green,
// red, reset) are kept.
func termSafe(s string, layout bool) string {
	if layout {
		return safetext.EscapeLayout(s, cliLayout)
	}
	return safetext.Escape(s)
}

// ownColours are the only escape sequences the CLI writes itself (mark).
var ownColours = []string{"\x1b[32m", "\x1b[31m", "\x1b[0m"}

// cliLayout is what the CLI's human output keeps of its own layout.
var cliLayout = &safetext.Layout{Tabs: true, Newlines: true, Sequences: ownColours}

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
