package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseGateway(t *testing.T) {
	t.Parallel()
	src := "schema: latch.policy/v1\n" +
		"gateway:\n" +
		"  upstreams:\n" +
		"    payments:\n" +
		"      command: [./payments, -v]\n" +
		"      tools:\n" +
		"        quote: { errors_mean: not_executed, read_only: true }\n" +
		"        refund: {}\n" +
		"    files:\n" +
		"      url: http://127.0.0.1:9000/mcp\n"
	pol, err := Parse("latch.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	g := pol.Gateway
	if g == nil {
		t.Fatal("Parse: Gateway is nil")
	}
	p := g.Upstreams["payments"]
	if p == nil || !cmp.Equal(p.Command, []string{"./payments", "-v"}) || p.URL != "" {
		t.Fatalf("payments = %+v, want command [./payments -v]", p)
	}
	if got := p.Tools["quote"]; got.ErrorsMean != ErrorsMeanNotExecuted || !got.ReadOnly {
		t.Errorf("quote = %+v, want errors_mean not_executed, read_only", got)
	}
	if p.Tools["refund"].ReadOnly {
		t.Error("refund is read_only, want the default false")
	}
	if got := p.Tools["refund"].ErrorsMean; got != ErrorsMeanUnknown {
		t.Errorf("refund errors_mean = %q, want the default unknown", got)
	}
	if f := g.Upstreams["files"]; f == nil || f.URL != "http://127.0.0.1:9000/mcp" || f.Command != nil {
		t.Errorf("files = %+v, want the url", f)
	}

	// The section is part of the hash; a policy without one hashes as before.
	other, err := Parse("latch.yaml", []byte(strings.Replace(src, "./payments", "./other", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if other.Hash == pol.Hash {
		t.Error("changing an upstream command left the policy hash unchanged")
	}
	bare, err := Parse("latch.yaml", []byte("schema: latch.policy/v1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := Normalize(bare)["gateway"]; ok {
		t.Error("Normalize of a policy without a gateway section has a gateway key")
	}

	// The separator defaults to "." and, set, is part of the hash.
	if g.Separator != "." {
		t.Errorf("default separator = %q, want .", g.Separator)
	}
	sep, err := Parse("latch.yaml", []byte(strings.Replace(src, "gateway:\n", "gateway:\n  separator: __\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if sep.Gateway.Separator != "__" || sep.Hash == pol.Hash {
		t.Errorf("separator __: got %q, hash changed %v; want __ and a new hash", sep.Gateway.Separator, sep.Hash != pol.Hash)
	}
}

func TestParseGatewayRefusals(t *testing.T) {
	t.Parallel()
	const header = "schema: latch.policy/v1\ngateway:\n"
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string
	}{
		{"not a mapping", "schema: latch.policy/v1\ngateway: [a]\n", 2, 10, "gateway is a list (expected a mapping with upstreams)"},
		{"unknown key", header + "  upstream: {}\n", 3, 3, `unknown key "upstream" in gateway (expected one of upstreams, separator)`},
		{"bad separator", header + "  separator: \"::\"\n", 3, 14, `bad gateway.separator "::" (expected one of ".", "_", "__", "-")`},
		{"bad alias", header + "  upstreams:\n    pay.ments: { url: http://h/ }\n", 4, 5, `bad upstream alias "pay.ments"`},
		{"neither", header + "  upstreams:\n    p: { tools: {} }\n", 4, 5, `upstream "p" has neither command nor url`},
		{"both", header + "  upstreams:\n    p: { url: http://h/, command: [x] }\n", 4, 5, `upstream "p" has both command and url`},
		{"command string", header + "  upstreams:\n    p: { command: ./x }\n", 4, 19, `command in upstream "p" is string "./x" (expected a non-empty list`},
		{"command number", header + "  upstreams:\n    p: { command: [x, 1] }\n", 4, 23, `command in upstream "p" element is integer`},
		{"bad url", header + "  upstreams:\n    p: { url: ftp://h/ }\n", 4, 15, `bad url "ftp://h/" in upstream "p"`},
		{"unknown upstream key", header + "  upstreams:\n    p: { url: http://h/, env: {} }\n", 4, 26, `unknown key "env" in upstream "p" (expected one of command, url, tools, pin)`},
		{"bad errors_mean", header + "  upstreams:\n    p:\n      url: http://h/\n      tools:\n        refund: { errors_mean: never }\n", 7, 32, `bad errors_mean "never" in tool "refund" in upstream "p" (expected unknown or not_executed)`},
		{"unknown tool key", header + "  upstreams:\n    p:\n      url: http://h/\n      tools:\n        refund: { effect: x }\n", 7, 19, `unknown key "effect" in tool "refund"`},
		{"read_only not a bool", header + "  upstreams:\n    p:\n      url: http://h/\n      tools:\n        refund: { read_only: yes please }\n", 7, 30, `read_only in tool "refund"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("latch.yaml", []byte(tt.src))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) = %v, want an *Error", tt.src, err)
			}
			if pe.Line != tt.line || pe.Column != tt.col || !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("Parse(%q) = %d:%d %s, want %d:%d containing %q", tt.src, pe.Line, pe.Column, pe.Msg, tt.line, tt.col, tt.msg)
			}
		})
	}
}

const pinSrc = `schema: latch.policy/v1
gateway:
  upstreams:
    p:
      url: https://h/mcp
      pin:
        tool_schema_sha256:
          refund: "sha256:%s"
        tls_cert_sha256: ["sha256:%s"]
`

func TestParseGatewayPin(t *testing.T) {
	t.Parallel()
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	pol, err := Parse("latch.yaml", fmt.Appendf(nil, pinSrc, a, b))
	if err != nil {
		t.Fatal(err)
	}
	pin := pol.Gateway.Upstreams["p"].Pin
	if pin == nil || pin.ToolSchemaSHA256["refund"] != "sha256:"+a || len(pin.TLSCertSHA256) != 1 || pin.TLSCertSHA256[0] != "sha256:"+b {
		t.Fatalf("pin = %+v", pin)
	}
	// Each pinned hash is part of the policy hash; an unpinned upstream hashes as before.
	for _, other := range [][2]string{{b, b}, {a, a}} {
		o, err := Parse("latch.yaml", fmt.Appendf(nil, pinSrc, other[0], other[1]))
		if err != nil {
			t.Fatal(err)
		}
		if o.Hash == pol.Hash {
			t.Errorf("policies pinning %v and %v have one hash", [2]string{a, b}, other)
		}
	}
	unpinned := "schema: latch.policy/v1\ngateway:\n  upstreams:\n    p:\n      url: https://h/mcp\n"
	u1, err := Parse("latch.yaml", []byte(unpinned))
	if err != nil {
		t.Fatal(err)
	}
	if u1.Hash == pol.Hash {
		t.Error("a pinned and an unpinned upstream have one policy hash")
	}
}

func TestParseGatewayPinRefusals(t *testing.T) {
	t.Parallel()
	const header = "schema: latch.policy/v1\ngateway:\n  upstreams:\n    p:\n"
	h := strings.Repeat("a", 64)
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string
	}{
		{"unknown pin key", header + "      url: https://h/\n      pin: { public_key: x }\n", 6, 14, `unknown key "public_key" in pin in upstream "p" (expected one of tool_schema_sha256, tls_cert_sha256)`},
		{"empty pin", header + "      url: https://h/\n      pin: {}\n", 6, 7, `pins nothing`},
		{"bad tool hash", header + "      url: https://h/\n      pin: { tool_schema_sha256: { refund: \"md5:ab\" } }\n", 6, 44, `bad tool_schema_sha256 of tool "refund" in pin in upstream "p": "md5:ab" (expected sha256: and 64 lowercase hex digits)`},
		{"upper hex", header + "      url: https://h/\n      pin: { tool_schema_sha256: { refund: \"sha256:" + strings.ToUpper(h) + "\" } }\n", 6, 44, `expected sha256: and 64 lowercase hex digits`},
		{"certs not a list", header + "      url: https://h/\n      pin: { tls_cert_sha256: \"sha256:" + h + "\" }\n", 6, 31, `tls_cert_sha256 in pin in upstream "p" is string`},
		{"certs on http", header + "      url: http://h/\n      pin: { tls_cert_sha256: [\"sha256:" + h + "\"] }\n", 4, 5, `upstream "p" pins tls_cert_sha256 but is not an https url`},
		{"certs on a command", header + "      command: [x]\n      pin: { tls_cert_sha256: [\"sha256:" + h + "\"] }\n", 4, 5, `is not an https url`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("latch.yaml", []byte(tt.src))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) = %v, want an *Error", tt.src, err)
			}
			if pe.Line != tt.line || pe.Column != tt.col || !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("Parse(%q) = %d:%d %s, want %d:%d containing %q", tt.src, pe.Line, pe.Column, pe.Msg, tt.line, tt.col, tt.msg)
			}
		})
	}
}
