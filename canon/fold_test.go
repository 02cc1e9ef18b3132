package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestFoldRuneIsEncodingJSONFolding holds foldRune to the rule encoding/json matches field names
// by (bytes.EqualFold) for every rune: each rune folds alike with every member of its case
// orbit, and with nothing else.
func TestFoldRuneIsEncodingJSONFolding(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		f := foldRune(r)
		if !bytes.EqualFold([]byte(string(r)), []byte(string(f))) {
			t.Fatalf("foldRune(%U) = %U, which bytes.EqualFold does not match", r, f)
		}
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if foldRune(o) != f {
				t.Fatalf("foldRune(%U) = %U but foldRune(%U) = %U: one orbit, two folds", r, f, o, foldRune(o))
			}
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"destination", "deſtination"}, // U+017F LATIN SMALL LETTER LONG S
		{"kind", "\u212aind"},          // U+212A KELVIN SIGN
		{"straße", "STRAẞE"},           // U+1E9E LATIN CAPITAL LETTER SHARP S
		{"amount", "AMOUNT"},
	} {
		if !equalFold(tc.a, tc.b) || foldHash(tc.a) != foldHash(tc.b) || !bytes.EqualFold([]byte(tc.a), []byte(tc.b)) {
			t.Errorf("%q and %q: equalFold %v, hashes %x %x; want them to fold alike", tc.a, tc.b,
				equalFold(tc.a, tc.b), foldHash(tc.a), foldHash(tc.b))
		}
	}
	for _, tc := range []struct{ a, b string }{{"ss", "ß"}, {"a_b", "ab"}, {"a", "á"}, {"İ", "i"}} {
		if equalFold(tc.a, tc.b) || bytes.EqualFold([]byte(tc.a), []byte(tc.b)) {
			t.Errorf("%q and %q fold alike, want distinct", tc.a, tc.b)
		}
	}
}

// TestFoldClashWithStruct is the smuggling attack: a policy reads canon's value model, an
// executor decodes the canonical bytes into a struct. Before canon refused such objects, the
// policy saw destination=acct_1 and the executor acct_EVIL.
func TestFoldClashWithStruct(t *testing.T) {
	t.Parallel()
	in := []byte(`{"amount":100,"destination":"acct_1","deſtination":"acct_EVIL"}`)
	var target struct {
		Destination string `json:"destination"`
	}
	if err := json.Unmarshal(in, &target); err != nil || target.Destination != "acct_EVIL" {
		t.Fatalf("encoding/json reads destination = %q, %v; the attack premise no longer holds", target.Destination, err)
	}
	_, err := Parse(in)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Parse(%s) error = %v, want a refusal of the two destination keys", in, err)
	}
	if e.Pointer != "/deſtination" || !strings.Contains(e.Reason, `"destination"`) || !strings.Contains(e.Reason, `"de\u017ftination"`) {
		t.Errorf("Parse(%s) = %q at %q, want both keys named at /deſtination", in, e.Reason, e.Pointer)
	}
}

// TestFoldClashManyKeys checks the sorted path (objects of more than 16 keys) and Marshal.
func TestFoldClashManyKeys(t *testing.T) {
	t.Parallel()
	m := map[string]any{}
	var text strings.Builder
	text.WriteString(`{"nested":{`)
	for i := range 40 {
		k := "key_" + strconv.Itoa(i)
		m[k] = int64(i)
		text.WriteString(strconv.Quote(k) + ":" + strconv.Itoa(i) + ",")
	}
	m["KEY_17"] = "evil"
	text.WriteString(`"KEY_17":"evil"}}`)

	_, err := Parse([]byte(text.String()))
	var e *Error
	if !errors.As(err, &e) || e.Pointer != "/nested/KEY_17" || !strings.Contains(e.Reason, `"key_17" and "KEY_17"`) {
		t.Errorf("Parse(40 keys + KEY_17) = %v, want a refusal naming key_17 and KEY_17 at /nested/KEY_17", err)
	}
	_, err = Marshal(map[string]any{"nested": m})
	if !errors.As(err, &e) || e.Pointer != "/nested/key_17" || !strings.Contains(e.Reason, `"KEY_17" and "key_17"`) {
		t.Errorf("Marshal(40 keys + KEY_17) = %v, want a refusal naming KEY_17 and key_17 at /nested/key_17", err)
	}
	delete(m, "KEY_17")
	if _, err := Marshal(map[string]any{"nested": m}); err != nil {
		t.Errorf("Marshal(40 distinct keys) error = %v", err)
	}
}

// FuzzFoldKeys checks canon's rule against encoding/json's on pairs of keys: an object of two
// keys is refused exactly when bytes.EqualFold matches them, and whatever is accepted
// encoding/json decodes field by field to the values canon parsed.
func FuzzFoldKeys(f *testing.F) {
	for _, p := range [][2]string{
		{"destination", "deſtination"}, {"kind", "\u212aind"}, {"ss", "ß"}, {"ß", "ẞ"}, {"a", "A"},
		{"a", "b"}, {"σ", "ς"}, {"ǅ", "ǆ"}, {"", "x"},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		if !utf8.ValidString(k1) || !utf8.ValidString(k2) || k1 == k2 {
			return
		}
		if eq := equalFold(k1, k2); eq != bytes.EqualFold([]byte(k1), []byte(k2)) {
			t.Fatalf("equalFold(%q, %q) = %v, bytes.EqualFold says %v", k1, k2, eq, !eq)
		} else if eq && foldHash(k1) != foldHash(k2) {
			t.Fatalf("foldHash(%q) = %x, foldHash(%q) = %x: equal folds, different hashes", k1, foldHash(k1), k2, foldHash(k2))
		}
		in, err := json.Marshal(map[string]any{k1: "one", k2: "two"})
		if err != nil {
			t.Fatal(err)
		}
		out, err := Canonicalize(in)
		clash := bytes.EqualFold([]byte(k1), []byte(k2))
		switch {
		case clash && err == nil:
			t.Fatalf("Canonicalize(%s) = %s, want the keys %q and %q refused", in, out, k1, k2)
		case !clash && err != nil:
			t.Fatalf("Canonicalize(%s) error = %v", in, err)
		case err == nil:
			checkAccepted(t, in, out)
		}
	})
}

// checkFieldDecoding decodes every object of v (at every depth), whose canonical text is out,
// as encoding/json decodes it into a struct with a single field tagged with one of its keys, and
// checks that the field gets the value canon parsed for that key. That is the one way to ask
// which member encoding/json picks when several could match a field.
func checkFieldDecoding(t *testing.T, v any, out []byte) {
	t.Helper()
	switch x := v.(type) {
	case []any:
		var elems []json.RawMessage
		if err := json.Unmarshal(out, &elems); err != nil || len(elems) != len(x) {
			t.Fatalf("encoding/json reads array %s as %d elements, %v; canon %d", out, len(elems), err, len(x))
		}
		for i := range x {
			checkFieldDecoding(t, x[i], elems[i])
		}
	case map[string]any:
		for k, val := range x {
			if !usableTag(k) {
				continue
			}
			want, err := Marshal(val)
			if err != nil {
				t.Fatalf("Marshal(%v) error = %v", val, err)
			}
			typ := reflect.StructOf([]reflect.StructField{{
				Name: "F", Type: reflect.TypeFor[json.RawMessage](), Tag: reflect.StructTag(`json:` + strconv.Quote(k)),
			}})
			ptr := reflect.New(typ)
			if err := json.Unmarshal(out, ptr.Interface()); err != nil {
				t.Fatalf("encoding/json cannot decode %s into a field %q: %v", out, k, err)
			}
			got := ptr.Elem().Field(0).Interface().(json.RawMessage)
			if !bytes.Equal(got, want) {
				t.Fatalf("encoding/json decodes field %q of %s as %s, canon parsed %s", k, out, got, want)
			}
			checkFieldDecoding(t, val, got)
		}
	}
}

// usableTag reports whether encoding/json takes k as a field name from a struct tag: not empty,
// not "-", no comma (options follow it), and only the characters it allows in a tag name.
func usableTag(k string) bool {
	if k == "" || k == "-" {
		return false
	}
	for _, c := range k {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// TestKeyClashMarked holds Error.KeyClash to exactly the refusals of keys that fold alike, so the
// pipeline can name them invalid_arguments while other refusals stay invalid_argument.
func TestKeyClashMarked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		clash bool
	}{
		{`{"a":{"destination":1,"deſtination":2}}`, true},
		{`{"Amount":1,"amount":2}`, true},
		{`{"a":1,"a":2}`, false},
		{`{"a":0.5}`, false},
		{`{"x":[1,{"k":1,"K":2}]}`, true},
	} {
		_, err := Parse([]byte(tc.in))
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("Parse(%s) = %v, want an *Error", tc.in, err)
		}
		if ce.KeyClash != tc.clash {
			t.Errorf("Parse(%s).KeyClash = %v, want %v (%v)", tc.in, ce.KeyClash, tc.clash, err)
		}
	}
	_, err := Marshal(map[string]any{"Amount": int64(1), "amount": int64(2)})
	var ce *Error
	if !errors.As(err, &ce) || !ce.KeyClash {
		t.Errorf("Marshal(Amount, amount) = %v, want a KeyClash refusal", err)
	}
}
