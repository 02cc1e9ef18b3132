package policy

import (
	"strings"
	"testing"
)

// TestParseOnExpiry: approvers.on_expiry is expire (the default) or deny; deny changes the
// policy's hash, expire hashes as the key's absence.
func TestParseOnExpiry(t *testing.T) {
	t.Parallel()
	parse := func(body string) *Policy {
		t.Helper()
		pol, err := Parse("latch.yaml", []byte(escalationHead+"    approvers:\n      roles: [leads]\n"+body))
		if err != nil {
			t.Fatalf("Parse(%q): %v", body, err)
		}
		return pol
	}
	plain, expire, deny := parse(""), parse("      on_expiry: expire\n"), parse("      on_expiry: deny\n")
	for _, tc := range []struct {
		name string
		pol  *Policy
		want bool
	}{{"absent", plain, false}, {"expire", expire, false}, {"deny", deny, true}} {
		if got := tc.pol.ApproversFor("a.b").DeniesAtExpiry(); got != tc.want {
			t.Errorf("%s: DeniesAtExpiry() = %v, want %v", tc.name, got, tc.want)
		}
	}
	if DefaultApprovers.DeniesAtExpiry() || plain.ApproversFor("not.listed").DeniesAtExpiry() {
		t.Error("an action without approvers denies at expiry, want expired")
	}
	if expire.Hash != plain.Hash {
		t.Errorf("on_expiry: expire hashes %s, its absence %s; want the same", expire.Hash, plain.Hash)
	}
	if deny.Hash == plain.Hash {
		t.Errorf("on_expiry: deny hashes as its absence: %s", deny.Hash)
	}
}

// TestParseOnExpiryRefused: any other value, or the key in approvers.policy_change, names the
// file, line and column.
func TestParseOnExpiryRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, want string }{
		{"unknown value", escalationHead + "    approvers:\n      roles: [leads]\n      on_expiry: reject\n",
			`latch.yaml:11:18: on_expiry in approvers in action "a.b" is "reject" (expected expire, the default: written expired, or deny: written denied)`},
		{"not a string", escalationHead + "    approvers:\n      on_expiry: [deny]\n",
			`latch.yaml:10:18: on_expiry in approvers in action "a.b" is a list (expected a string)`},
		{"in policy_change", "schema: latch.policy/v1\napprovers:\n  roles:\n    leads: [alice]\n  policy_change: {roles: [leads], on_expiry: deny}\n",
			`latch.yaml:5:35: on_expiry is not available in approvers.policy_change`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("latch.yaml", []byte(tc.src))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Parse error = %v, want prefix %q", err, tc.want)
			}
		})
	}
}
