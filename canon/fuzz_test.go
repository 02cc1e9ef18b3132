package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// FuzzCanonicalize checks properties, not examples: whatever is accepted canonicalizes to a
// fixed point that round-trips through Parse and Marshal and that encoding/json reads as the
// same value; whatever is refused is refused by every entry point with a well-formed *Error;
// and nothing encoding/json calls invalid syntax is accepted. The corpus seeds it.
func FuzzCanonicalize(f *testing.F) {
	for _, c := range readCorpus(f) {
		f.Add(c.in)
	}
	for _, s := range []string{"", "\"\xff\"", "\"a\tb\"", "{\"\xed\xa0\x80\":1}", `"\ud800\udc00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			checkRefusal(t, in, err)
			return
		}
		if !json.Valid(in) {
			t.Fatalf("Canonicalize(%q) = %q, but encoding/json says the input is not valid JSON", in, out)
		}
		if !utf8.Valid(out) {
			t.Fatalf("Canonicalize(%q) = %q, not valid UTF-8", in, out)
		}
		if len(out) > len(in) {
			t.Fatalf("Canonicalize(%q) = %q, longer than its input", in, out)
		}
		checkAccepted(t, in, out)
	})
}

// FuzzCompareKeys checks the key order against a reference: encode both keys as UTF-16 and
// compare the code units.
func FuzzCompareKeys(f *testing.F) {
	for _, s := range []string{"", "a", "\ue000", "\U00010000", "\uffff", "\U0010ffff", "ab", "é", "€"} {
		f.Add(s, "a")
		f.Add("\uffff", s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		want := compareUnits(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := compareKeys(a, b); got != want {
			t.Errorf("compareKeys(%q, %q) = %d, want %d", a, b, got, want)
		}
		if got := compareKeys([]byte(a), []byte(b)); got != want {
			t.Errorf("compareKeys([]byte(%q), []byte(%q)) = %d, want %d", a, b, got, want)
		}
	})
}

func compareUnits(a, b []uint16) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

// FuzzMarshalObject builds a map from fuzzed keys and strings and checks that Marshal's output
// is canonical, parses back to the same map, and that a map with an invalid string is refused
// at its key.
func FuzzMarshalObject(f *testing.F) {
	f.Add("a", "b", "x", int64(1))
	f.Add("\ue000", "\U0001F600", "\u2028", int64(-MaxSafeInt))
	f.Add("~/", "", "\x00\x1f\"\\", int64(MaxSafeInt+1))
	f.Fuzz(func(t *testing.T, k1, k2, s string, n int64) {
		build := func() map[string]any {
			m := map[string]any{k1: s}
			m[k2] = []any{n, k1} // replaces s when the keys are equal
			return m
		}
		m := build()
		out, err := Marshal(m)
		valid := utf8.ValidString(k1) && utf8.ValidString(k2) && n >= -MaxSafeInt && n <= MaxSafeInt &&
			(k1 == k2 || utf8.ValidString(s))
		var ce *Error
		if err != nil && k1 != k2 && errors.As(err, &ce) && ce.KeyClash {
			// Two keys that fold alike are refused on purpose; FuzzFoldKeys holds that refusal to
			// exactly the keys encoding/json would merge.
			return
		}
		if err != nil {
			if valid {
				t.Fatalf("Marshal(%#v) error = %v", m, err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Marshal(%#v) error %v does not match ErrInvalid", m, err)
			}
			return
		}
		if !valid {
			t.Fatalf("Marshal(%#v) = %q, want an error", m, out)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Canonicalize(%q) = %q, %v, want it unchanged", out, again, err)
		}
		v, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(%q) error = %v", out, err)
		}
		if diff := cmp.Diff(build(), v); diff != "" {
			t.Errorf("Parse(Marshal(m)) differs (-want +got):\n%s", diff)
		}
		if strings.Contains(string(out), "\n") {
			t.Errorf("Marshal(%#v) = %q, contains a raw newline", m, out)
		}
	})
}
