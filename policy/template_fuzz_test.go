package policy

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzTemplate asserts properties of ParseTemplate and Render: a refusal names its byte offset;
// a parsed template keeps its source and lists distinct, well-formed placeholders; rendering
// with a marker per placeholder and escaping the literal text back gives a template that parses
// to the same placeholders and renders exactly as the original for any arguments (the literal
// text survives and the placeholders sit where they were); a missing argument is refused naming
// its placeholder.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"charge:{invoice_id}", "merge:{repo}:{number}", "deploy", "{{literal}}", "{{{a}}}",
		"{a}{a}{_b9}{resource}", "é:{x}", "{", "a}", "{a}}", "{}", "{a b}", "x{{y}", "}}{{",
	} {
		f.Add(s, "inv_1", int64(-42), "invoice:1")
	}
	f.Fuzz(func(t *testing.T, src, sval string, ival int64, resource string) {
		tp, err := ParseTemplate(src)
		if err != nil {
			if src != "" && !strings.Contains(err.Error(), "at offset ") {
				t.Fatalf("ParseTemplate(%q) = %v, want the byte offset named", src, err)
			}
			return
		}
		if tp.String() != src {
			t.Fatalf("ParseTemplate(%q).String() = %q", src, tp.String())
		}
		names := tp.Placeholders()
		for i, n := range names {
			if !isIdent(n) || slices.Contains(names[:i], n) {
				t.Fatalf("ParseTemplate(%q).Placeholders() = %q: %q is malformed or repeated", src, names, n)
			}
		}
		if strings.ContainsAny(src, "\x00\x01") {
			return // the markers below must not occur in the literal text
		}
		// Render with a marker per placeholder, then write the literal text back with its braces
		// escaped and each marker as its placeholder: the source, rebuilt from what rendered.
		marker := func(i int) string { return "\x00" + strconv.Itoa(i) + "\x01" }
		marks := map[string]any{}
		res := ""
		for i, n := range names {
			marks[n] = marker(i)
			if n == ResourcePlaceholder {
				res = marker(i)
			}
		}
		rendered, err := tp.Render(marks, res)
		if err != nil {
			t.Fatalf("Render(%q, markers) = %v", src, err)
		}
		var rebuilt strings.Builder
		for lit, rest, ok := strings.Cut(rendered, "\x00"); ; lit, rest, ok = strings.Cut(rest, "\x00") {
			rebuilt.WriteString(strings.NewReplacer("{", "{{", "}", "}}").Replace(lit))
			if !ok {
				break
			}
			num, after, _ := strings.Cut(rest, "\x01")
			i, err := strconv.Atoi(num)
			if err != nil || i >= len(names) {
				t.Fatalf("Render(%q, markers) = %q: marker %q is not one of ours", src, rendered, num)
			}
			rebuilt.WriteString("{" + names[i] + "}")
			rest = after
		}
		again, err := ParseTemplate(rebuilt.String())
		if err != nil {
			t.Fatalf("ParseTemplate(rebuilt %q of %q) = %v", rebuilt.String(), src, err)
		}
		if !slices.Equal(again.Placeholders(), names) {
			t.Fatalf("rebuilt %q of %q has placeholders %q, want %q", rebuilt.String(), src, again.Placeholders(), names)
		}
		args := map[string]any{}
		for i, n := range names {
			if i%2 == 0 && sval != "" {
				args[n] = sval
			} else {
				args[n] = ival
			}
		}
		want, werr := tp.Render(args, resource)
		got, gerr := again.Render(args, resource)
		if want != got || (werr == nil) != (gerr == nil) {
			t.Fatalf("Render(%q) = %q, %v but the rebuilt %q renders %q, %v", src, want, werr, rebuilt.String(), got, gerr)
		}
		// A missing argument is refused naming its placeholder — when nothing else refuses first:
		// with no resource, or an empty string argument, the whole call already fails, on
		// whichever placeholder comes first.
		if werr != nil {
			return
		}
		for _, n := range names {
			if n == ResourcePlaceholder {
				continue
			}
			without := maps.Clone(args)
			delete(without, n)
			if _, err := tp.Render(without, resource); err == nil || !strings.Contains(err.Error(), "{"+n+"}") {
				t.Fatalf("Render(%q) without %s = %v, want an error naming {%s}", src, n, err, n)
			}
		}
	})
}
