package policy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
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
	Gateway     *Gateway   // nil when the document has no gateway section
	Approvers   *Approvers // nil when the document has no approvers section
	Retention   *Retention // nil when the document has no retention section
	Scopes      *Scopes    // nil when the document has no scopes section
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

	// Arguments is the action's `arguments:` section in file order, nil when it has none.
	// With it, every condition and template must name a declared argument.
	Arguments []*Argument
	// RefuseAdditional is `additional: false` in the arguments section: a call passing an
	// argument that is not declared is denied invalid_arguments.
	RefuseAdditional bool
	// Approvers is the action's `approvers:` entry (who may answer its approval requests, how
	// many must grant); nil when it has none (see [Policy.ApproversFor]).
	Approvers *ApproverRule
	// Budgets are the action's own budgets (docs/budgets.md), each kept per principal
	// (Budget.Per); nil when it has none.
	Budgets []Budget
	// Precondition is the action's `precondition:` entry (docs/governance.md#precondition-fingerprints):
	// where the state of the action's target is read, so that an approval is spent only on the
	// state the approver saw; nil when it has none.
	Precondition *Precondition
}

// PolicyChangeAction is the reserved action name of a change of the policy itself: an approval
// request of it is a proposal of a new policy (docs/governance.md). No policy may declare it; its
// approvers are the approvers section's policy_change rule.
const PolicyChangeAction = "latch.policy.apply"

// Rule is one entry of an action's rules: when every condition holds, Decision applies.
type Rule struct {
	When     Conditions // nil means always
	Decision Decision
	Pos      Position // of the rule's mapping
}

// Evaluation is the result of [Policy.Evaluate]: a decision, its reason and how it was reached.
type Evaluation struct {
	Decision Decision
	Reason   string      // unknown_action | missing_argument | invalid_arguments | decision | rule[i] | no_matching_rule
	Trace    []RuleTrace // the rules evaluated, in order, up to the first match

	// Arguments is the check of the call's arguments against what the action needs, made
	// before any rule ([Action.CheckArguments]); when it fails, the decision is deny with its
	// reason and no rule is evaluated. It is zero (OK) for an unlisted action.
	Arguments ArgumentCheck
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

// RuleReason is the reason an evaluation records when the action's rule i (zero-based) decided
// it: rule[i].
func RuleReason(i int) string { return "rule[" + strconv.Itoa(i) + "]" }

// Evaluate decides one call to action with the given arguments. args holds values of canon's
// value model (nil, bool, string, int64, []any, map[string]any); any other Go type is an
// argument of the wrong type for every operator. Evaluate is pure and never fails: a nil policy
// lists no actions, and anything malformed decides deny.
//
// In order: an unlisted action is denied unknown_action; arguments that do not fit what the
// action needs ([Action.CheckArguments]) are denied missing_argument or invalid_arguments; a
// bare decision is returned as is; otherwise the first rule whose conditions all hold wins and
// no match denies.
func (p *Policy) Evaluate(action string, args map[string]any) Evaluation {
	if p == nil {
		return Evaluation{Decision: Deny, Reason: ReasonUnknownAction}
	}
	a := p.Actions[action]
	if a == nil {
		return Evaluation{Decision: Deny, Reason: ReasonUnknownAction}
	}
	ca := p.compiled[a]
	if ca == nil || !ca.fits(a) {
		ca = compileAction(a) // a policy built by hand rather than parsed
	}
	if chk := ca.schema.check(a.Name, args); !chk.OK() {
		return Evaluation{Decision: Deny, Reason: chk.Reason, Arguments: chk}
	}
	if len(a.Rules) == 0 {
		return Evaluation{Decision: failClosed(a.Decision), Reason: ReasonDecision}
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

// CheckArguments is [Action.CheckArguments] for the action named action, prepared at parse
// time; an unlisted action's arguments fit (it is denied unknown_action anyway).
func (p *Policy) CheckArguments(action string, args map[string]any) ArgumentCheck {
	if p == nil {
		return ArgumentCheck{}
	}
	a := p.Actions[action]
	if a == nil {
		return ArgumentCheck{}
	}
	ca := p.compiled[a]
	if ca == nil || !ca.fits(a) {
		return a.CheckArguments(args)
	}
	return ca.schema.check(a.Name, args)
}

func failClosed(d Decision) Decision {
	if d.Valid() {
		return d
	}
	return Deny
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

// MaxFileSize is the largest policy file [Load] reads: 4 MiB. A policy is a list a person
// reviews; anything near this size is a mistake or an attack, and reading it whole must not
// exhaust memory.
const MaxFileSize = 4 << 20

// Sentinel errors a read failure of [Load] unwraps to, besides the operating system's own.
var (
	// ErrNotRegularFile: the path names a directory, a device, a named pipe or a socket.
	ErrNotRegularFile = errors.New("not a regular file")
	// ErrFileTooLarge: the file is larger than MaxFileSize.
	ErrFileTooLarge = errors.New("larger than the policy size limit")
)

// Load reads and parses the policy file at path. A file that cannot be read is an *Error with
// Line 0 that unwraps to the read error. It is [LoadContext] with a context that never ends.
func Load(path string) (*Policy, error) {
	return LoadContext(context.Background(), path)
}

// LoadContext reads and parses the policy file at path, giving up when ctx ends. Only a
// regular file of at most [MaxFileSize] bytes is read: a device (/dev/zero), a named pipe
// (which would block until someone writes to it), a directory or a socket is refused before
// any byte is read, and the file is opened without blocking so that one swapped in between the
// check and the open is refused too. A file that cannot be read is an *Error with Line 0 that
// unwraps to the cause (fs.ErrNotExist, [ErrNotRegularFile], [ErrFileTooLarge], ctx.Err()).
func LoadContext(ctx context.Context, path string) (*Policy, error) {
	data, err := readPolicy(ctx, path)
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

// readChunk is how much LoadContext reads between two looks at its context.
const readChunk = 64 << 10

func readPolicy(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Look before opening, so that not even a device is opened; a path that cannot be looked at
	// gets the open's own error below.
	if fi, err := os.Stat(path); err == nil {
		if err := regular(fi); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := regular(fi); err != nil {
		return nil, err
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d (4 MiB)", ErrFileTooLarge, fi.Size(), MaxFileSize)
	}
	data := make([]byte, 0, fi.Size()+1)
	r := io.LimitReader(f, MaxFileSize+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):min(cap(data), len(data)+readChunk)])
		data = data[:len(data)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(data) > MaxFileSize { // it grew while being read
		return nil, fmt.Errorf("%w: more than %d bytes (4 MiB)", ErrFileTooLarge, MaxFileSize)
	}
	return data, nil
}

// regular refuses anything but a regular file, naming what it is.
func regular(fi fs.FileInfo) error {
	m := fi.Mode()
	if m.IsRegular() {
		return nil
	}
	what := "a special file"
	switch {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a device"
	}
	return fmt.Errorf("%w: it is %s (a policy is a regular file)", ErrNotRegularFile, what)
}
