package policy

import (
	"errors"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"
)

// Schema is the only schema this package reads.
const Schema = "latch.policy/v1"

// DefaultPath is the policy file used when $LATCH_POLICY is not set.
const DefaultPath = "latch.yaml"

// EnvPolicy is the environment variable naming the policy file.
const EnvPolicy = "LATCH_POLICY"

// DefaultMaxDelegationDepth is authority.max_delegation_depth when the document omits it.
const DefaultMaxDelegationDepth = 3

// Mode says whether decisions are enforced or only recorded (docs/guarantees.md#observe-mode).
type Mode string

// Modes.
const (
	ModeEnforce Mode = "enforce" // the default
	ModeObserve Mode = "observe" // decide and record, enforce nothing
)

// Decision is how much autonomy a call gets.
type Decision string

// Decisions, from least to most strict.
const (
	Allow   Decision = "allow"
	Approve Decision = "approve" // a human decides
	Deny    Decision = "deny"
)

// Valid reports whether d is one of allow, approve and deny.
func (d Decision) Valid() bool { return d == Allow || d == Approve || d == Deny }

func (d Decision) rank() int {
	switch d {
	case Allow:
		return 0
	case Approve:
		return 1
	default: // deny, and anything that is not a decision: fail closed
		return 2
	}
}

// Stricter returns the stricter of two decisions (allow < approve < deny). A value that is not a
// decision counts as deny, so a corrupted decision can only make the result stricter.
func Stricter(a, b Decision) Decision {
	ra, rb := a.rank(), b.rank()
	if ra == 2 || rb == 2 {
		return Deny
	}
	if ra >= rb {
		return a
	}
	return b
}

// Policy is a parsed policy document. It is read-only after [Parse]: Evaluate relies on data
// prepared at parse time. Compare policies by Hash, not structurally.
type Policy struct {
	File        string // as given to Parse or Load
	Schema      string // always [Schema]
	Mode        Mode   // default [ModeEnforce]
	Environment string // "" when absent
	Version     string // free label, "" when absent; not part of Hash
	Actions     map[string]*Action
	Authority   *Authority // nil when the document has no authority section
	Hash        string     // "sha256:…" of the parsed document, docs/policy.md

	compiled map[*Action]*compiledAction
}

// Action is one entry of the actions map.
type Action struct {
	Name        string
	Effect      *Template     // effect key template; nil when absent
	Resource    *Template     // resource template; nil when absent
	Lease       time.Duration // 0 when absent
	ApprovalTTL time.Duration // 0 when absent
	MaxAttempts int           // 0 when absent (no ceiling)
	Decision    Decision      // set when the action has a bare decision
	Rules       []Rule        // set when the action has rules
	Pos         Position      // of the action's name
}

// Rule is one entry of an action's rules: when every condition holds, Decision applies.
type Rule struct {
	When     Conditions // nil means always
	Decision Decision
	Pos      Position // of the rule's mapping
}

// Evaluation is the result of [Policy.Evaluate]: a decision, its reason and how it was reached.
type Evaluation struct {
	Decision Decision
	Reason   string      // unknown_action | decision | rule[i] | no_matching_rule
	Trace    []RuleTrace // the rules evaluated, in order, up to the first match
}

// RuleTrace records one evaluated rule.
type RuleTrace struct {
	Index      int
	Matched    bool
	Conditions []CondResult
}

// Evaluation reasons.
const (
	ReasonUnknownAction  = "unknown_action"
	ReasonDecision       = "decision"
	ReasonNoMatchingRule = "no_matching_rule"
)

// Evaluate decides one call to action with the given arguments (docs/policy.md). args holds values
// of canon's value model (nil, bool, string, int64, []any, map[string]any); any other Go type
// is an argument of the wrong type for every operator. Evaluate is pure and never fails: a nil
// policy lists no actions, and anything malformed decides deny.
func (p *Policy) Evaluate(action string, args map[string]any) Evaluation {
	if p == nil {
		return Evaluation{Decision: Deny, Reason: ReasonUnknownAction}
	}
	a := p.Actions[action]
	if a == nil {
		return Evaluation{Decision: Deny, Reason: ReasonUnknownAction}
	}
	if len(a.Rules) == 0 {
		return Evaluation{Decision: failClosed(a.Decision), Reason: ReasonDecision}
	}
	ca := p.compiled[a]
	if ca == nil || !ca.fits(a) {
		ca = compileAction(a) // a policy built by hand rather than parsed
	}
	results := make([]CondResult, ca.nconds)
	trace := make([]RuleTrace, 0, len(a.Rules))
	off := 0
	for i := range a.Rules {
		r := &a.Rules[i]
		var res []CondResult
		if n := len(r.When); n > 0 {
			res = results[off : off+n : off+n]
			off += n
		}
		held := evalInto(res, r.When, ca.rules[i].conds, args)
		trace = append(trace, RuleTrace{Index: i, Matched: held, Conditions: res})
		if held {
			return Evaluation{Decision: failClosed(r.Decision), Reason: ca.rules[i].reason, Trace: trace}
		}
	}
	return Evaluation{Decision: Deny, Reason: ReasonNoMatchingRule, Trace: trace}
}

func failClosed(d Decision) Decision {
	if d.Valid() {
		return d
	}
	return Deny
}

// Warning is something legal but probably wrong in a policy (docs/policy.md).
type Warning struct {
	Action string
	Pos    Position
	Msg    string
}

// Warnings lists, in file order, every action that has no effect template but can decide
// something other than deny: a write with no effect key has nothing for "one effect, once" to be
// about. Reads that are deliberately effect-less show up too; the warning is advice, not an error.
func (p *Policy) Warnings() []Warning {
	if p == nil {
		return nil
	}
	var ws []Warning
	for name, a := range p.Actions {
		if a.Effect != nil {
			continue
		}
		var may []string
		add := func(d Decision) {
			if d != Deny && !contains(may, string(d)) {
				may = append(may, string(d))
			}
		}
		if len(a.Rules) == 0 {
			add(a.Decision)
		}
		for _, r := range a.Rules {
			add(r.Decision)
		}
		if len(may) == 0 {
			continue
		}
		sort.Strings(may)
		ws = append(ws, Warning{
			Action: name,
			Pos:    a.Pos,
			Msg: "action " + quote(name) + " has no effect template but may decide " + strings.Join(may, " or ") +
				": without an effect key nothing stops it running twice",
		})
	}
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].Pos.Line != ws[j].Pos.Line {
			return ws[i].Pos.Line < ws[j].Pos.Line
		}
		if ws[i].Pos.Column != ws[j].Pos.Column {
			return ws[i].Pos.Column < ws[j].Pos.Column
		}
		return ws[i].Action < ws[j].Action
	})
	return ws
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Locate returns the policy path: $LATCH_POLICY if it is non-empty, else [DefaultPath].
//
// A getenv function cannot tell an unset variable from one set to "", so Locate treats "" as
// unset; callers that can tell (os.LookupEnv) should use [LocateLookup], which refuses a
// set-but-empty value as docs/policy.md requires. A value of only spaces is refused by both.
func Locate(getenv func(string) string) (string, error) {
	if getenv == nil {
		return DefaultPath, nil
	}
	return LocateLookup(func(k string) (string, bool) {
		v := getenv(k)
		return v, v != ""
	})
}

// LocateLookup is [Locate] with a lookup that reports whether the variable is set
// (os.LookupEnv). $LATCH_POLICY set but empty (or only spaces) is an error, not "unset": it is
// almost always a broken deployment template, and guessing a path would load the wrong policy.
func LocateLookup(lookup func(string) (string, bool)) (string, error) {
	if lookup == nil {
		return DefaultPath, nil
	}
	v, ok := lookup(EnvPolicy)
	if !ok {
		return DefaultPath, nil
	}
	if strings.TrimSpace(v) == "" {
		return "", errors.New("locate policy: $" + EnvPolicy + " is set but empty; unset it to use " + DefaultPath)
	}
	return v, nil
}

// Load reads and parses the policy file at path. A file that cannot be read is an *Error with
// Line 0 that unwraps to the read error.
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg = pe.Op + ": " + pe.Err.Error()
		}
		return nil, &Error{File: path, Msg: "read policy: " + msg, err: err}
	}
	return Parse(path, data)
}
