package policy

import "testing"

// TestPreconditionHash holds a precondition entry in the policy hash: a changed URL, recheck or
// timeout is another policy, and a policy without the entry hashes as it did before it existed.
func TestPreconditionHash(t *testing.T) {
	doc := func(extra string) string {
		return "schema: latch.policy/v1\nactions:\n  t.op:\n    decision: approve\n" + extra
	}
	hash := func(src string) string {
		t.Helper()
		p, err := Parse("latch.yaml", []byte(src))
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		return p.Hash
	}
	base := hash(doc(""))
	a := hash(doc("    precondition: { url: \"https://state.internal/v1\" }\n"))
	explicit := hash(doc("    precondition: { url: \"https://state.internal/v1\", recheck: on_approval, timeout: 2s }\n"))
	seen := map[string]string{"none": base, "url": a}
	for name, extra := range map[string]string{
		"other url": "    precondition: { url: \"https://state.internal/v2\" }\n",
		"always":    "    precondition: { url: \"https://state.internal/v1\", recheck: always }\n",
		"timeout":   "    precondition: { url: \"https://state.internal/v1\", timeout: 3s }\n",
	} {
		h := hash(doc(extra))
		for other, oh := range seen {
			if h == oh {
				t.Errorf("policy with %s hashes as the one with %s", name, other)
			}
		}
		seen[name] = h
	}
	if explicit != a {
		t.Errorf("the defaults spelled out hash %s, left out %s: want the same policy", explicit, a)
	}
	p, err := Parse("latch.yaml", []byte(doc("    precondition: { url: \"http://localhost:9/s\", recheck: always, timeout: 750ms }\n")))
	if err != nil {
		t.Fatal(err)
	}
	c := p.Actions["t.op"].Precondition
	if c == nil || c.URL != "http://localhost:9/s" || c.Recheck != RecheckAlways || c.Timeout.String() != "750ms" {
		t.Errorf("Precondition = %+v", c)
	}
}
