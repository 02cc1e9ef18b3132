package canon

import (
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Case folding. encoding/json matches an object key to a struct field case-insensitively when
// no field has the exact name: "DESTINATION", "Destination" and "deſtination" (U+017F, the long
// s, folds to s) all fill the field tagged "destination", and when several of them are present
// the last one in the text wins. An object holding two such keys would therefore mean one thing
// to a policy reading canon's value model (two different keys) and another to an executor
// decoding the same canonical bytes into a struct (one field, the last value). canon refuses
// every object with two keys that encoding/json would match to the same field, at every depth,
// so that no consumer can read a different value than the policy did.
//
// encoding/json folds a key by replacing every letter with the smallest rune of its simple
// case-folding orbit (unicode.SimpleFold): s, S and ſ fold to S; k, K and K (U+212A, the Kelvin
// sign) fold to K. Two keys collide when their folded forms are equal, which is exactly
// bytes.EqualFold. foldRune and equalFold below are that rule.

// foldRune returns the smallest rune of r's simple case-folding orbit.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		// An ASCII letter's orbit is smallest at its capital (K, k, U+212A; S, s, U+017F).
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// foldHash returns a 64-bit FNV-1a hash of key's folded form: keys that fold alike hash alike.
func foldHash[S ~string | ~[]byte](key S) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(key); {
		c := key[i]
		var r rune
		if c < utf8.RuneSelf {
			r = rune(c)
			if 'a' <= c && c <= 'z' {
				r -= 'a' - 'A'
			}
			i++
		} else {
			var n int
			r, n = utf8.DecodeRuneInString(string(key[i:min(i+utf8.UTFMax, len(key))]))
			r = foldRune(r)
			i += n
		}
		for ; r > 0; r >>= 8 {
			h = (h ^ uint64(r&0xff)) * prime
		}
		h = (h ^ 0xff) * prime // rune separator, so that U+0101 and "\x01\x01" differ
	}
	return h
}

// equalFold reports whether a and b fold to the same key: the rule of bytes.EqualFold, which
// encoding/json's field matching follows. Both are valid UTF-8.
func equalFold[S ~string | ~[]byte](a, b S) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ra, rb := rune(a[i]), rune(b[j])
		na, nb := 1, 1
		if ra >= utf8.RuneSelf {
			ra, na = utf8.DecodeRuneInString(string(a[i:min(i+utf8.UTFMax, len(a))]))
		}
		if rb >= utf8.RuneSelf {
			rb, nb = utf8.DecodeRuneInString(string(b[j:min(j+utf8.UTFMax, len(b))]))
		}
		if ra != rb && foldRune(ra) != foldRune(rb) {
			return false
		}
		i, j = i+na, j+nb
	}
	return i == len(a) && j == len(b)
}

// foldEntry is one key of the object being checked: its fold hash and its index.
type foldEntry struct {
	h uint64
	i int
}

// foldClash returns the indices of two of the n keys that fold alike, or ok false when none do.
// key(i) returns the i-th key's unescaped bytes. Keys are compared by hash first, so an object
// of distinct keys costs one pass over its keys and no allocation (the scratch is pooled).
func foldClash[S ~string | ~[]byte](p *state, n int, key func(int) S) (x, y int, ok bool) {
	if n < 2 {
		return 0, 0, false
	}
	base := len(p.folds)
	for i := 0; i < n; i++ {
		p.folds = append(p.folds, foldEntry{h: foldHash(key(i)), i: i})
	}
	fs := p.folds[base:]
	defer func() { p.folds = p.folds[:base] }()
	if n <= 16 {
		for a := 1; a < n; a++ {
			for b := 0; b < a; b++ {
				if fs[a].h == fs[b].h && equalFold(key(fs[a].i), key(fs[b].i)) {
					return fs[b].i, fs[a].i, true
				}
			}
		}
		return 0, 0, false
	}
	slices.SortFunc(fs, func(a, b foldEntry) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return a.i - b.i
	})
	for a := 0; a < n; a++ {
		for b := a + 1; b < n && fs[b].h == fs[a].h; b++ {
			if equalFold(key(fs[a].i), key(fs[b].i)) {
				return fs[a].i, fs[b].i, true
			}
		}
	}
	return 0, 0, false
}

// foldReason is the refusal of two keys that fold alike, first and second in the order given.
// Both are quoted in ASCII so that the character that differs is visible (\u017f, not ſ).
func foldReason(first, second string) string {
	return "keys " + strconv.QuoteToASCII(first) + " and " + strconv.QuoteToASCII(second) +
		" differ only in letter case (encoding/json would decode them into one field)"
}
