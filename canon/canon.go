// Package canon is latch's one canonical JSON: RFC 8785 (JSON Canonicalization Scheme) over the
// restricted value set of docs/guarantees.md#allowed-argument-values, and the SHA-256 hashing built on it. Every hash in latch
// (action, receipt, policy, idempotency token) goes through this package.
package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
)

// ErrInvalid is matched (errors.Is) by every *Error.
var ErrInvalid = errors.New("invalid value")

// MaxSafeInt is the largest integer allowed in an argument value (2^53-1).
const MaxSafeInt = 1<<53 - 1

// maxDepth bounds the nesting of arrays and objects, both in JSON text and in Go values given to
// Marshal (where it also stops a map that contains itself). Arguments are shallow; a document
// nested a thousand deep is an attack or a bug, not an argument.
const maxDepth = 1000

// Error reports a value outside the allowed set, naming its JSON pointer (RFC 6901).
type Error struct {
	Pointer string // "" is the root; "/amount", "/items/0/name"
	Reason  string // e.g. "non-integer number 0.1", "duplicate key \"a\"", "invalid UTF-8"
	// KeyClash is set when the refusal is two keys of one object that encoding/json would decode
	// into one struct field (they differ only in letter case): the arguments as a whole are
	// ambiguous, rather than one value being outside the model.
	KeyClash bool
}

// Error formats the error as "at /items/0: non-integer number 0.1"; the root is "(root)". A
// pointer holding control characters (keys may) is quoted, so that a key cannot forge lines
// in a log.
func (e *Error) Error() string {
	p := e.Pointer
	switch {
	case p == "":
		p = "(root)"
	case strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		p = strconv.Quote(p)
	}
	return "at " + p + ": " + e.Reason
}

// Is reports whether target is ErrInvalid, so that errors.Is(err, ErrInvalid) matches every
// *Error without callers needing errors.As.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Parse decodes JSON text under the rules of docs/guarantees.md#allowed-argument-values into the value model:
// nil, bool, string, int64, []any, map[string]any.
//
// It refuses, with an *Error naming the JSON pointer of the value: a number with a fraction or
// an exponent (even 1.0 or 1e3), -0, an integer outside [-MaxSafeInt, MaxSafeInt], invalid
// UTF-8 (including a \u escape of a lone surrogate), a duplicate key (compared after
// unescaping), two keys of one object that differ only in letter case as encoding/json matches
// names ("amount" and "Amount", "destination" and "deſtination"), nesting deeper than 1000,
// and any text that is not exactly one JSON value.
func Parse(data []byte) (any, error) {
	p := getState()
	defer putState(p)
	p.values = true
	if !p.parse(data) {
		return nil, p.error()
	}
	return p.v, nil
}

// ParseCanonical is Parse that also returns the canonical bytes, in one pass.
func ParseCanonical(data []byte) (any, []byte, error) {
	p := getState()
	defer putState(p)
	p.values = true
	scratch := p.out
	// The canonical form is never longer than the text it came from (whitespace goes, escapes
	// only shrink or stay), so one exact allocation holds it.
	p.out = make([]byte, 0, len(data))
	ok := p.parse(data)
	out := p.out
	p.out = scratch
	if !ok {
		return nil, nil, p.error()
	}
	return p.v, out, nil
}

// Canonicalize returns the canonical form of JSON text, refusing what Parse refuses.
func Canonicalize(data []byte) ([]byte, error) {
	p := getState()
	defer putState(p)
	scratch := p.out
	p.out = make([]byte, 0, len(data))
	ok := p.parse(data)
	out := p.out
	p.out = scratch
	if !ok {
		return nil, p.error()
	}
	return out, nil
}

// Marshal encodes a value as canonical JSON. It accepts the value model plus int, int32,
// uint32, []string, map[string]string, json.RawMessage (canonicalized), and pointers to those.
//
// A nil pointer, a nil slice, a nil map and a nil json.RawMessage encode as null, as they do
// in encoding/json. Integers must lie in [-MaxSafeInt, MaxSafeInt] and strings (and keys) must
// be valid UTF-8; a map with two keys that differ only in letter case is refused as Parse
// refuses it; floating-point numbers and every other type are refused.
func Marshal(v any) ([]byte, error) {
	p := getState()
	defer putState(p)
	if !p.marshal(v) {
		return nil, p.error()
	}
	return append([]byte(nil), p.out...), nil
}

// Sum returns "sha256:" followed by the lowercase hex SHA-256 of b.
func Sum(b []byte) string {
	const prefix = "sha256:"
	h := sha256.Sum256(b)
	var buf [len(prefix) + 2*sha256.Size]byte
	copy(buf[:], prefix)
	hex.Encode(buf[len(prefix):], h[:])
	return string(buf[:])
}

// state is the working memory of one Parse, Canonicalize or Marshal call. Its stacks and
// scratch buffers are pooled so that a call allocates little beyond its results.
type state struct {
	data   []byte // the JSON text being parsed
	pos    int    // read offset in data
	src    string // string(data), made once when string values are wanted, sliced for strings
	values bool   // build the value model (Parse), not only the canonical bytes

	out   []byte      // canonical output
	tmp   []byte      // scratch for reordering object members in out
	keys  []byte      // unescaped bytes of keys that contained escapes
	str   []byte      // unescaped bytes of a string value that contained escapes
	items []item      // members of the objects being parsed, innermost last
	vals  []any       // elements of the arrays being parsed, innermost last
	names []string    // map keys being sorted by Marshal, innermost last
	folds []foldEntry // fold hashes of the keys of the object being checked
	depth int

	v any // the value just parsed

	reason string   // why the input was refused
	clash  bool     // the refusal is two keys that fold alike
	path   []string // escaped pointer tokens of the refused value, innermost first
}

// item is one object member being parsed: where its key's unescaped bytes are, where its
// `"key":value` text is in out, and its value.
type item struct {
	kOff, kEnd int  // the key's bytes: data[kOff:kEnd], or keys[kOff:kEnd] if kEsc
	kEsc       bool // the key contained escapes
	start, end int  // out[start:end] is the member's canonical text
	val        any
}

var statePool = sync.Pool{New: func() any { return new(state) }}

func getState() *state { return statePool.Get().(*state) }

// putState returns p to the pool, dropping references to parsed values and buffers that grew
// large, so the pool neither pins caller data nor hoards memory.
func putState(p *state) {
	const maxKeep = 64 << 10
	clear(p.items[:cap(p.items)])
	clear(p.vals[:cap(p.vals)])
	clear(p.names[:cap(p.names)])
	folds := p.folds[:0]
	if cap(folds) > 1024 {
		folds = nil
	}
	*p = state{
		folds: folds,
		out:   trim(p.out, maxKeep),
		tmp:   trim(p.tmp, maxKeep),
		keys:  trim(p.keys, maxKeep),
		str:   trim(p.str, maxKeep),
		items: p.items[:0],
		vals:  p.vals[:0],
		names: p.names[:0],
		path:  p.path[:0],
	}
	if cap(p.items) > 1024 {
		p.items = nil
	}
	if cap(p.vals) > 1024 {
		p.vals = nil
	}
	if cap(p.names) > 1024 {
		p.names = nil
	}
	statePool.Put(p)
}

func trim(b []byte, limit int) []byte {
	if cap(b) > limit {
		return nil
	}
	return b[:0]
}

// fail records why the input is refused; the callers on the way out add the pointer tokens.
// It returns false so that refusals read as `return p.fail(...)`.
func (p *state) fail(reason string) bool {
	p.reason, p.clash = reason, false
	p.path = p.path[:0]
	return false
}

// failClash records the refusal of two keys, first and second, that fold alike.
func (p *state) failClash(first, second string) bool {
	p.fail(foldReason(first, second))
	p.clash = true
	return false
}

// at adds one pointer token (unescaped) as the refusal unwinds through a container.
func (p *state) at(token string) bool {
	p.path = append(p.path, escapeToken(token))
	return false
}

// error builds the *Error for the recorded refusal.
func (p *state) error() error {
	var b strings.Builder
	for i := len(p.path) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(p.path[i])
	}
	return &Error{Pointer: b.String(), Reason: p.reason, KeyClash: p.clash}
}

// escapeToken escapes a reference token as RFC 6901 requires: "~" as "~0", "/" as "~1".
func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// compareKeys orders two valid UTF-8 strings by their UTF-16 code units, as RFC 8785 §3.2.3
// sorts object keys. UTF-8 byte order is code point order, which agrees with UTF-16 order
// except in one place: a character at or above U+10000 is written in UTF-16 with a leading
// surrogate (0xD800–0xDBFF) and so sorts before the characters U+E000–U+FFFF, whose UTF-8
// lead bytes are 0xEE and 0xEF. At the first differing byte both strings start a new
// character or both continue the same lead byte, so that one case is decided by the lead
// bytes alone and no decoding is needed.
func compareKeys[S ~string | ~[]byte](a, b S) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		switch {
		case x >= 0xF0 && y >= 0xEE && y <= 0xEF:
			return -1
		case y >= 0xF0 && x >= 0xEE && x <= 0xEF:
			return 1
		case x < y:
			return -1
		default:
			return 1
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

// Kind is a bit set of the value types of canon's value model (what Parse returns): one bit a
// type, so that sets of kinds combine with |.
type Kind uint8

// The kinds of values.
const (
	KindNull Kind = 1 << iota
	KindBool
	KindString
	KindInt
	KindList
	KindObject
	KindOther // anything outside the value model
)

// KindOf returns the kind of v.
func KindOf(v any) Kind {
	switch v.(type) {
	case nil:
		return KindNull
	case bool:
		return KindBool
	case string:
		return KindString
	case int64:
		return KindInt
	case []any:
		return KindList
	case map[string]any:
		return KindObject
	}
	return KindOther
}
