package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestGatewayPin: `latch gateway pin` prints pins of the real payments upstream's tools that,
// pasted into the policy, make `latch gateway pin --diff` report every tool unchanged, and a
// gateway start; a pin that no longer matches is shown pinned beside observed, and the gateway
// refuses to start, printing both.
func TestGatewayPin(t *testing.T) {
	t.Parallel()
	bin := payments(t)
	e := newMCPEnv(t, "")
	base := "schema: latch.policy/v1\ngateway:\n  upstreams:\n    payments:\n" + commandUpstream(bin, e.ledger) + "\n"
	actions := "actions:\n  mcp.payments.refund:\n    decision: allow\n  mcp.payments.balance:\n    decision: allow\n"
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(e.policy, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(base + actions)
	out := e.run(t, "gateway", "pin")
	if !strings.HasPrefix(out, "gateway:\n  upstreams:\n    payments:\n      pin:\n        tool_schema_sha256:\n") {
		t.Fatalf("pin output:\n%s", out)
	}
	re := regexp.MustCompile(`(?m)^          refund: "(sha256:[0-9a-f]{64})"$`)
	m := re.FindStringSubmatch(out)
	if m == nil || !regexp.MustCompile(`(?m)^          balance: "sha256:[0-9a-f]{64}"$`).MatchString(out) {
		t.Fatalf("pin output without refund and balance pins:\n%s", out)
	}
	refundPin := m[1]
	pins := strings.TrimPrefix(out, "gateway:\n  upstreams:\n    payments:\n")
	write(base + pins + actions)
	diff := e.run(t, "gateway", "pin", "--diff")
	if !strings.Contains(diff, "= payments.refund  unchanged "+refundPin) || !strings.Contains(diff, "= payments.balance  unchanged") {
		t.Fatalf("diff of fresh pins:\n%s", diff)
	}

	wrong := "sha256:" + strings.Repeat("0", 64)
	write(base + strings.Replace(pins, refundPin, wrong, 1) + "          gone: \"" + wrong + "\"\n" + actions)
	diff = e.run(t, "gateway", "pin", "--diff")
	for _, want := range []string{
		"! payments.refund  changed: pinned " + wrong + ", observed " + refundPin,
		"= payments.balance  unchanged",
		"- payments.gone  pinned " + wrong + "; no longer listed",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, diff)
		}
	}
	cmd := e.command("gateway", "--stdio", "--agent", "bot")
	cmd.Stdin = strings.NewReader("")
	got, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(got), "upstream payments tool refund: pinned "+wrong+", observed "+refundPin) {
		t.Errorf("gateway with a stale pin = %v:\n%s", err, got)
	}
}
