package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the .want and .err files in testdata/cases from the current results")

// corpusCase is one case of testdata/cases: an input with either its canonical form or the
// text of its refusal.
type corpusCase struct {
	file string // the txtar archive
	name string
	in   []byte
	want string // canonical output, if accepted
	err  string // (*Error).Error(), if refused
}

// readCorpus reads every case in testdata/cases/*.txtar. Expected outputs lose the newline
// txtar adds; canonical JSON never ends in a raw newline, so nothing real is lost.
func readCorpus(tb testing.TB) []corpusCase {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "cases", "*.txtar"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no corpus in testdata/cases: %v", err)
	}
	var cases []corpusCase
	for _, file := range files {
		a, err := txtar.ParseFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		byName := map[string]int{}
		for _, f := range a.Files {
			ext := path.Ext(f.Name)
			base := strings.TrimSuffix(f.Name, ext)
			i, ok := byName[base]
			if !ok {
				i = len(cases)
				byName[base] = i
				cases = append(cases, corpusCase{file: file, name: base})
			}
			c := &cases[i]
			switch ext {
			case ".json":
				c.in = f.Data
			case ".want":
				c.want = strings.TrimSuffix(string(f.Data), "\n")
			case ".err":
				c.err = strings.TrimSuffix(string(f.Data), "\n")
			default:
				tb.Fatalf("%s: unknown file %s", file, f.Name)
			}
		}
	}
	for _, c := range cases {
		if c.in == nil || (c.want == "") == (c.err == "") {
			tb.Fatalf("%s: case %s needs a .json and exactly one of .want or .err", c.file, c.name)
		}
	}
	return cases
}

func TestCorpus(t *testing.T) {
	cases := readCorpus(t)
	if *update {
		updateCorpus(t, cases)
		return
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.file)+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			out, err := Canonicalize(c.in)
			if c.err != "" {
				if err == nil {
					t.Fatalf("Canonicalize(%q) = %q, want error %q", c.in, out, c.err)
				}
				if err.Error() != c.err {
					t.Errorf("Canonicalize(%q) error = %q, want %q", c.in, err, c.err)
				}
				checkRefusal(t, c.in, err)
				return
			}
			if err != nil {
				t.Fatalf("Canonicalize(%q) error = %v, want %q", c.in, err, c.want)
			}
			if string(out) != c.want {
				t.Errorf("Canonicalize(%q) = %q, want %q", c.in, out, c.want)
			}
			checkAccepted(t, c.in, out)
		})
	}
}

// updateCorpus rewrites the expectations from the current behaviour (go test ./canon -run TestCorpus -update).
func updateCorpus(t *testing.T, cases []corpusCase) {
	t.Helper()
	results := map[string]map[string][]byte{}
	for _, c := range cases {
		out, err := Canonicalize(c.in)
		m := results[c.file]
		if m == nil {
			m = map[string][]byte{}
			results[c.file] = m
		}
		if err != nil {
			m[c.name] = []byte(err.Error() + "\n")
		} else {
			m[c.name] = append(out, '\n')
		}
	}
	for file, m := range results {
		a, err := txtar.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var files []txtar.File
		for _, f := range a.Files {
			ext := path.Ext(f.Name)
			base := strings.TrimSuffix(f.Name, ext)
			if ext != ".json" {
				continue
			}
			files = append(files, f)
			data := m[base]
			if bytes.HasPrefix(data, []byte("at ")) {
				files = append(files, txtar.File{Name: base + ".err", Data: data})
			} else {
				files = append(files, txtar.File{Name: base + ".want", Data: data})
			}
		}
		a.Files = files
		if err := os.WriteFile(file, txtar.Format(a), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkAccepted checks what every accepted input must satisfy, beyond its expected output:
// the other entry points agree, the output is a fixed point, and encoding/json reads the
// input and the output as the same value.
func checkAccepted(t *testing.T, in, out []byte) {
	t.Helper()
	v, err := Parse(in)
	if err != nil {
		t.Fatalf("Parse(%q) error = %v, but Canonicalize accepted it", in, err)
	}
	v2, out2, err := ParseCanonical(in)
	if err != nil {
		t.Fatalf("ParseCanonical(%q) error = %v, but Canonicalize accepted it", in, err)
	}
	if !bytes.Equal(out2, out) {
		t.Errorf("ParseCanonical(%q) bytes = %q, want %q (as Canonicalize)", in, out2, out)
	}
	if diff := cmp.Diff(v, v2); diff != "" {
		t.Errorf("ParseCanonical(%q) value differs from Parse (-Parse +ParseCanonical):\n%s", in, diff)
	}
	again, err := Canonicalize(out)
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("Canonicalize(%q) = %q, %v, want %q (idempotence)", out, again, err, out)
	}
	vOut, err := Parse(out)
	if err != nil {
		t.Fatalf("Parse(%q) error = %v on canonical output", out, err)
	}
	if diff := cmp.Diff(v, vOut); diff != "" {
		t.Errorf("Parse(canonical) differs from Parse(input) %q (-input +canonical):\n%s", in, diff)
	}
	m, err := Marshal(vOut)
	if err != nil || !bytes.Equal(m, out) {
		t.Errorf("Marshal(Parse(%q)) = %q, %v, want %q (round trip)", out, m, err, out)
	}
	checkFieldDecoding(t, v, out)
	for _, text := range [][]byte{in, out} {
		std, err := decodeStd(text)
		if err != nil {
			t.Fatalf("encoding/json cannot decode %q: %v", text, err)
		}
		if diff := cmp.Diff(v, std); diff != "" {
			t.Errorf("encoding/json reads %q differently (-canon +encoding/json):\n%s", text, diff)
		}
	}
}

// checkRefusal checks what every refusal must satisfy: all parsing entry points refuse alike,
// and the error is a well-formed *Error matching ErrInvalid.
func checkRefusal(t *testing.T, in []byte, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Canonicalize(%q) error %T is not *Error", in, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(%v, ErrInvalid) = false, want true", err)
	}
	if e.Pointer != "" && !strings.HasPrefix(e.Pointer, "/") {
		t.Errorf("Canonicalize(%q) pointer = %q, want \"\" or a leading /", in, e.Pointer)
	}
	if v, perr := Parse(in); perr == nil || perr.Error() != err.Error() {
		t.Errorf("Parse(%q) = %v, %v, want error %v", in, v, perr, err)
	}
	if v, out, perr := ParseCanonical(in); perr == nil || perr.Error() != err.Error() || v != nil || out != nil {
		t.Errorf("ParseCanonical(%q) = %v, %q, %v, want nil, nil, %v", in, v, out, perr, err)
	}
}

// decodeStd decodes JSON with encoding/json into the value model (numbers as int64).
func decodeStd(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("trailing data")
	}
	return fromStd(v)
}

func fromStd(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		return x.Int64()
	case []any:
		for i := range x {
			e, err := fromStd(x[i])
			if err != nil {
				return nil, err
			}
			x[i] = e
		}
	case map[string]any:
		for k := range x {
			e, err := fromStd(x[k])
			if err != nil {
				return nil, err
			}
			x[k] = e
		}
	}
	return v, nil
}

// TestRefusedBytes covers refusals whose input a text file cannot hold well: raw control
// characters, invalid UTF-8, empty input, deep nesting.
func TestRefusedBytes(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	deepObj := strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1)
	tests := []struct {
		in   string
		want string
	}{
		{"", `at (root): syntax error at offset 0: unexpected end of input looking for beginning of value`},
		{"\xef\xbb\xbf{}", `at (root): syntax error at offset 0: invalid character 0xef looking for beginning of value`},
		{"\"a\tb\"", `at (root): syntax error at offset 2: invalid character 0x09 in string literal`},
		{"{\"k\":\"\\n\x01\"}", `at /k: syntax error at offset 8: invalid character 0x01 in string literal`},
		{"\"\xff\"", `at (root): invalid UTF-8 at offset 1`},
		{"[\"ok\",\"a\xc3\"]", `at /1: invalid UTF-8 at offset 8`},
		{"{\"a\":{\"\xed\xa0\x80\":1}}", `at /a: invalid UTF-8 at offset 7`}, // surrogate encoded in UTF-8
		{"[\"\\n\xc0\xaf\"]", `at /0: invalid UTF-8 at offset 4`},            // overlong '/' after an escape
		{"\"\xf4\x90\x80\x80\"", `at (root): invalid UTF-8 at offset 1`},     // above U+10FFFF
		{"\"abc", `at (root): syntax error at offset 4: unexpected end of input in string literal`},
		{"\"a\\", `at (root): syntax error at offset 3: unexpected end of input in string escape code`},
		{"\"\\u12", `at (root): syntax error at offset 5: unexpected end of input in \u hexadecimal character escape`},
		{"\"\\ud800\\u12", `at (root): syntax error at offset 11: unexpected end of input in \u hexadecimal character escape`},
		{"{\"a\":1", `at (root): syntax error at offset 6: unexpected end of input after object key:value pair`},
		{"{\"a\"", `at (root): syntax error at offset 4: unexpected end of input after object key`},
		{"-", `at (root): syntax error at offset 1: unexpected end of input in numeric literal`},
		{"nul", `at (root): syntax error at offset 3: unexpected end of input in literal null`},
		{"1.5x", `at (root): non-integer number 1.5`},
		{deep, `at ` + strings.Repeat("/0", maxDepth) + `: nesting deeper than 1000`},
		{deepObj, `at ` + strings.Repeat("/a", maxDepth) + `: nesting deeper than 1000`},
	}
	for _, tt := range tests {
		out, err := Canonicalize([]byte(tt.in))
		if err == nil {
			t.Errorf("Canonicalize(%q) = %q, want error %q", tt.in, out, tt.want)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("Canonicalize(%q) error = %q, want %q", tt.in, err, tt.want)
		}
		checkRefusal(t, []byte(tt.in), err)
	}
}

func TestNestingLimit(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	out, err := Canonicalize([]byte(in))
	if err != nil || string(out) != in {
		t.Errorf("Canonicalize(%d nested arrays) = %.20q..., %v, want the input", maxDepth, out, err)
	}
}

func TestBoundaryIntegers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want any // int64, or the refusal text
	}{
		{"9007199254740991", int64(MaxSafeInt)},
		{"-9007199254740991", int64(-MaxSafeInt)},
		{"9007199254740992", "at (root): integer out of safe range 9007199254740992"},
		{"-9007199254740992", "at (root): integer out of safe range -9007199254740992"},
		{"9007199254740993", "at (root): integer out of safe range 9007199254740993"},
		{"9999999999999999", "at (root): integer out of safe range 9999999999999999"},
		{"10000000000000000", "at (root): integer out of safe range 10000000000000000"},
		{"9223372036854775808", "at (root): integer out of safe range 9223372036854775808"},
		{"255", int64(255)},
		{"256", int64(256)},
	}
	for _, tt := range tests {
		v, err := Parse([]byte(tt.in))
		if want, ok := tt.want.(string); ok {
			if err == nil || err.Error() != want {
				t.Errorf("Parse(%q) = %v, %v, want error %q", tt.in, v, err, want)
			}
			continue
		}
		if err != nil || v != tt.want {
			t.Errorf("Parse(%q) = %v, %v, want %v", tt.in, v, err, tt.want)
		}
	}
}

func TestParseValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want any
	}{
		{`null`, nil},
		{`true`, true},
		{`"a\"b"`, `a"b`},
		{`[]`, []any{}},
		{`{}`, map[string]any{}},
		{`{"b":[1,"x",null,false,{"c":-3}],"a":"\u00e9"}`, map[string]any{
			"a": "é",
			"b": []any{int64(1), "x", nil, false, map[string]any{"c": int64(-3)}},
		}},
	}
	for _, tt := range tests {
		got, err := Parse([]byte(tt.in))
		if err != nil {
			t.Errorf("Parse(%q) error = %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestParseDoesNotAlias checks that parsed strings do not change when the caller reuses the
// input buffer, including above the size where strings are copied one by one.
func TestParseDoesNotAlias(t *testing.T) {
	t.Parallel()
	for _, pad := range []int{0, 70 << 10} {
		in := []byte(`{"k":"value","e":"\u00e9` + strings.Repeat(" ", pad) + `"}`)
		v, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"k": "value", "e": "é" + strings.Repeat(" ", pad)}
		for i := range in {
			in[i] = 'X'
		}
		if diff := cmp.Diff(want, v); diff != "" {
			t.Errorf("Parse value changed with its input buffer (pad %d) (-want +got):\n%s", pad, diff)
		}
	}
}

func TestCompareKeys(t *testing.T) {
	t.Parallel()
	// In UTF-16 order; byte order would put the last two first.
	ordered := []string{"", "\x00", "\r", "1", "A", "a", "ab", "\u0080", "ö", "\u07ff", "\u0800", "€", "\ud7ff", "\U00010000", "😀", "\U0010ffff", "\ue000", "\ufb33", "\uffff"}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := compareKeys(a, b); got != want {
				t.Errorf("compareKeys(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func TestError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Pointer: "/items/0", Reason: "non-integer number 0.1"}, "at /items/0: non-integer number 0.1"},
		{&Error{Pointer: "", Reason: "invalid UTF-8"}, "at (root): invalid UTF-8"},
		{&Error{Pointer: "/a~1b/~0", Reason: "negative zero -0"}, "at /a~1b/~0: negative zero -0"},
		{&Error{Pointer: "/x\n/y\u007f", Reason: "r"}, `at "/x\n/y\x7f": r`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("(%#v).Error() = %q, want %q", tt.err, got, tt.want)
		}
		if !errors.Is(tt.err, ErrInvalid) {
			t.Errorf("errors.Is(%v, ErrInvalid) = false, want true", tt.err)
		}
		if errors.Is(tt.err, errors.New("invalid value")) {
			t.Errorf("errors.Is(%v, another error) = true, want false", tt.err)
		}
	}
}

func TestSum(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{`{"a":1}`, "sha256:015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"},
	}
	for _, tt := range tests {
		if got := Sum([]byte(tt.in)); got != tt.want {
			t.Errorf("Sum(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestSameContentSameBytes checks the point of the package: texts that differ only in
// key order, whitespace and escaping hash the same.
func TestSameContentSameBytes(t *testing.T) {
	t.Parallel()
	texts := []string{
		`{"amount":24900,"currency":"EUR","note":"café /1"}`,
		`{ "note" : "caf\u00e9 \/1", "currency":"\u0045UR", "amount": 24900 }`,
		"{\n\t\"currency\": \"EUR\",\n\t\"note\": \"caf\u00e9 /1\",\n\t\"amount\": 24900\n}",
	}
	var sums []string
	for _, text := range texts {
		out, err := Canonicalize([]byte(text))
		if err != nil {
			t.Fatalf("Canonicalize(%q) error = %v", text, err)
		}
		sums = append(sums, Sum(out))
	}
	for _, s := range sums[1:] {
		if s != sums[0] {
			t.Errorf("sums of one content differ: %q", sums)
			break
		}
	}
}

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		v    any
		want Kind
	}{
		{nil, KindNull}, {true, KindBool}, {"", KindString}, {int64(-3), KindInt}, {[]any{}, KindList},
		{map[string]any{}, KindObject}, {3.5, KindOther}, {3, KindOther}, {[]string{}, KindOther},
	} {
		if got := KindOf(c.v); got != c.want {
			t.Errorf("KindOf(%#v) = %d, want %d", c.v, got, c.want)
		}
	}
	// One bit each, so that sets combine.
	all := KindNull | KindBool | KindString | KindInt | KindList | KindObject | KindOther
	if all != 1<<7-1 {
		t.Errorf("the kinds are not seven distinct bits: %08b", all)
	}
}
