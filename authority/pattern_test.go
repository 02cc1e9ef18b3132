package authority

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/latchkit/latch/policy"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, s string
		sep        byte
		want       bool
	}{
		// Literals: exact, case-sensitive, no normalization.
		{"billing.charge", "billing.charge", '.', true},
		{"billing.charge", "billing.Charge", '.', false},
		{"billing.charge", "billing.charge.x", '.', false},
		{"billing.charge", "billing", '.', false},
		{"caf\u00e9", "cafe\u0301", ':', false},
		// Prefix segments.
		{"billing.*", "billing.charge", '.', true},
		{"billing.*", "billing", '.', false},
		{"billing.*", "billing.charge.now", '.', false},
		{"billing.ch*", "billing.charge", '.', true},
		{"billing.ch*", "billing.ch", '.', true},
		{"billing.ch*", "billing.c", '.', false},
		{"*.charge", "billing.charge", '.', true},
		{"*", "x", '.', true},
		{"*", "", '.', false},
		{"*", "a.b", '.', false},
		{"invoice:*", "invoice:", ':', false},
		{"a:*:c", "a::c", ':', false},
		{"inv*", "INV1", ':', false},
		// ** tails: one or more further segments.
		{"git.**", "git.merge", '.', true},
		{"git.**", "git.merge.main", '.', true},
		{"git.**", "git", '.', false},
		{"git.**", "gitx.merge", '.', false},
		{"git.**", "git.", '.', false},
		{"git.**", "git.a..b", '.', false},
		{"repo:latchkit:**", "repo:latchkit:latch:1", ':', true},
		{"repo:latchkit:**", "repo:other:latch", ':', false},
		// The separator matters: ':' is a literal character in an action pattern.
		{"a.*", "a.b:c", '.', true},
		{"a:*", "a.b:c", ':', false},
		// Characters that are wildcards elsewhere are literal in s.
		{"a.*", "a.*", '.', true},
		{"a.b", "a.*", '.', false},
		{"a.b?", "a.b?", '.', false}, // '?' makes the pattern invalid
		// Invalid patterns match nothing.
		{"", "", '.', false},
		{"**", "a", '.', false},
		{"a.**.b", "a.x.b", '.', false},
		{"a*.**", "ab.c", '.', false},
		{"a*b", "axb", '.', false},
		{"a..b", "a..b", '.', false},
		{"a.\x01", "a.\x01", '.', false},
		{"\xff", "\xff", '.', false},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.s, tt.sep); got != tt.want {
			t.Errorf("Match(%q, %q, %q) = %v, want %v", tt.pattern, tt.s, tt.sep, got, tt.want)
		}
	}
}

func TestContains(t *testing.T) {
	t.Parallel()
	tests := []struct {
		parent, child string
		want          bool
	}{
		// Literals contain only themselves.
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.b", "a.b.c", false},
		{"a.b.c", "a.b", false},
		// A wildcard is never contained in a literal.
		{"a.b", "a.*", false},
		{"a.b", "a.b*", false},
		{"a.b", "a.**", false},
		// Prefix segments and prefix chains.
		{"a.*", "a.b", true},
		{"a.b*", "a.b", true},
		{"a.b*", "a.bc", true},
		{"a.bc*", "a.b", false},
		{"a.*", "a.b*", true},
		{"a.b*", "a.bc*", true},
		{"a.bc*", "a.b*", false},
		{"a.b*", "a.*", false},
		{"a.*", "a.*", true},
		{"*.*", "a.b*", true},
		{"*.b", "a*.b", true},
		{"a*.b", "*.b", false},
		{"a.*", "a.b.c", false},
		// ** tails.
		{"Q.**", "Q", false},
		{"Q", "Q.**", false},
		{"Q.**", "Q.a", true},
		{"Q.**", "Q.a.b", true},
		{"Q.**", "Q.*", true},
		{"Q.**", "Q.a*.b", true},
		{"Q.**", "Q.**", true},
		{"Q.**", "Q.a.**", true},
		{"Q.a.**", "Q.**", false},
		{"Q.a.**", "Q.a", false},
		{"Q.a.**", "Q.b.c", false},
		{"Q.**", "R.a", false},
		{"Q.**", "*.a", false},
		{"Q.**", "Q*.a", false},
		{"a.b.**", "a.*.c", false},
		{"*.b", "a.**", false},
		{"*.*", "a.**", false},
		// Invalid on either side: nothing is contained.
		{"a.**.b", "a.x.b", false},
		{"a.*", "a.b?", false},
		{"**", "a", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if got := Contains(tt.parent, tt.child, '.'); got != tt.want {
			t.Errorf("Contains(%q, %q) = %v, want %v", tt.parent, tt.child, got, tt.want)
		}
	}
	// The separator decides what a segment is.
	if !Contains("repo:latchkit:**", "repo:latchkit:latch:*", ':') {
		t.Errorf(`Contains("repo:latchkit:**", "repo:latchkit:latch:*", ':') = false, want true`)
	}
	if Contains("repo:latchkit:**", "repo:latchkit:latch:*", '.') {
		t.Errorf(`Contains("repo:latchkit:**", "repo:latchkit:latch:*", '.') = true, want false (one segment "repo:latchkit:**" is invalid)`)
	}
}

func TestValidPatternAgreesWithCheckPattern(t *testing.T) {
	t.Parallel()
	for _, p := range patternSeeds {
		for _, sep := range []byte{'.', ':'} {
			if got, want := validPattern(p, sep), policy.CheckPattern(p, sep) == nil; got != want {
				t.Errorf("validPattern(%q, %q) = %v, want %v (CheckPattern)", p, sep, got, want)
			}
		}
	}
}

var patternSeeds = []string{
	"", "a", "a.b", "a.*", "a.b*", "*", "**", "a.**", "a.**.b", "a*.**", "*.b", "a*b", "a**",
	"a..b", ".a", "a.", "a.b?", "a:b:*", "repo:latchkit:**", "a.\x7f", "\xff", "a.\u0085", "é.*",
}

// FuzzMatch checks that Match never panics, that it matches nothing under a pattern
// CheckPattern refuses, that validPattern agrees with CheckPattern, and that matching a
// wildcard-free string agrees with containing it as a pattern.
func FuzzMatch(f *testing.F) {
	for _, p := range patternSeeds {
		f.Add(p, "a.b", true)
		f.Add(p, "a:b:c", false)
	}
	f.Fuzz(func(t *testing.T, p, s string, dot bool) {
		sep := byte(':')
		if dot {
			sep = '.'
		}
		got := Match(p, s, sep)
		valid := policy.CheckPattern(p, sep) == nil
		if validPattern(p, sep) != valid {
			t.Fatalf("validPattern(%q, %q) = %v, CheckPattern says %v", p, sep, !valid, valid)
		}
		if got && !valid {
			t.Fatalf("Match(%q, %q, %q) = true for a pattern CheckPattern refuses", p, s, sep)
		}
		if got && strings.Contains(s, string(sep)+string(sep)) {
			t.Fatalf("Match(%q, %q, %q) = true for a string with an empty segment", p, s, sep)
		}
		if concrete(s, sep) {
			if c := Contains(p, s, sep); c != got {
				t.Fatalf("Contains(%q, %q, %q) = %v, Match = %v", p, s, sep, c, got)
			}
		}
	})
}

// FuzzContains checks the property containment exists for: if Contains(p, c), every string
// matched by c is matched by p. The strings are generated from c (each wildcard filled in at
// random), so that they are matched by c; and containment is reflexive for valid patterns.
func FuzzContains(f *testing.F) {
	pairs := [][2]string{
		{"a.**", "a.b.**"}, {"a.**", "a.b*.c"}, {"a.*", "a.b*"}, {"a.b*", "a.bc*"}, {"Q.**", "Q"},
		{"a.b", "a.*"}, {"*.*", "x.y"}, {"a.b.**", "a.**"}, {"ab*", "a*"}, {"*", "*"},
	}
	for i, pc := range pairs {
		f.Add(pc[0], pc[1], uint64(i), i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, p, c string, seed uint64, dot bool) {
		sep := byte(':')
		if dot {
			sep = '.'
		}
		if validPattern(p, sep) && !Contains(p, p, sep) {
			t.Fatalf("Contains(%q, %q, %q) = false, want true (reflexive)", p, p, sep)
		}
		if !Contains(p, c, sep) {
			return
		}
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		for range 16 {
			s := instance(rng, c, sep)
			if !Match(c, s, sep) {
				t.Fatalf("instance %q of %q is not matched by it", s, c)
			}
			if !Match(p, s, sep) {
				t.Fatalf("Contains(%q, %q, %q) = true, but %q is matched by the child and not the parent", p, c, sep, s)
			}
		}
	})
}

// instance returns a random string matched by the valid pattern p.
func instance(rng *rand.Rand, p string, sep byte) string {
	const alphabet = "ab*?.:x" // wildcard characters too: in a string they are literal
	fill := func(b *strings.Builder, n int) {
		for range n {
			for {
				if c := alphabet[rng.IntN(len(alphabet))]; c != sep {
					b.WriteByte(c)
					break
				}
			}
		}
	}
	var b strings.Builder
	segs := strings.Split(p, string(sep))
	for i, seg := range segs {
		if i > 0 {
			b.WriteByte(sep)
		}
		switch {
		case seg == "**":
			for j := range 1 + rng.IntN(3) {
				if j > 0 {
					b.WriteByte(sep)
				}
				fill(&b, 1+rng.IntN(3))
			}
		case strings.HasSuffix(seg, "*"):
			prefix := seg[:len(seg)-1]
			b.WriteString(prefix)
			n := rng.IntN(3)
			if prefix == "" && n == 0 {
				n = 1 // a segment is never empty
			}
			fill(&b, n)
		default:
			b.WriteString(seg)
		}
	}
	return b.String()
}
