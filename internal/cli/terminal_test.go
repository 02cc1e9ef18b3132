package cli

import "testing"

func TestTermSafe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, layout, cell string
	}{
		{"plain id_1 €2,500 ✓ — ß", "plain id_1 €2,500 ✓ — ß", "plain id_1 €2,500 ✓ — ß"},
		{"a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		{"\x1b]52;c;aGk=\x07", `\x1b]52;c;aGk=\x07`, `\x1b]52;c;aGk=\x07`},
		{"gpj\u202e.exe", `gpj\u202e.exe`, `gpj\u202e.exe`},
		{"\u2066x\u2069\u200f\u200b\ufeff", `\u2066x\u2069\u200f\u200b\ufeff`, `\u2066x\u2069\u200f\u200b\ufeff`},
		{"csi\u009b31m osc\u009d", `csi\u009b31m osc\u009d`, `csi\u009b31m osc\u009d`},
		{"bad\xff\x9b", `bad\xff\x9b`, `bad\xff\x9b`},
		{"del\x7f cr\r", `del\x7f cr\r`, `del\x7f cr\r`},
		{"line\u2028sep", `line\u2028sep`, `line\u2028sep`},
		{"tab\tnl\n", "tab\tnl\n", `tab\tnl\n`},
		{"\x1b[32m✓\x1b[0m", "\x1b[32m✓\x1b[0m", `\x1b[32m✓\x1b[0m`},
		{"\x1b[8mhidden", `\x1b[8mhidden`, `\x1b[8mhidden`},
		{"\U000e0041 tag", `\U000e0041 tag`, `\U000e0041 tag`},
	}
	for _, tt := range tests {
		if got := termSafe(tt.in, true); got != tt.layout {
			t.Errorf("termSafe(%q, layout) = %q, want %q", tt.in, got, tt.layout)
		}
		if got := cell(tt.in); got != tt.cell {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.cell)
		}
	}
}

// TestTermWriterSplitWrites writes hostile text a byte at a time: a character or escape split
// across writes is still escaped whole, and nothing is lost.
func TestTermWriterSplitWrites(t *testing.T) {
	t.Parallel()
	in := "ok ✓ \u202e \x1b]52;c;aGk=\x07 \x1b[31m✗\x1b[0m €"
	var out stringsBuilder
	w := newTermWriter(&out)
	for i := 0; i < len(in); i++ {
		if _, err := w.Write([]byte{in[i]}); err != nil {
			t.Fatal(err)
		}
	}
	w.flush()
	if want := termSafe(in, true); out.String() != want {
		t.Errorf("byte-by-byte writes = %q, want %q", out.String(), want)
	}
}

type stringsBuilder struct{ b []byte }

func (s *stringsBuilder) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }
func (s *stringsBuilder) String() string              { return string(s.b) }
