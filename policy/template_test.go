package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTemplate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src   string
		names []string
	}{
		{"charge:{invoice_id}", []string{"invoice_id"}},
		{"merge:{repo}:{number}", []string{"repo", "number"}},
		{"deploy", nil},
		{"{{literal}}", nil},
		{"{{{a}}}", []string{"a"}},
		{"{a}{a}{_b9}{resource}", []string{"a", "_b9", "resource"}},
		{"é:{x}", []string{"x"}},
	}
	for _, tt := range tests {
		tp, err := ParseTemplate(tt.src)
		if err != nil {
			t.Errorf("ParseTemplate(%q) = %v", tt.src, err)
			continue
		}
		if tp.String() != tt.src || !cmp.Equal(tp.Placeholders(), tt.names) {
			t.Errorf("ParseTemplate(%q) = %q %v, want %q %v", tt.src, tp.String(), tp.Placeholders(), tt.src, tt.names)
		}
	}
	for _, tt := range []struct{ src, msg string }{
		{"", "empty template"},
		{"{", "unclosed { at offset 0"},
		{"a}", "unmatched } at offset 1"},
		{"{a}}", "unmatched } at offset 3"},
		{"{}", "empty placeholder {} at offset 0"},
		{"{a b}", "bad placeholder {a b}"},
		{"{a.b}", "bad placeholder {a.b}"},
		{"{9}", "bad placeholder {9}"},
		{"x{{y}", "unmatched } at offset 4"},
	} {
		if _, err := ParseTemplate(tt.src); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseTemplate(%q) = %v, want an error containing %q", tt.src, err, tt.msg)
		}
	}
}

func TestTemplateRender(t *testing.T) {
	t.Parallel()
	args := map[string]any{
		"invoice_id": "inv_1",
		"number":     int64(-42),
		"empty":      "",
		"flag":       true,
		"null":       nil,
		"list":       []any{"a"},
		"obj":        map[string]any{},
		"int":        7,
	}
	tests := []struct {
		src, resource, want, err string
	}{
		{"charge:{invoice_id}", "", "charge:inv_1", ""},
		{"n:{number}:{{x}}", "", "n:-42:{x}", ""},
		{"r:{resource}:{invoice_id}", "invoice:inv_1", "r:invoice:inv_1:inv_1", ""},
		{"const", "", "const", ""},
		{"{missing}", "", "", "placeholder {missing}: argument missing is missing"},
		{"{empty}", "", "", "placeholder {empty}: argument empty is an empty string"},
		{"{flag}", "", "", "placeholder {flag}: argument flag is a boolean, want a non-empty string or an integer"},
		{"{null}", "", "", "argument null is null"},
		{"{list}", "", "", "argument list is a list"},
		{"{obj}", "", "", "argument obj is an object"},
		{"{int}", "", "", "argument int is a Go int (not a latch value)"},
		{"{resource}", "", "", "placeholder {resource}: the call has no resource"},
	}
	for _, tt := range tests {
		tp, err := ParseTemplate(tt.src)
		if err != nil {
			t.Fatalf("ParseTemplate(%q) = %v", tt.src, err)
		}
		got, err := tp.Render(args, tt.resource)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Render(%q) = %q, %v; want an error containing %q", tt.src, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Render(%q) = %q, %v; want %q", tt.src, got, err, tt.want)
		}
	}
	var nilT *Template
	if _, err := nilT.Render(args, ""); err == nil {
		t.Errorf("(*Template)(nil).Render = nil error, want an error")
	}
	if nilT.String() != "" || nilT.Placeholders() != nil || !nilT.Equal(nil) {
		t.Errorf("nil Template methods misbehave")
	}
}

func TestCheckPattern(t *testing.T) {
	t.Parallel()
	good := []struct {
		p   string
		sep byte
	}{
		{"billing.charge", '.'},
		{"billing.*", '.'},
		{"billing.char*", '.'},
		{"*", '.'},
		{"*.charge", '.'},
		{"billing.**", '.'},
		{"mcp.github.**", '.'},
		{"invoice:*", ':'},
		{"repo:latchkit:**", ':'},
		{"svc:billing-*", ':'},
		{"alice@example.com", ':'},
		{"a.b", ':'}, // '.' is literal text when ':' separates
	}
	for _, tt := range good {
		if err := CheckPattern(tt.p, tt.sep); err != nil {
			t.Errorf("CheckPattern(%q, %q) = %v, want nil", tt.p, tt.sep, err)
		}
	}
	bad := []struct {
		p   string
		sep byte
		msg string
	}{
		{"", '.', "empty pattern"},
		{"billing..charge", '.', "empty segment 1"},
		{".billing", '.', "empty segment 0"},
		{"billing.", '.', "empty segment 1"},
		{"billing.?", '.', "? is not a pattern character"},
		{"bill*ing", '.', "* is allowed only once, at the end"},
		{"*billing", '.', "* is allowed only once, at the end"},
		{"billing**", '.', "* is allowed only once, at the end"},
		{"**", '.', "** needs at least one literal segment"},
		{"**.x", '.', "** is allowed only as the last segment"},
		{"a.**.b", '.', "** is allowed only as the last segment"},
		{"a.*.**", '.', "** is allowed only after literal segments"},
		{"a*.**", '.', "** is allowed only after literal segments"},
		{"a.***", '.', "* is allowed only once"},
		{"a\x00b", ':', "control character U+0000"},
		{"a\xffb", ':', "invalid UTF-8"},
	}
	for _, tt := range bad {
		if err := CheckPattern(tt.p, tt.sep); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("CheckPattern(%q, %q) = %v, want an error containing %q", tt.p, tt.sep, err, tt.msg)
		}
	}
}

// {$request_key} renders the caller's request key and names no argument; a call without a key
// is an error matching ErrNoRequestKey; another $ name, and the key in a resource template, are
// refused.
func TestTemplateRequestKey(t *testing.T) {
	t.Parallel()
	tp, err := ParseTemplate("order:{$request_key}:{sku}")
	if err != nil {
		t.Fatal(err)
	}
	if !tp.UsesRequestKey() || !cmp.Equal(tp.Placeholders(), []string{"sku"}) {
		t.Errorf("UsesRequestKey, Placeholders = %v, %v; want true, [sku]", tp.UsesRequestKey(), tp.Placeholders())
	}
	args := map[string]any{"sku": "a1"}
	if got, err := tp.RenderKeyed(args, "", "k-1"); err != nil || got != "order:k-1:a1" {
		t.Errorf("RenderKeyed = %q, %v; want order:k-1:a1", got, err)
	}
	if _, err := tp.Render(args, ""); !errors.Is(err, ErrNoRequestKey) || !strings.Contains(err.Error(), "{$request_key}") {
		t.Errorf("Render without a key = %v, want ErrNoRequestKey naming the placeholder", err)
	}
	if plain, _ := ParseTemplate("order:{sku}"); plain.UsesRequestKey() {
		t.Error("order:{sku} uses the request key")
	}
	for _, src := range []string{"{$key}", "{$}", "{$request_key_2}"} {
		if _, err := ParseTemplate(src); err == nil || !strings.Contains(err.Error(), "the only $ placeholder is {$request_key}") {
			t.Errorf("ParseTemplate(%q) = %v, want unknown $ placeholder", src, err)
		}
	}
	doc := "schema: latch.policy/v1\nactions:\n  a:\n    resource: \"r:{$request_key}\"\n    decision: allow\n"
	if _, err := Parse("latch.yaml", []byte(doc)); err == nil || !strings.Contains(err.Error(), "latch.yaml:4") || !strings.Contains(err.Error(), "only an effect template may") {
		t.Errorf("a resource template with {$request_key}: %v, want a load error at latch.yaml:4", err)
	}
	doc = "schema: latch.policy/v1\nactions:\n  a:\n    effect: \"e:{$request_key}\"\n    decision: allow\n"
	if p, err := Parse("latch.yaml", []byte(doc)); err != nil || !p.Actions["a"].Effect.UsesRequestKey() {
		t.Errorf("an effect template with {$request_key}: %v", err)
	}
}
