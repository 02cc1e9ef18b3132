package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/latchkit/latch/canon"
)

// Redaction is how an argument's value is shown to people when the policy marks it
// `redact:`. Redaction is presentation only: the action hash, the approval that binds it
// and the store keep the full value; every surface that shows a call's arguments to a person
// (the console, the CLI, HTTP listings, notifications, the operator MCP, logs, metrics) shows
// [Redaction.Mask] of it instead.
type Redaction string

// Redaction forms.
const (
	RedactNone  Redaction = ""      // shown in full
	RedactFull  Redaction = "full"  // `redact: true`: nothing of the value is shown
	RedactLast4 Redaction = "last4" // the last four characters, when the value has at least eight
	RedactHash  Redaction = "hash"  // a short SHA-256 prefix, so equal values can be told apart
)

// Mask is the hidden form every value of a fully redacted argument shows.
const Mask = "••••"

// minLast4 is the shortest value whose last four characters are shown: a shorter one would
// show half of itself or more.
const minLast4 = 8

// Mask returns the form of v a person is shown: "••••" for RedactFull, "••••4242" for
// RedactLast4 (of a string, or of an integer's decimal digits, of at least eight characters;
// anything shorter or of another type shows "••••"), "sha256:", twelve hex digits of the
// SHA-256 of the value's canonical JSON and "…" for RedactHash. The hash form lets a reader see that two calls
// passed the same value; for a value with few possibilities (a PIN, a card number whose last
// four are known) it can be reversed by trying them, so use it for high-entropy values only.
func (r Redaction) Mask(v any) string {
	switch r {
	case RedactLast4:
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case int64:
			s = strconv.FormatInt(x, 10)
		}
		if n := utf8.RuneCountInString(s); n >= minLast4 {
			rs := []rune(s)
			return Mask + string(rs[n-4:])
		}
		return Mask
	case RedactHash:
		b, err := canon.Marshal(v)
		if err != nil {
			return Mask
		}
		sum := sha256.Sum256(b)
		return "sha256:" + hex.EncodeToString(sum[:6]) + "…"
	}
	return Mask
}

// Redactions returns the redacted arguments of action in p by name, nil when none is (or the
// action is not listed).
func (p *Policy) Redactions(action string) map[string]Redaction {
	if p == nil {
		return nil
	}
	return p.Actions[action].Redactions()
}

// Redactions is [Policy.Redactions] for one action; a nil action redacts nothing.
func (a *Action) Redactions() map[string]Redaction {
	if a == nil {
		return nil
	}
	var out map[string]Redaction
	for _, d := range a.Arguments {
		if d.Redact != RedactNone {
			if out == nil {
				out = map[string]Redaction{}
			}
			out[d.Name] = d.Redact
		}
	}
	return out
}

// Redact returns args with the value of every redacted argument of action replaced by its
// masked string, the others as they are: the one helper every surface that shows a call's
// arguments to a person goes through. args itself is not changed; when nothing is redacted
// args is returned as it is.
func (p *Policy) Redact(action string, args map[string]any) map[string]any {
	rs := p.Redactions(action)
	if len(rs) == 0 || args == nil {
		return args
	}
	out := make(map[string]any, len(args))
	for k, v := range args {
		if r, ok := rs[k]; ok {
			v = r.Mask(v)
		}
		out[k] = v
	}
	return out
}

// RedactJSON is [Policy.Redact] over a canonical JSON object: the arguments as a person may be
// shown them, canonical JSON again. Input that is not a JSON object is returned as it is when
// the action redacts nothing, and as "{}" otherwise, so that a value a surface cannot read is
// never shown in full.
func (p *Policy) RedactJSON(action string, args json.RawMessage) json.RawMessage {
	rs := p.Redactions(action)
	if len(rs) == 0 || len(args) == 0 || string(args) == "null" {
		return args
	}
	v, err := canon.Parse(args)
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return json.RawMessage("{}")
	}
	b, err := canon.Marshal(p.Redact(action, m))
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

// RedactValue is the form of the value of argument arg of action a person is shown: v
// unchanged when the argument is not redacted, its masked string otherwise.
func (p *Policy) RedactValue(action, arg string, v any) any {
	if r, ok := p.Redactions(action)[arg]; ok {
		return r.Mask(v)
	}
	return v
}

// strength orders the redactions from the one that shows most to the one that shows least.
var strength = map[Redaction]int{RedactNone: 0, RedactLast4: 1, RedactHash: 2, RedactFull: 3}

// RedactedAnywhere returns every argument name some action of p redacts, each with the
// redaction that shows least among those actions: for records that carry arguments without
// naming their action (an edit's event), so that they are redacted at least as much as the
// action's own would be. nil when nothing is redacted.
func (p *Policy) RedactedAnywhere() map[string]Redaction {
	if p == nil {
		return nil
	}
	var out map[string]Redaction
	for _, a := range p.Actions {
		for name, r := range a.Redactions() {
			if out == nil {
				out = map[string]Redaction{}
			}
			if strength[r] > strength[out[name]] {
				out[name] = r
			}
		}
	}
	return out
}
