package policy

import "time"

// Recheck says when a call reads the state of its target (docs/governance.md#precondition-fingerprints).
type Recheck string

// Recheck values.
const (
	// RecheckOnApproval: the state is read when an approval request is stored and again when
	// the approval is presented; the approval is spent only if the two fingerprints are equal.
	RecheckOnApproval Recheck = "on_approval"
	// RecheckAlways: as RecheckOnApproval, and a call the policy allows reads the state too,
	// right before its reservation: it is refused when the state cannot be read, and its
	// fingerprint is recorded in the call's policy_evaluated event.
	RecheckAlways Recheck = "always"
)

// Precondition is an action's `precondition:` entry: the service latch POSTs the call to for the
// state of its target (https, or http to loopback: CheckScopeURL), when it reads it, and how long
// it waits for the answer.
type Precondition struct {
	URL     string
	Recheck Recheck       // RecheckOnApproval when the entry does not say
	Timeout time.Duration // DefaultScopeTimeout when the entry does not say
	Pos     Position      // of the precondition key
}

// preconditionKeys are the keys of a precondition entry, in the order error messages list them.
var preconditionKeys = []string{"url", "recheck", "timeout"}

// precondition reads an action's precondition entry.
func (p *parser) precondition(e entry, where string) (*Precondition, *Error) {
	what := "precondition " + where
	if err := p.mapping(e, what, "a mapping with url, and optionally recheck and timeout"); err != nil {
		return nil, err
	}
	c := &Precondition{Recheck: RecheckOnApproval, Timeout: DefaultScopeTimeout, Pos: posOf(e.k)}
	for _, en := range entries(e.v) {
		var err *Error
		switch en.k.Value {
		case "url":
			var s string
			if s, err = p.str(en, "precondition.url "+where); err == nil {
				if cerr := CheckScopeURL(s); cerr != nil {
					err = p.errf(en.v, "bad precondition.url %s %s: %v", quote(s), where, cerr)
				}
				c.URL = s
			}
		case "recheck":
			var s string
			if s, err = p.str(en, "precondition.recheck "+where); err == nil {
				switch Recheck(s) {
				case RecheckOnApproval, RecheckAlways:
					c.Recheck = Recheck(s)
				default:
					err = p.errf(en.v, "precondition.recheck %s is %s (expected on_approval or always)", where, quote(s))
				}
			}
		case "timeout":
			c.Timeout, err = p.scopeTimeout(en, "precondition.timeout "+where)
		default:
			err = p.unknownKey(en.k, "in precondition "+where, preconditionKeys)
		}
		if err != nil {
			return nil, err
		}
	}
	if c.URL == "" {
		return nil, p.errf(e.k, "precondition %s has no url (expected the service that returns the state of the action's target)", where)
	}
	return c, nil
}
