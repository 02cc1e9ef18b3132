package policy_test

import (
	"testing"
	"time"

	"github.com/latchkit/latch/policy"
)

// TestRetention: retention.settled_effects reads days and Go durations; a policy without the
// section keeps settled effects for ever (nil) and hashes as before the section existed.
func TestRetention(t *testing.T) {
	t.Parallel()
	const base = "schema: latch.policy/v1\nactions:\n  t.op: { decision: allow }\n"
	without, err := policy.Parse("p.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if without.Retention != nil {
		t.Errorf("Retention without the section = %+v, want nil", without.Retention)
	}
	for _, tc := range []struct {
		text string
		want time.Duration
	}{
		{"90d", 90 * 24 * time.Hour},
		{"1d", 24 * time.Hour},
		{"2160h", 90 * 24 * time.Hour},
		{"36500d", policy.MaxRetention},
	} {
		p, err := policy.Parse("p.yaml", []byte(base+"retention:\n  settled_effects: "+tc.text+"\n"))
		if err != nil {
			t.Errorf("Parse(settled_effects: %s) = %v", tc.text, err)
			continue
		}
		if p.Retention == nil || p.Retention.SettledEffects != tc.want {
			t.Errorf("Parse(settled_effects: %s).Retention = %+v, want %s", tc.text, p.Retention, tc.want)
		}
		if p.Hash == without.Hash {
			t.Errorf("settled_effects: %s hashes like no retention section", tc.text)
		}
	}
	for _, bad := range []string{"0d", "-1d", "36501d", "1.5d", "d", "forever"} {
		if _, err := policy.Parse("p.yaml", []byte(base+"retention:\n  settled_effects: "+bad+"\n")); err == nil {
			t.Errorf("Parse(settled_effects: %s) succeeded, want an error", bad)
		}
	}
}

// TestParseDays: whole days up to MaxDays or a Go duration; anything else is not ok. Bounds
// such as "positive" are the caller's, so 0d and -5m read.
func TestParseDays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30d", 30 * 24 * time.Hour, true},
		{"0d", 0, true},
		{"36500d", policy.MaxDays * 24 * time.Hour, true},
		{"12h", 12 * time.Hour, true},
		{"-5m", -5 * time.Minute, true},
		{"36501d", 0, false},
		{"-1d", 0, false},
		{"1.5d", 0, false},
		{"d", 0, false},
		{"7 d", 0, false},
		{"forever", 0, false},
		{"", 0, false},
	} {
		d, ok := policy.ParseDays(tc.in)
		if d != tc.want || ok != tc.ok {
			t.Errorf("ParseDays(%q) = %s, %v; want %s, %v", tc.in, d, ok, tc.want, tc.ok)
		}
	}
}
