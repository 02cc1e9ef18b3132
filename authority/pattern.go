package authority

import (
	"strings"
	"unicode/utf8"
)

// Match reports whether s is matched by pattern, whose segments are separated by sep ('.' for
// action names, ':' for resources and subjects), as docs/authority.md describes:
//
//   - a literal segment matches exactly that segment (case-sensitive, no normalization);
//   - a segment `x*` matches any non-empty segment that starts with x, so a lone `*` matches any
//     one non-empty segment;
//   - a last segment `**` matches one or more further non-empty segments.
//
// A segment of s is never empty: "a::b", "a:" and "" are matched by no pattern, so an
// identifier with a missing part can never slip under a wildcard. A pattern that
// [policy.CheckPattern] refuses matches nothing. Match does not allocate.
func Match(pattern, s string, sep byte) bool {
	return validPattern(pattern, sep) && match(pattern, s, sep)
}

// match is Match for a valid pattern.
func match(p, s string, sep byte) bool {
	for {
		ps, prest, pmore := cutSegment(p, sep)
		if ps == "**" {
			return nonEmptySegments(s, sep)
		}
		ss, srest, smore := cutSegment(s, sep)
		if ss == "" || !matchSegment(ps, ss) {
			return false
		}
		if !pmore || !smore {
			return !pmore && !smore
		}
		p, s = prest, srest
	}
}

// matchSegment matches one segment of a valid pattern (not `**`) against a non-empty segment.
func matchSegment(ps, ss string) bool {
	if prefix, ok := strings.CutSuffix(ps, "*"); ok {
		return strings.HasPrefix(ss, prefix)
	}
	return ps == ss
}

// Contains reports whether every string matched by child is also matched by parent (docs/authority.md),
// as far as that can be proven segment by segment:
//
//   - a literal contains only itself;
//   - `x*` contains a literal that starts with x (including x itself) and `y*` when y starts
//     with x;
//   - `L1…Lk.**` contains every pattern that starts with the literals L1…Lk and has at least one
//     segment more, so `a.**` contains `a.b`, `a.b*` and `a.b.**` but not `a`;
//   - otherwise the segment counts must be equal, and a pattern ending in `**` is contained in
//     no pattern that does not.
//
// A wildcard is never contained in a literal, and a pattern that [policy.CheckPattern] refuses
// (on either side) is contained in nothing and contains nothing: what cannot be proven is "not
// contained". Contains does not allocate.
func Contains(parent, child string, sep byte) bool {
	if !validPattern(parent, sep) || !validPattern(child, sep) {
		return false
	}
	for {
		ps, prest, pmore := cutSegment(parent, sep)
		if ps == "**" {
			// Every segment so far was a literal of the parent matched by an equal literal of
			// the child, and the child has at least this one segment more.
			return true
		}
		cs, crest, cmore := cutSegment(child, sep)
		if cs == "**" || !containsSegment(ps, cs) {
			return false
		}
		if !pmore || !cmore {
			return !pmore && !cmore
		}
		parent, child = prest, crest
	}
}

// containsSegment reports whether segment ps contains segment cs; neither is `**`.
func containsSegment(ps, cs string) bool {
	pp, pw := strings.CutSuffix(ps, "*")
	if !pw {
		return ps == cs // a literal contains only itself, never a wildcard
	}
	cp, _ := strings.CutSuffix(cs, "*")
	return strings.HasPrefix(cp, pp)
}

// uncontained returns the index of the first child pattern contained in no parent pattern, or
// -1.
func uncontained(parent, child []string, sep byte) int {
	for i, c := range child {
		ok := false
		for _, p := range parent {
			if Contains(p, c, sep) {
				ok = true
				break
			}
		}
		if !ok {
			return i
		}
	}
	return -1
}

// concrete reports whether s is a valid pattern with no wildcard: it names exactly one subject.
func concrete(s string, sep byte) bool {
	return validPattern(s, sep) && strings.IndexByte(s, '*') < 0
}

// cutSegment returns the first segment of s, the rest after the separator, and whether there
// was a separator (that is, whether the rest is one or more further segments).
func cutSegment(s string, sep byte) (seg, rest string, more bool) {
	if i := strings.IndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// nonEmptySegments reports whether s is one or more segments, none of them empty.
func nonEmptySegments(s string, sep byte) bool {
	if s == "" || s[0] == sep || s[len(s)-1] == sep {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] == sep && s[i-1] == sep {
			return false
		}
	}
	return true
}

// validPattern is policy.CheckPattern(p, sep) == nil in one pass, without building an error
// or splitting: the evaluation path checks every pattern it uses and must stay cheap and
// allocation-free. The fuzz test holds the two to the same answer.
func validPattern(p string, sep byte) bool {
	if p == "" {
		return false
	}
	start, segs := 0, 0   // where the current segment starts; segments before it
	stars, star := 0, 0   // '*'s in the current segment, and where the last one is
	wildcardSeen := false // an earlier segment had a '*'
	for i := 0; ; {
		if i == len(p) || p[i] == sep {
			seg := p[start:i]
			switch {
			case seg == "":
				return false
			case seg == "**":
				// Last, not first, and only after plain literals.
				return i == len(p) && segs > 0 && !wildcardSeen
			case stars > 1 || stars == 1 && star != i-1:
				return false
			}
			wildcardSeen = wildcardSeen || stars > 0
			if i == len(p) {
				return true
			}
			segs++
			i++
			start, stars = i, 0
			continue
		}
		c := p[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '*':
				stars, star = stars+1, i
			case c == '?', c < 0x20, c == 0x7f:
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(p[i:])
		if r == utf8.RuneError && size == 1 || 0x80 <= r && r <= 0x9f {
			return false
		}
		i += size
	}
}
