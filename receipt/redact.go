package receipt

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/latchkit/latch/canon"
)

// Redacted is what a receipt records in place of the value of an argument the policy redacts
// (docs/guarantees.md#redacted-arguments): the redaction's form, the masked value people are
// shown, and a salted SHA-256 commitment to the value. The receipt never holds the value, yet
// an auditor who is handed it can prove it was the one the call ran with ([Redacted.Check]);
// the action hash the approval bound was computed over the full value, as always.
//
// In a receipt's arguments it is the JSON object
//
//	{"commitment": "sha256:<64 hex>", "redacted": "last4", "salt": "<32 hex>", "shown": "••••4242"}
//
// whose commitment is the SHA-256 of the 16 salt bytes followed by the value's canonical JSON.
// The salt is drawn afresh for each receipt, so equal values in two receipts do not show as
// equal commitments and a table of precomputed hashes is no use; a value with few possibilities
// can still be found by trying each with the recorded salt, which is why the receipt keeps only
// what the policy lets people see.
type Redacted struct {
	Commitment string `json:"commitment"`
	Redacted   string `json:"redacted"`
	Salt       string `json:"salt"`
	Shown      string `json:"shown"`
}

// saltSize is the bytes of a commitment's salt.
const saltSize = 16

// ErrNotRedacted says a receipt's argument is not a redaction record.
var ErrNotRedacted = errors.New("not a redacted argument")

// Commit is the redaction record of value (canonical JSON, or JSON canon makes canonical)
// redacted in form and shown as shown, with a fresh random salt.
func Commit(form, shown string, value json.RawMessage) (Redacted, error) {
	v, err := canon.Canonicalize(value)
	if err != nil {
		return Redacted{}, fmt.Errorf("commit redacted value: %w", err)
	}
	salt := make([]byte, saltSize)
	if _, err := rand.Read(salt); err != nil {
		return Redacted{}, fmt.Errorf("commit redacted value: salt: %w", err)
	}
	return Redacted{Commitment: commitment(salt, v), Redacted: form, Salt: hex.EncodeToString(salt), Shown: shown}, nil
}

func commitment(salt, canonical []byte) string {
	h := sha256.New()
	h.Write(salt)
	h.Write(canonical)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Check reports whether value (any JSON; it is made canonical) is the value r commits to.
func (r Redacted) Check(value json.RawMessage) bool {
	v, err := canon.Canonicalize(value)
	if err != nil {
		return false
	}
	salt, err := hex.DecodeString(r.Salt)
	if err != nil || len(salt) != saltSize || !strings.HasPrefix(r.Commitment, "sha256:") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(commitment(salt, v)), []byte(r.Commitment)) == 1
}

// RedactArguments returns the canonical JSON object args with the value of each argument named
// in shown replaced by its redaction record: forms[name] is the redaction's form and
// shown[name] the masked value people see. args is returned as it is when shown is empty or
// names none of its members.
func RedactArguments(args json.RawMessage, forms, shown map[string]string) (json.RawMessage, error) {
	if len(shown) == 0 || len(args) == 0 {
		return args, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return nil, fmt.Errorf("redact arguments: %w", err)
	}
	changed := false
	for name, s := range shown {
		v, ok := m[name]
		if !ok {
			continue
		}
		r, err := Commit(forms[name], s, v)
		if err != nil {
			return nil, fmt.Errorf("redact argument %s: %w", name, err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("redact argument %s: %w", name, err)
		}
		m[name], changed = b, true
	}
	if !changed {
		return args, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("redact arguments: %w", err)
	}
	out, err := canon.Canonicalize(b)
	if err != nil {
		return nil, fmt.Errorf("redact arguments: %w", err)
	}
	return out, nil
}

// RedactedArgument is the redaction record of argument name among a receipt's arguments; an
// error wrapping ErrNotRedacted when the argument is absent or recorded in full.
func RedactedArgument(args json.RawMessage, name string) (Redacted, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return Redacted{}, fmt.Errorf("read arguments: %w", err)
	}
	v, ok := m[name]
	if !ok {
		return Redacted{}, fmt.Errorf("argument %s: %w (absent)", name, ErrNotRedacted)
	}
	var r Redacted
	dec := json.NewDecoder(strings.NewReader(string(v)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || r.Commitment == "" || r.Salt == "" || r.Redacted == "" {
		return Redacted{}, fmt.Errorf("argument %s: %w", name, ErrNotRedacted)
	}
	return r, nil
}

// HasRedacted reports whether the canonical JSON object args (a receipt's arguments) records
// any argument as a redaction record: the call it describes cannot be rebuilt from it.
func HasRedacted(args json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return false
	}
	for name := range m {
		if _, err := RedactedArgument(args, name); err == nil {
			return true
		}
	}
	return false
}
