package policy

import (
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Warning codes, as `latch check --json` reports them.
const (
	WarnNoEffect          = "no_effect"          // may run, but has no effect key
	WarnNoArguments       = "no_arguments"       // has conditions but no arguments: section
	WarnPartialArgument   = "partial_argument"   // an argument tested in some rules but not others
	WarnShadowedRule      = "shadowed_rule"      // a rule after one that always matches
	WarnUnsatisfiableRule = "unsatisfiable_rule" // a rule whose conditions can never all hold
	WarnNeverAllowed      = "never_allowed"      // rules that can never decide allow or approve
	WarnBudgetNoEffect    = "budget_no_effect"   // a budgeted grant covers an action with no effect key
	WarnBudgetMetric      = "budget_metric"      // a budgeted grant meters an argument an action does not declare as an integer
	WarnUnredactedSecret  = "unredacted_secret"  // an argument whose name looks secret is shown in full
)

// Warning is something legal but probably wrong in a policy. `latch check` prints warnings
// with their positions; `latch check --strict` fails on any.
type Warning struct {
	Code   string // one of the Warn… constants
	Action string
	Pos    Position
	Msg    string
}

// Warnings lists, in file order, what is legal but probably wrong:
//
//   - an action that may decide allow or approve but has no effect template (RunsUnkeyed): a
//     write with no effect key has nothing for "one effect, once" to be about (deliberately
//     effect-less reads show up too — the warning is advice — except a gateway tool marked
//     read_only, which the policy already says is one);
//   - an action with conditions but no `arguments:` section: a misspelt argument name then
//     fails closed only when a call arrives (missing_argument), instead of at load time;
//   - an argument tested in some of an action's conditional rules but not in others, which is
//     how a typo in one rule reads;
//   - a rule that can never be reached because an earlier rule has no conditions;
//   - a rule whose conditions can never all hold (contradictory bounds, or a value outside the
//     argument's declared min, max or enum);
//   - an action with rules none of which can ever decide allow or approve. (A bare
//     `decision: deny` says so on purpose and is not warned about.)
//   - a grant with budgets that covers a listed action with no effect template (every call to
//     it under that grant is refused budget_needs_effect_key: a budget is charged with an
//     effect key's reservation), or whose metric names an argument the action's arguments:
//     section does not declare as an integer (refused budget_metric_missing or
//     budget_metric_invalid).
//   - a declared argument whose name looks like a secret or personal data (token, password,
//     card, iban, …; see [LooksSecret]) and that has no `redact:` (write `redact: false` to say
//     it is shown in full on purpose).
func (p *Policy) Warnings() []Warning {
	if p == nil {
		return nil
	}
	var ws []Warning
	for name, a := range p.Actions {
		ws = append(ws, actionWarnings(p, name, a)...)
	}
	ws = append(ws, budgetWarnings(p)...)
	sort.SliceStable(ws, func(i, j int) bool {
		if ws[i].Pos.Line != ws[j].Pos.Line {
			return ws[i].Pos.Line < ws[j].Pos.Line
		}
		if ws[i].Pos.Column != ws[j].Pos.Column {
			return ws[i].Pos.Column < ws[j].Pos.Column
		}
		if ws[i].Action != ws[j].Action {
			return ws[i].Action < ws[j].Action
		}
		return ws[i].Code < ws[j].Code
	})
	return ws
}

// RunsUnkeyed reports whether the named action may decide allow or approve, by any rule, but
// has no effect template, and is not a gateway tool the gateway section marks read_only: nothing
// holds such a call to at most once. It is the one rule behind the no_effect warning of
// `latch check` and the unkeyed-tool warning of `latch gateway`, so that --strict refuses the
// same actions on both.
func (p *Policy) RunsUnkeyed(name string) bool {
	a := p.Actions[name]
	if a == nil || a.Effect != nil || p.ReadOnlyTool(name) {
		return false
	}
	if len(a.Rules) == 0 {
		return a.Decision == Allow || a.Decision == Approve
	}
	for _, r := range a.Rules {
		if r.Decision == Allow || r.Decision == Approve {
			return true
		}
	}
	return false
}

// ReadOnlyTool reports whether the named action is a gateway tool, mcp.<alias>.<tool>, that the
// gateway section's settings of that upstream mark read_only: the policy's author vouches that
// it changes nothing, so running it without an effect key is intended.
func (p *Policy) ReadOnlyTool(name string) bool {
	rest, ok := strings.CutPrefix(name, "mcp.")
	if !ok || p.Gateway == nil {
		return false
	}
	alias, tool, ok := strings.Cut(rest, ".") // an alias holds no dot; a tool's name may
	if !ok {
		return false
	}
	u := p.Gateway.Upstreams[alias]
	if u == nil {
		return false
	}
	s := u.Tools[tool]
	return s != nil && s.ReadOnly
}

func actionWarnings(p *Policy, name string, a *Action) []Warning {
	var ws []Warning
	warn := func(code string, pos Position, msg string) {
		ws = append(ws, Warning{Code: code, Action: name, Pos: pos, Msg: msg})
	}
	if p.RunsUnkeyed(name) {
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
		if len(may) > 0 {
			sort.Strings(may)
			warn(WarnNoEffect, a.Pos, "action "+quote(name)+" has no effect template but may decide "+strings.Join(may, " or ")+
				": without an effect key nothing stops it running twice")
		}
	}
	for _, d := range a.Arguments {
		if !d.RedactSet && LooksSecret(d.Name) {
			warn(WarnUnredactedSecret, d.Pos, "argument "+quote(d.Name)+" of action "+quote(name)+
				" looks secret but is shown in full on every surface (add redact: true, last4 or hash; or redact: false if it is not)")
		}
	}
	if len(a.Rules) == 0 {
		return ws
	}

	// Which arguments each conditional rule tests.
	var conditional []int
	tested := map[string][]int{} // argument → rules testing it
	var order []string
	first := map[string]Position{}
	for i, r := range a.Rules {
		if len(r.When) == 0 {
			continue
		}
		conditional = append(conditional, i)
		for _, c := range r.When {
			arg, _, _, bad := resolve(&c)
			if bad != "" {
				continue
			}
			if l := tested[arg]; len(l) == 0 || l[len(l)-1] != i {
				tested[arg] = append(l, i)
			}
			if _, ok := first[arg]; !ok {
				first[arg] = c.Pos
				order = append(order, arg)
			}
		}
	}
	if a.Arguments == nil && len(conditional) > 0 {
		sort.Strings(order)
		warn(WarnNoArguments, a.Pos, "action "+quote(name)+" tests "+quotedList(order)+" in its conditions but has no arguments: section;"+
			" a misspelt name is then caught only when a call arrives (denied missing_argument) — declare the arguments so that loading refuses it")
		sort.SliceStable(order, func(i, j int) bool { return first[order[i]].Line < first[order[j]].Line })
	}
	if len(conditional) > 1 {
		for _, arg := range order {
			rules := tested[arg]
			if len(rules) == len(conditional) {
				continue
			}
			warn(WarnPartialArgument, first[arg], "argument "+quote(arg)+" of action "+quote(name)+" is tested in "+ruleList(rules)+
				" but not in "+ruleList(without(conditional, rules))+" (a misspelt or forgotten name?)")
		}
	}

	always := -1
	canRun := false
	for i, r := range a.Rules {
		if always >= 0 {
			warn(WarnShadowedRule, r.Pos, "rule "+strconv.Itoa(i)+" of action "+quote(name)+" can never be reached: rule "+strconv.Itoa(always)+
				" has no conditions and always matches first")
			continue
		}
		if why := unsatisfiable(a, r.When); why != "" {
			warn(WarnUnsatisfiableRule, r.Pos, "rule "+strconv.Itoa(i)+" of action "+quote(name)+" can never match: "+why)
		} else if r.Decision == Allow || r.Decision == Approve {
			canRun = true
		}
		if len(r.When) == 0 {
			always = i
		}
	}
	if !canRun {
		warn(WarnNeverAllowed, a.Pos, "action "+quote(name)+" can never be allowed or approved: no reachable rule that can match decides allow or approve"+
			" (write decision: deny if that is the intent)")
	}
	return ws
}

// unsatisfiable says why conditions can never all hold for any call, or "". It knows integer
// bounds (lt, lte, gt, gte, eq, in, and a declared min and max) and string sets (eq, in,
// prefix, suffix against a declared enum); anything else it assumes satisfiable.
func unsatisfiable(a *Action, conds Conditions) string {
	type bounds struct {
		lo, hi  int64
		bounded bool
	}
	ints := map[string]*bounds{}
	get := func(arg string) *bounds {
		b := ints[arg]
		if b == nil {
			b = &bounds{lo: -maxSafeInt, hi: maxSafeInt}
			if d := a.Argument(arg); d != nil && d.Type == TypeInteger {
				if d.Min != nil {
					b.lo = *d.Min
				}
				if d.Max != nil {
					b.hi = *d.Max
				}
			}
			ints[arg] = b
		}
		return b
	}
	for i := range conds {
		c := &conds[i]
		arg, op, key, bad := resolve(c)
		if bad != "" {
			return "condition " + quote(c.Key) + " is malformed"
		}
		d := a.Argument(arg)
		switch op {
		case OpLt, OpLte, OpGt, OpGte:
			b, n := get(arg), c.Operand.(int64)
			b.bounded = true
			switch op {
			case OpLt:
				b.hi = min(b.hi, n-1)
			case OpLte:
				b.hi = min(b.hi, n)
			case OpGt:
				b.lo = max(b.lo, n+1)
			case OpGte:
				b.lo = max(b.lo, n)
			}
			if b.lo > b.hi {
				return "no integer satisfies every bound on " + quote(arg) + " (through " + quote(key) + ")"
			}
		}
		if d == nil {
			continue
		}
		// Values the argument's declaration can never take.
		var vals []any
		switch op {
		case OpEq:
			vals = []any{c.Operand}
		case OpIn:
			vals = c.Operand.([]any)
		case OpPrefix, OpSuffix:
			if d.Enum != nil {
				s := c.Operand.(string)
				ok := false
				for _, e := range d.Enum {
					if op == OpPrefix && strings.HasPrefix(e, s) || op == OpSuffix && strings.HasSuffix(e, s) {
						ok = true
					}
				}
				if !ok {
					return "no value of the enum of " + quote(arg) + " satisfies " + quote(key)
				}
			}
		}
		if vals == nil {
			continue
		}
		fits := false
		for _, v := range vals {
			if d.check(v).OK() {
				fits = true
			}
		}
		if !fits {
			return quote(key) + " asks for a value the declaration of " + quote(arg) + " refuses"
		}
	}
	// eq and in against the accumulated integer bounds.
	for i := range conds {
		c := &conds[i]
		arg, op, key, _ := resolve(c)
		b := ints[arg]
		if b == nil || !b.bounded {
			continue
		}
		var vals []any
		switch op {
		case OpEq:
			vals = []any{c.Operand}
		case OpIn:
			vals = c.Operand.([]any)
		default:
			continue
		}
		fits := false
		for _, v := range vals {
			if n, ok := v.(int64); ok && b.lo <= n && n <= b.hi {
				fits = true
			}
		}
		if !fits {
			return quote(key) + " asks for a value outside the other bounds on " + quote(arg)
		}
	}
	return ""
}

func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quote(n)
	}
	return strings.Join(q, ", ")
}

func ruleList(rules []int) string {
	s := make([]string, len(rules))
	for i, r := range rules {
		s[i] = strconv.Itoa(r)
	}
	if len(rules) == 1 {
		return "rule " + s[0]
	}
	return "rules " + strings.Join(s, ", ")
}

func without(all, some []int) []int {
	var out []int
	for _, x := range all {
		if !containsInt(some, x) {
			out = append(out, x)
		}
	}
	return out
}

func containsInt(l []int, x int) bool {
	for _, y := range l {
		if y == x {
			return true
		}
	}
	return false
}

// secretWords are the name parts that make an argument look secret: credentials, payment data
// and personal identifiers.
var secretWords = map[string]bool{
	"token": true, "password": true, "passwd": true, "pwd": true, "passphrase": true, "secret": true,
	"apikey": true, "credential": true, "credentials": true, "card": true, "cvc": true, "cvv": true,
	"pan": true, "pin": true, "iban": true, "ssn": true, "otp": true, "privatekey": true,
}

// LooksSecret reports whether an argument's name looks like it holds a secret or personal data:
// one of its parts — split at _, -, . and lower-to-upper case changes — is token, password,
// secret, card, cvc, iban, ssn, pin, … or two adjacent parts spell api key or private key.
func LooksSecret(name string) bool {
	var parts []string
	start := 0
	rs := []rune(name)
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == '.' || r == ' ':
			parts = append(parts, strings.ToLower(string(rs[start:i])))
			start = i + 1
		case i > start && unicode.IsUpper(r) && unicode.IsLower(rs[i-1]):
			parts = append(parts, strings.ToLower(string(rs[start:i])))
			start = i
		}
	}
	parts = append(parts, strings.ToLower(string(rs[start:])))
	for i, w := range parts {
		if secretWords[w] {
			return true
		}
		if i > 0 && secretWords[parts[i-1]+w] {
			return true
		}
	}
	return false
}
