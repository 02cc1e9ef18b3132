// Package canon is latch's one canonical JSON: RFC 8785 (JSON Canonicalization Scheme) over the
// restricted value set of SPEC §2.2, and the SHA-256 hashing built on it. Every hash in latch
// (action, receipt, policy, idempotency token) goes through this package.
package canon

import (
	"errors"
)

// ErrInvalid is matched (errors.Is) by every *Error.
var ErrInvalid = errors.New("invalid value")

// MaxSafeInt is the largest integer allowed in an argument value (2^53-1).
const MaxSafeInt = 1<<53 - 1

// Error reports a value outside the allowed set, naming its JSON pointer (RFC 6901).
type Error struct {
	Pointer string // "" is the root; "/amount", "/items/0/name"
	Reason  string // e.g. "non-integer number 0.1", "duplicate key \"a\"", "invalid UTF-8"
}

// Parse decodes JSON text under the rules of SPEC §2.2 into the value model:
// nil, bool, string, int64, []any, map[string]any.
func Parse(data []byte) (any, error) { panic("unimplemented") }

// ParseCanonical is Parse that also returns the canonical bytes, in one pass.
func ParseCanonical(data []byte) (any, []byte, error) { panic("unimplemented") }

// Canonicalize returns the canonical form of JSON text, refusing what Parse refuses.
func Canonicalize(data []byte) ([]byte, error) { panic("unimplemented") }

// Marshal encodes a value as canonical JSON. It accepts the value model plus int, int32,
// uint32, []string, map[string]string, json.RawMessage (canonicalized), and pointers to those.
func Marshal(v any) ([]byte, error) { panic("unimplemented") }

// Sum returns "sha256:" followed by the lowercase hex SHA-256 of b.
func Sum(b []byte) string { panic("unimplemented") }
