package policy

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/latchkit/latch/canon"
)

// Op is a condition operator (docs/policy.md).
type Op string

// Operators.
const (
	OpEq     Op = "eq"     // type-strict, recursive equality
	OpNeq    Op = "neq"    // type-strict inequality; the argument must have the operand's type
	OpIn     Op = "in"     // type-strict membership in a list
	OpNotIn  Op = "not_in" // type-strict non-membership; the argument must have a member's type
	OpLt     Op = "lt"     // integers only
	OpLte    Op = "lte"    // integers only
	OpGt     Op = "gt"     // integers only
	OpGte    Op = "gte"    // integers only
	OpPrefix Op = "prefix" // strings only
	OpSuffix Op = "suffix" // strings only
)

// ops lists the operators in the order docs/policy.md gives them.
var ops = []Op{OpEq, OpNeq, OpIn, OpNotIn, OpLt, OpLte, OpGt, OpGte, OpPrefix, OpSuffix}

// reservedSubjects are names a condition may not test: the policy must not see the principal or
// the action's own fields, which arguments could otherwise impersonate (who may ask is the
// authority axis, docs/authority.md).
var reservedSubjects = []string{"agent", "user", "principal", "claims", "issuer", "resource", "environment", "action_id"}

// Conditions are the conditions of one `when:` (or a grant's `constraints:`); all must hold.
type Conditions []Condition

// Condition is one `<argument>_<op>: operand` entry.
type Condition struct {
	Key     string // as written: "amount_gte"
	Arg     string // "amount"
	Op      Op     // "gte"
	Operand any    // canon's value model: nil, bool, string, int64, []any, map[string]any
	Pos     Position
}

// CondResult is the outcome of one condition.
type CondResult struct {
	Key  string
	Held bool
	Why  string // e.g. `600000 > 50000`, `argument "amount" is absent`
}

// Eval reports whether every condition holds for args, with one result per condition in order.
// Every condition is evaluated (no short circuit) so the trace is complete. No conditions hold
// trivially. Eval is pure; a malformed condition (one that ParseCondition would refuse) is false.
func (c Conditions) Eval(args map[string]any) (bool, []CondResult) {
	if len(c) == 0 {
		return true, nil
	}
	pcs := make([]precond, len(c))
	for i := range c {
		pcs[i] = compileCondition(&c[i])
	}
	res := make([]CondResult, len(c))
	return evalInto(res, c, pcs, args), res
}

// ParseCondition builds a condition from a `when:` key and its operand (canon's value model),
// refusing what Parse refuses: an unknown operator, an empty or reserved argument name, an
// operand of the wrong type for the operator. Pos is left zero.
func ParseCondition(key string, operand any) (Condition, error) {
	arg, op, ce := splitConditionKey(key)
	if ce != nil {
		return Condition{}, fmt.Errorf("%s %s", ce.head, ce.tail)
	}
	if ce := checkOperand(key, op, operand); ce != nil {
		return Condition{}, fmt.Errorf("%s %s", ce.head, ce.tail)
	}
	return Condition{Key: key, Arg: arg, Op: op, Operand: operand}, nil
}

// condErr is a refusal of a condition, split so the caller can insert where it happened.
type condErr struct{ head, tail string }

func splitConditionKey(key string) (string, Op, *condErr) {
	var best Op
	for _, op := range ops {
		if len(op) > len(best) && strings.HasSuffix(key, "_"+string(op)) {
			best = op
		}
	}
	if best == "" {
		names := make([]string, len(ops))
		for i, op := range ops {
			names[i] = string(op)
		}
		return "", "", &condErr{
			head: "unknown operator in condition " + quote(key),
			tail: "(expected <argument>_<op> with op one of " + strings.Join(names, ", ") + ")",
		}
	}
	arg := key[:len(key)-len(best)-1]
	if arg == "" {
		return "", "", &condErr{head: "empty argument name in condition " + quote(key), tail: "(expected <argument>_<op>)"}
	}
	if r := reservedSubject(arg); r != "" {
		return "", "", &condErr{
			head: "condition " + quote(key) + " tests reserved subject " + quote(r),
			tail: "(a policy cannot see the principal or the action's own fields; who may ask belongs in the authority section)",
		}
	}
	if strings.ContainsAny(arg, ".[]/") {
		return "", "", &condErr{
			head: "condition " + quote(key) + " names " + quote(arg) + ", a path into a nested value,",
			tail: "(conditions test top-level arguments only and latch has no path syntax: this would test a top-level key literally named " + quote(arg) + "; pass the nested value as its own top-level argument)",
		}
	}
	return arg, best, nil
}

// reservedSubject returns the reserved subject arg names (itself, or followed by '.', '/' or
// '['), or "".
func reservedSubject(arg string) string {
	for _, r := range reservedSubjects {
		if rest, ok := strings.CutPrefix(arg, r); ok && (rest == "" || rest[0] == '.' || rest[0] == '/' || rest[0] == '[') {
			return r
		}
	}
	return ""
}

func checkOperand(key string, op Op, v any) *condErr {
	if msg := checkValue(v, 0); msg != "" {
		return &condErr{head: "operand of " + quote(key) + " is not a latch value", tail: "(" + msg + ")"}
	}
	bad := func(want string) *condErr {
		return &condErr{head: "operand of " + quote(key) + " is " + describeValue(v), tail: "(expected " + want + ")"}
	}
	switch op {
	case OpEq:
	case OpNeq:
		if v == nil {
			return bad("a non-null value: neq null can never hold, because the argument must have the operand's type")
		}
	case OpIn, OpNotIn:
		if l, ok := v.([]any); !ok || len(l) == 0 {
			return bad("a non-empty list")
		}
	case OpLt, OpLte, OpGt, OpGte:
		if _, ok := v.(int64); !ok {
			return bad("an integer")
		}
	case OpPrefix, OpSuffix:
		if _, ok := v.(string); !ok {
			return bad("a string")
		}
	default:
		return &condErr{head: "unknown operator " + quote(string(op)) + " in condition " + quote(key), tail: "(expected one of eq, neq, in, not_in, lt, lte, gt, gte, prefix, suffix)"}
	}
	return nil
}

// checkValue returns why v is outside canon's value model (or nests deeper than maxNesting),
// or "".
func checkValue(v any, depth int) string {
	if depth > maxNesting {
		return fmt.Sprintf("nesting deeper than %d levels", maxNesting)
	}
	switch v := v.(type) {
	case nil, bool:
	case string:
		if !utf8.ValidString(v) {
			return "invalid UTF-8"
		}
	case int64:
		if v > maxSafeInt || v < -maxSafeInt {
			return "integer " + strconv.FormatInt(v, 10) + " outside ±(2^53-1)"
		}
	case []any:
		for _, e := range v {
			if m := checkValue(e, depth+1); m != "" {
				return m
			}
		}
	case map[string]any:
		for k, e := range v {
			if !utf8.ValidString(k) {
				return "invalid UTF-8 in a key"
			}
			if m := checkValue(e, depth+1); m != "" {
				return m
			}
		}
	default:
		return fmt.Sprintf("unsupported type %T", v)
	}
	return ""
}

const maxSafeInt = 1<<53 - 1

var kindNames = [...]string{"null", "a boolean", "a string", "an integer", "a list", "an object", "an unsupported value"}

// kindsPhrase renders a kind set: "a string or an integer".
func kindsPhrase(k canon.Kind) string {
	var names []string
	for i, n := range kindNames {
		if k&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	switch len(names) {
	case 0:
		return "nothing"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// kindPhrase names the type of v for a message: "a boolean", "a Go float64 (not a latch value)".
func kindPhrase(v any) string {
	k := canon.KindOf(v)
	if k == canon.KindOther {
		return fmt.Sprintf("a Go %T (not a latch value)", v)
	}
	if k == canon.KindNull {
		return "null"
	}
	return kindsPhrase(k)
}

// describeValue is kindPhrase plus the value when it is short: `a string "5"`.
func describeValue(v any) string {
	switch canon.KindOf(v) {
	case canon.KindNull, canon.KindList, canon.KindObject, canon.KindOther:
		return kindPhrase(v)
	}
	return kindPhrase(v) + " " + valueText(v)
}

// precond is what evaluation needs of one condition, prepared once at parse time.
type precond struct {
	arg     string
	key     string
	op      Op
	operand any
	bad     string     // non-empty: the condition is malformed and never holds, for this reason
	kinds   canon.Kind // the argument types the operator applies to
	num     int64
	str     string
	list    []any
	strs    map[string]struct{} // membership sets for long lists
	ints    map[int64]struct{}
	opText  string // the operand as traces show it
	absent  string // `argument "amount" is absent`
	wrong   string // `argument "amount" is `
	want    string // `, want an integer`
}

// setThreshold is the list length from which in/not_in use a hash set for scalars.
const setThreshold = 8

// Resolve returns c as [Conditions.Eval] applies it: Arg and Op from the fields when Op is set,
// else split from Key, and Key filled in when it is empty. The error says why Eval would treat c
// as malformed (a malformed condition never holds). Code that reasons about conditions rather
// than evaluating them (containment of delegated grants, package authority) works on resolved
// conditions so that it agrees with Eval on what a condition means.
func (c Condition) Resolve() (Condition, error) {
	arg, op, key, bad := resolve(&c)
	if bad != "" {
		return Condition{}, errors.New(bad)
	}
	return Condition{Key: key, Arg: arg, Op: op, Operand: c.Operand, Pos: c.Pos}, nil
}

// resolve is the one place that decides what a condition means: its argument, operator and
// key, or (bad non-empty) why it is malformed.
func resolve(c *Condition) (arg string, op Op, key, bad string) {
	arg, op, key = c.Arg, c.Op, c.Key
	if op == "" && key != "" {
		a, o, ce := splitConditionKey(key)
		if ce != nil {
			return arg, op, key, "invalid condition: " + ce.head
		}
		arg, op = a, o
	}
	if key == "" {
		key = arg + "_" + string(op)
	}
	if arg == "" {
		return arg, op, key, "invalid condition: empty argument name"
	}
	if r := reservedSubject(arg); r != "" {
		return arg, op, key, "invalid condition: reserved subject " + quote(r)
	}
	if ce := checkOperand(key, op, c.Operand); ce != nil {
		return arg, op, key, "invalid condition: " + ce.head
	}
	return arg, op, key, ""
}

// Holds reports whether every condition holds for args: the verdict of [Conditions.Eval]
// without the explanations. It stops at the first condition that does not hold and does not
// allocate, so a caller that needs a verdict on every call (the authority axis) can ask Eval
// for the explanations only when the verdict is no. Both decide through the same code.
func (c Conditions) Holds(args map[string]any) bool {
	for i := range c {
		pc := prepareCondition(&c[i])
		if !pc.holds(args) {
			return false
		}
	}
	return true
}

// prepareCondition is the part of compileCondition that deciding needs: the resolved
// condition, the argument types the operator applies to, and the operand in typed form. It does
// not allocate (for a condition with a key).
func prepareCondition(c *Condition) precond {
	pc := precond{operand: c.Operand}
	pc.arg, pc.op, pc.key, pc.bad = resolve(c)
	if pc.bad != "" {
		return pc
	}
	switch pc.op {
	case OpEq, OpNeq:
		pc.kinds = canon.KindOf(c.Operand)
	case OpIn, OpNotIn:
		pc.list = c.Operand.([]any)
		for _, e := range pc.list {
			pc.kinds |= canon.KindOf(e)
		}
	case OpLt, OpLte, OpGt, OpGte:
		pc.kinds = canon.KindInt
		pc.num = c.Operand.(int64)
	case OpPrefix, OpSuffix:
		pc.kinds = canon.KindString
		pc.str = c.Operand.(string)
	}
	return pc
}

// holds is the verdict of evalOne.
func (pc *precond) holds(args map[string]any) bool {
	if pc.bad != "" {
		return false
	}
	v, ok := args[pc.arg]
	return ok && canon.KindOf(v)&pc.kinds != 0 && pc.decide(v)
}

// decide reports whether the condition holds for v, an argument of one of the types the
// operator applies to (pc.kinds).
func (pc *precond) decide(v any) bool {
	switch pc.op {
	case OpEq:
		return Equal(v, pc.operand)
	case OpNeq:
		return !Equal(v, pc.operand)
	case OpIn:
		return pc.member(v)
	case OpNotIn:
		return !pc.member(v)
	case OpLt:
		return v.(int64) < pc.num
	case OpLte:
		return v.(int64) <= pc.num
	case OpGt:
		return v.(int64) > pc.num
	case OpGte:
		return v.(int64) >= pc.num
	case OpPrefix:
		return strings.HasPrefix(v.(string), pc.str)
	case OpSuffix:
		return strings.HasSuffix(v.(string), pc.str)
	}
	return false
}

func compileCondition(c *Condition) precond {
	pc := prepareCondition(c)
	if pc.bad != "" {
		return pc
	}
	switch pc.op {
	case OpIn, OpNotIn:
		var ns, ni int
		for _, e := range pc.list {
			switch canon.KindOf(e) {
			case canon.KindString:
				ns++
			case canon.KindInt:
				ni++
			}
		}
		if ns >= setThreshold {
			pc.strs = make(map[string]struct{}, ns)
		}
		if ni >= setThreshold {
			pc.ints = make(map[int64]struct{}, ni)
		}
		for _, e := range pc.list {
			switch e := e.(type) {
			case string:
				if pc.strs != nil {
					pc.strs[e] = struct{}{}
				}
			case int64:
				if pc.ints != nil {
					pc.ints[e] = struct{}{}
				}
			}
		}
	}
	pc.opText = valueText(c.Operand)
	pc.absent = "argument " + quote(pc.arg) + " is absent"
	pc.wrong = "argument " + quote(pc.arg) + " is "
	pc.want = ", want " + kindsPhrase(pc.kinds)
	return pc
}

func evalInto(res []CondResult, conds Conditions, pcs []precond, args map[string]any) bool {
	all := true
	for j := range conds {
		res[j] = evalOne(&pcs[j], args)
		all = all && res[j].Held
	}
	return all
}

func evalOne(pc *precond, args map[string]any) CondResult {
	r := CondResult{Key: pc.key}
	if pc.bad != "" {
		r.Why = pc.bad
		return r
	}
	v, ok := args[pc.arg]
	if !ok {
		r.Why = pc.absent
		return r
	}
	if canon.KindOf(v)&pc.kinds == 0 {
		r.Why = pc.wrong + kindPhrase(v) + pc.want
		return r
	}
	// The verdict comes from decide, shared with Holds; the rest is the explanation, built in
	// a stack buffer: one allocation per condition, for the string.
	r.Held = pc.decide(v)
	var buf [160]byte
	b := buf[:0]
	switch pc.op {
	case OpEq, OpNeq:
		eq := r.Held == (pc.op == OpEq)
		b = appendText(b, v)
		b = append(b, pick(eq, " == ", " != ")...)
	case OpIn, OpNotIn:
		in := r.Held == (pc.op == OpIn)
		b = appendText(b, v)
		b = append(b, pick(in, " in ", " not in ")...)
	case OpLt, OpLte, OpGt, OpGte:
		var sym string
		switch pc.op {
		case OpLt:
			sym = pick(r.Held, " < ", " >= ")
		case OpLte:
			sym = pick(r.Held, " <= ", " > ")
		case OpGt:
			sym = pick(r.Held, " > ", " <= ")
		case OpGte:
			sym = pick(r.Held, " >= ", " < ")
		}
		b = strconv.AppendInt(b, v.(int64), 10)
		b = append(b, sym...)
	case OpPrefix:
		b = appendText(b, v)
		b = append(b, pick(r.Held, " has prefix ", " does not have prefix ")...)
	case OpSuffix:
		b = appendText(b, v)
		b = append(b, pick(r.Held, " has suffix ", " does not have suffix ")...)
	}
	r.Why = string(append(b, pc.opText...))
	return r
}

func pick(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func (pc *precond) member(v any) bool {
	switch v := v.(type) {
	case string:
		if pc.strs != nil {
			_, ok := pc.strs[v]
			return ok
		}
		for _, e := range pc.list {
			if s, ok := e.(string); ok && s == v {
				return true
			}
		}
		return false
	case int64:
		if pc.ints != nil {
			_, ok := pc.ints[v]
			return ok
		}
		for _, e := range pc.list {
			if n, ok := e.(int64); ok && n == v {
				return true
			}
		}
		return false
	}
	for _, e := range pc.list {
		if Equal(v, e) {
			return true
		}
	}
	return false
}

// Equal is type-strict recursive equality over canon's value model, as eq and in evaluate it:
// int64(5) is not "5", true is not 1, and values of any other Go type equal nothing.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !Equal(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// textLimit caps how much of a value a trace or message shows.
const textLimit = 64

// valueText renders a value compactly for traces and messages, JSON-like with non-ASCII
// escaped, cut at about textLimit bytes with "…".
func valueText(v any) string { return string(appendText(nil, v)) }

// appendText appends valueText(v) to b.
func appendText(b []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		return appendQuoted(b, v)
	case []any, map[string]any:
		start := len(b)
		b = appendValue(b, v)
		if len(b)-start > textLimit {
			b = append(b[:start+textLimit], "…"...)
		}
		return b
	}
	return appendValue(b, v)
}

// quote quotes s for traces and messages, shortened to about textLimit bytes. Non-ASCII is
// escaped so that text that only looks the same (NFC and NFD, homoglyphs) reads differently.
func quote(s string) string { return string(appendQuoted(nil, s)) }

func appendQuoted(b []byte, s string) []byte {
	if len(s) <= textLimit {
		return strconv.AppendQuoteToASCII(b, s)
	}
	return append(strconv.AppendQuoteToASCII(b, cut(s, textLimit)), "…"...)
}

// cut returns s shortened to at most n bytes without splitting a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// appendValue appends v as JSON-like text, escaping non-ASCII and giving up on containers
// once b is longer than textLimit (the caller cuts).
func appendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case string:
		return strconv.AppendQuoteToASCII(b, cut(v, textLimit))
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if len(b) > 2*textLimit {
				break
			}
			b = appendValue(b, e)
		}
		return append(b, ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			if len(b) > 2*textLimit {
				break
			}
			b = strconv.AppendQuoteToASCII(b, cut(k, textLimit))
			b = append(b, ':')
			b = appendValue(b, v[k])
		}
		return append(b, '}')
	}
	return fmt.Appendf(b, "%T", v)
}
