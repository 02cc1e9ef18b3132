package policy

import (
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/latchkit/latch/canon"
)

// Type is the declared type of an argument in an action's `arguments:` section. The types are
// those of canonical JSON values: there is no number type, because no fractional number is
// ever a latch value.
type Type string

// Argument types.
const (
	TypeString  Type = "string"
	TypeInteger Type = "integer"
	TypeBoolean Type = "boolean"
	TypeObject  Type = "object"
	TypeArray   Type = "array"
	TypeNull    Type = "null"
)

var types = []Type{TypeString, TypeInteger, TypeBoolean, TypeObject, TypeArray, TypeNull}

// Kind returns the canon value kind of t (0 for a type that is not one of the constants).
func (t Type) Kind() canon.Kind {
	switch t {
	case TypeString:
		return canon.KindString
	case TypeInteger:
		return canon.KindInt
	case TypeBoolean:
		return canon.KindBool
	case TypeObject:
		return canon.KindObject
	case TypeArray:
		return canon.KindList
	case TypeNull:
		return canon.KindNull
	}
	return 0
}

// Argument is one entry of an action's `arguments:` section: what a call must (or may) pass
// under that name.
type Argument struct {
	Name      string
	Type      Type
	Optional  bool     // the call may leave it out; every other declared argument is required
	Min, Max  *int64   // integers: inclusive bounds, nil when absent
	MaxLength int      // strings: the most Unicode code points, 0 when absent
	Enum      []string // strings: the only values allowed, nil when absent
	Display   *Display // how a person should read it, nil when absent
	// Editable says how an approver may change the argument when granting a request
	// (docs/approvals.md#approve-with-edits); nil when it may not change.
	Editable *Editable
	// Redact is how the value is shown to people (docs/policy.md#redaction); RedactNone when
	// it is shown in full.
	Redact Redaction
	// RedactSet says the policy wrote `redact:` for the argument, false included: `latch
	// check` does not warn about a secret-looking name its author has already decided on.
	RedactSet bool
	Pos       Position // of the argument's name
}

// Editable is an argument's `editable:` entry: the only change an approver may make to it.
// Every form narrows what the call does, never widens it: an integer may only decrease
// (Decrease), and not below Min when it is set.
type Editable struct {
	Decrease bool   // integers: the approved value is at most the requested one
	Min      *int64 // integers: the approved value is at least this; nil when absent
}

// Display is an argument's presentation hint for the people who read it (approvers,
// operators). It never changes what is decided or hashed.
type Display struct {
	Label string // a human name for the argument, "" when absent
	Money *Money // the integer is an amount of money in minor units, nil when not
}

// Money says how to read an integer as money: MinorUnits digits after the decimal point, in
// the currency named by Currency (a fixed ISO 4217 code) or by the string argument
// CurrencyArg. At most one of the two is set.
type Money struct {
	MinorUnits  int
	Currency    string
	CurrencyArg string
}

// Limits on the arguments section.
const (
	maxMinorUnits = 18 // 10^18 still fits an int64, and no currency has more than 4
	argNameLimit  = 128
)

// Argument check reasons, as Evaluate, receipts and errors report them.
const (
	ReasonMissingArgument  = "missing_argument"
	ReasonInvalidArguments = "invalid_arguments"
)

// ArgumentCheck is the verdict of [Action.CheckArguments]: Reason is "" when the arguments fit
// what the action needs, else [ReasonMissingArgument] or [ReasonInvalidArguments] with the
// argument at fault, the JSON pointer of the offending value (of the missing member, for a
// missing argument) and a message for people.
type ArgumentCheck struct {
	Reason   string
	Argument string
	Pointer  string
	Msg      string
}

// OK reports whether the arguments fit.
func (c ArgumentCheck) OK() bool { return c.Reason == "" }

// String renders the check as `missing_argument: amout (…)`, or "ok".
func (c ArgumentCheck) String() string {
	if c.OK() {
		return "ok"
	}
	return c.Reason + ": " + c.Argument + " (" + c.Msg + ")"
}

// Requirement is an argument an action needs on every call, and the first place that names it.
type Requirement struct {
	Argument string
	By       string   // "rule 0 (amount_gt)", "effect template", "resource template", "the arguments: section"
	Pos      Position // of that place; zero for a policy built by hand
}

// Requirements returns the arguments every call to a must pass, in the order the policy first
// names them: each declared argument that is not optional, and each argument a condition or a
// template names unless it is declared optional. A call that lacks one is denied
// missing_argument, so that a misspelt name fails closed instead of making a condition
// silently false.
func (a *Action) Requirements() []Requirement {
	if a == nil {
		return nil
	}
	var reqs []Requirement
	seen := map[string]bool{}
	optional := map[string]bool{}
	for _, d := range a.Arguments {
		if d.Optional {
			optional[d.Name] = true
		}
	}
	add := func(name, by string, pos Position) {
		if name == "" || seen[name] || optional[name] {
			return
		}
		seen[name] = true
		reqs = append(reqs, Requirement{Argument: name, By: by, Pos: pos})
	}
	for _, d := range a.Arguments {
		add(d.Name, "the arguments: section", d.Pos)
	}
	for i := range a.Rules {
		for j := range a.Rules[i].When {
			c := &a.Rules[i].When[j]
			arg, _, key, bad := resolve(c)
			if bad != "" {
				continue
			}
			add(arg, "rule "+strconv.Itoa(i)+" ("+key+")", c.Pos)
		}
	}
	for _, n := range a.Effect.Placeholders() {
		if n != ResourcePlaceholder {
			add(n, "effect template", a.Effect.pos)
		}
	}
	for _, n := range a.Resource.Placeholders() {
		add(n, "resource template", a.Resource.pos)
	}
	return reqs
}

// Argument returns the declared argument named name, or nil.
func (a *Action) Argument(name string) *Argument {
	if a == nil {
		return nil
	}
	for _, d := range a.Arguments {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// argSchema is what checking a call's arguments needs, prepared once per action.
type argSchema struct {
	required []Requirement
	declared map[string]*Argument
	order    []*Argument
	closed   bool // additional: false
}

func compileSchema(a *Action) argSchema {
	s := argSchema{required: a.Requirements(), order: a.Arguments, closed: a.RefuseAdditional}
	if len(a.Arguments) > 0 {
		s.declared = make(map[string]*Argument, len(a.Arguments))
		for _, d := range a.Arguments {
			s.declared[d.Name] = d
		}
	}
	return s
}

// CheckArguments checks a call's arguments (canon's value model) against what the action
// needs: every requirement present ([Action.Requirements]), every declared argument of its
// declared type and within its bounds, and no undeclared argument when the action says
// `additional: false`. It is pure and, when the arguments fit, does not allocate.
func (a *Action) CheckArguments(args map[string]any) ArgumentCheck {
	if a == nil {
		return ArgumentCheck{}
	}
	s := compileSchema(a)
	return s.check(a.Name, args)
}

func (s *argSchema) check(action string, args map[string]any) ArgumentCheck {
	for i := range s.required {
		r := &s.required[i]
		if _, ok := args[r.Argument]; !ok {
			return ArgumentCheck{
				Reason: ReasonMissingArgument, Argument: r.Argument, Pointer: pointer(r.Argument),
				Msg: "argument " + quote(r.Argument) + " is required by " + r.By + " of action " + quote(action) + " and the call does not pass it",
			}
		}
	}
	for _, d := range s.order {
		v, ok := args[d.Name]
		if !ok {
			continue
		}
		if c := d.check(v); !c.OK() {
			c.Msg += " (argument of action " + quote(action) + ")"
			return c
		}
	}
	if s.closed && len(args) > len(s.declared) || s.closed && s.declared == nil && len(args) > 0 {
		return s.extra(action, args)
	}
	if s.closed {
		for k := range args {
			if _, ok := s.declared[k]; !ok {
				return s.extra(action, args)
			}
		}
	}
	return ArgumentCheck{}
}

// extra reports the first undeclared argument in key order, so the verdict is deterministic.
func (s *argSchema) extra(action string, args map[string]any) ArgumentCheck {
	var names []string
	for k := range args {
		if _, ok := s.declared[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return ArgumentCheck{}
	}
	return ArgumentCheck{
		Reason: ReasonInvalidArguments, Argument: names[0], Pointer: pointer(names[0]),
		Msg: "argument " + quote(names[0]) + " is not declared and action " + quote(action) + " says additional: false",
	}
}

// Check checks one value (canon's value model) against the declaration: its type and bounds.
// It is the check [Action.CheckArguments] applies to each declared argument a call passes.
func (d *Argument) Check(v any) ArgumentCheck {
	return d.check(v)
}

// check checks one present value against the declaration.
func (d *Argument) check(v any) ArgumentCheck {
	bad := func(msg string) ArgumentCheck {
		return ArgumentCheck{Reason: ReasonInvalidArguments, Argument: d.Name, Pointer: pointer(d.Name), Msg: "argument " + quote(d.Name) + " " + msg}
	}
	if canon.KindOf(v)&d.Type.Kind() == 0 {
		return bad("is " + kindPhrase(v) + ", want " + typePhrase(d.Type))
	}
	switch d.Type {
	case TypeInteger:
		n := v.(int64)
		if d.Min != nil && n < *d.Min {
			return bad("is " + strconv.FormatInt(n, 10) + ", below its min " + strconv.FormatInt(*d.Min, 10))
		}
		if d.Max != nil && n > *d.Max {
			return bad("is " + strconv.FormatInt(n, 10) + ", above its max " + strconv.FormatInt(*d.Max, 10))
		}
	case TypeString:
		str := v.(string)
		if d.MaxLength > 0 && len(str) > d.MaxLength { // bytes ≥ code points: count only when it may matter
			if n := utf8.RuneCountInString(str); n > d.MaxLength {
				return bad("has " + strconv.Itoa(n) + " characters, more than its max_length " + strconv.Itoa(d.MaxLength))
			}
		}
		if d.Enum != nil && !contains(d.Enum, str) {
			return bad("is " + quote(str) + ", not one of its enum values " + enumText(d.Enum))
		}
	}
	return ArgumentCheck{}
}

func enumText(l []string) string {
	parts := make([]string, len(l))
	for i, s := range l {
		parts[i] = quote(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func typePhrase(t Type) string {
	if t == TypeNull {
		return "null"
	}
	return kindsPhrase(t.Kind())
}

// pointer is the JSON pointer (RFC 6901) of a top-level member.
func pointer(name string) string {
	if !strings.ContainsAny(name, "~/") {
		return "/" + name
	}
	return "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

// Keys of an argument declaration.
var (
	argumentKeys = []string{"type", "optional", "min", "max", "max_length", "enum", "display", "editable", "redact"}
	editableKeys = []string{"decrease", "min"}
	displayKeys  = []string{"label", "money"}
	moneyKeys    = []string{"minor_units", "currency", "currency_arg"}
)

// checkArgName refuses argument names that cannot be a plain top-level key: a dotted, slashed
// or bracketed name reads like a path into a nested object, and latch has no path syntax, so it
// would silently test (or declare) a different, top-level key.
func checkArgName(name string) string {
	switch {
	case name == "":
		return "empty argument name"
	case len(name) > argNameLimit:
		return "argument name longer than " + strconv.Itoa(argNameLimit) + " bytes"
	case strings.ContainsAny(name, ".[]/"):
		return "argument name " + quote(name) + " looks like a path into a nested value; conditions and declarations name top-level arguments only (test a nested value by passing it as its own top-level argument)"
	}
	return ""
}

// argumentsSection parses an action's `arguments:` mapping.
func (p *parser) argumentsSection(e entry, a *Action, where string) *Error {
	if err := p.mapping(e, "arguments "+where, "a mapping from argument names to declarations like {type: integer}"); err != nil {
		return err
	}
	a.Arguments = []*Argument{}
	for _, en := range entries(e.v) {
		name := en.k.Value
		if name == "additional" {
			// Reserved for the flag, whatever its value, so that no document can read as both
			// the flag and a declaration.
			allowed, err := p.bool(en, "additional "+where+" (whether undeclared arguments are allowed; an argument named additional cannot be declared)")
			if err != nil {
				return err
			}
			a.RefuseAdditional = !allowed
			continue
		}
		if msg := checkArgName(name); msg != "" {
			return p.errf(en.k, "bad argument name in the arguments %s: %s", where, msg)
		}
		d, err := p.argument(en, where)
		if err != nil {
			return err
		}
		a.Arguments = append(a.Arguments, d)
	}
	return nil
}

func (p *parser) argument(e entry, where string) (*Argument, *Error) {
	name := e.k.Value
	what := "argument " + quote(name) + " " + where
	if e.v.Kind != yaml.MappingNode {
		return nil, p.errf(at(e), "%s is %s (expected a mapping such as {type: string}; additional: takes true or false)", what, describeNode(e.v))
	}
	d := &Argument{Name: name, Pos: posOf(e.k)}
	var typeNode *yaml.Node
	var minN, maxN, lenN, enumN, moneyN, editN, redactN *yaml.Node
	for _, en := range entries(e.v) {
		var err *Error
		switch en.k.Value {
		case "type":
			typeNode = en.k
			var s string
			if isNull(en.v) && en.v.Value == "null" {
				s = string(TypeNull) // `type: null` reads as the type, not as no type
			} else {
				s, err = p.str(en, "type of "+what)
			}
			if err == nil {
				d.Type = Type(s)
				if d.Type.Kind() == 0 {
					names := make([]string, len(types))
					for i, t := range types {
						names[i] = string(t)
					}
					err = p.errf(en.v, "unknown type %s for %s (expected one of %s; there is no number type: money is integer minor units)", quote(s), what, strings.Join(names, ", "))
				}
			}
		case "optional":
			d.Optional, err = p.bool(en, "optional of "+what)
		case "min", "max":
			var n int64
			if n, err = p.int(en, en.k.Value+" of "+what); err == nil {
				if en.k.Value == "min" {
					d.Min, minN = &n, en.k
				} else {
					d.Max, maxN = &n, en.k
				}
			}
		case "max_length":
			var n int64
			if n, err = p.int(en, "max_length of "+what); err == nil && n < 1 {
				err = p.errf(en.v, "max_length of %s is %d (expected at least 1)", what, n)
			}
			d.MaxLength, lenN = int(n), en.k
		case "enum":
			enumN = en.k
			d.Enum, err = p.enum(en, what)
		case "display":
			d.Display, moneyN, err = p.display(en, what)
		case "editable":
			editN = en.k
			d.Editable, err = p.editable(en, what)
		case "redact":
			redactN = en.k
			d.Redact, err = p.redact(en, what)
			d.RedactSet = true
		default:
			err = p.unknownKey(en.k, "in "+what, argumentKeys)
		}
		if err != nil {
			return nil, err
		}
	}
	if typeNode == nil {
		return nil, p.errf(e.k, "%s has no type (expected type: string, integer, boolean, object, array or null)", what)
	}
	onlyFor := func(n *yaml.Node, t Type) *Error {
		if n != nil && d.Type != t {
			return p.errf(n, "%s applies to %s arguments, and %s is declared %s", n.Value, t, what, d.Type)
		}
		return nil
	}
	for _, c := range []struct {
		n *yaml.Node
		t Type
	}{{minN, TypeInteger}, {maxN, TypeInteger}, {lenN, TypeString}, {enumN, TypeString}, {editN, TypeInteger}} {
		if err := onlyFor(c.n, c.t); err != nil {
			return nil, err
		}
	}
	if d.Redact == RedactLast4 && d.Type != TypeString && d.Type != TypeInteger {
		return nil, p.errf(redactN, "redact: last4 applies to string and integer arguments, and %s is declared %s (say redact: true or redact: hash)", what, d.Type)
	}
	if d.Redact != RedactNone && editN != nil {
		// An approver edits what they can read; a redacted value is never shown in full.
		return nil, p.errf(redactN, "%s is both redact and editable (an approver cannot edit a value they are not shown)", what)
	}
	if d.Redact != RedactNone && moneyN != nil {
		return nil, p.errf(redactN, "%s is both redact and display money (the amount would be shown in full)", what)
	}
	if moneyN != nil && d.Type != TypeInteger {
		return nil, p.errf(moneyN, "display money applies to integer arguments (amounts in minor units), and %s is declared %s", what, d.Type)
	}
	if d.Min != nil && d.Max != nil && *d.Min > *d.Max {
		return nil, p.errf(maxN, "max %d of %s is below its min %d (no value could pass)", *d.Max, what, *d.Min)
	}
	if d.MaxLength > 0 {
		for _, s := range d.Enum {
			if utf8.RuneCountInString(s) > d.MaxLength {
				return nil, p.errf(enumN, "enum value %s of %s is longer than its max_length %d", quote(s), what, d.MaxLength)
			}
		}
	}
	return d, nil
}

// editable parses an argument's `editable:` mapping: decrease: true (the one change an approver
// may make today) and an optional floor min.
func (p *parser) editable(e entry, what string) (*Editable, *Error) {
	if err := p.mapping(e, "editable of "+what, "a mapping such as {decrease: true, min: 100}"); err != nil {
		return nil, err
	}
	ed := &Editable{}
	var decreaseN *yaml.Node
	for _, en := range entries(e.v) {
		var err *Error
		switch en.k.Value {
		case "decrease":
			decreaseN = en.k
			ed.Decrease, err = p.bool(en, "decrease of the editable of "+what)
			if err == nil && !ed.Decrease {
				err = p.errf(en.v, "decrease of the editable of %s is false (an approver's edit may only narrow the call: say decrease: true, or leave editable out so the argument may not change)", what)
			}
		case "min":
			var n int64
			if n, err = p.int(en, "min of the editable of "+what); err == nil {
				ed.Min = &n
			}
		default:
			err = p.unknownKey(en.k, "in the editable of "+what, editableKeys)
		}
		if err != nil {
			return nil, err
		}
	}
	if decreaseN == nil {
		return nil, p.errf(e.k, "editable of %s does not say how it may change (expected decrease: true)", what)
	}
	return ed, nil
}

// redact parses an argument's `redact:` value: true (nothing shown), false (shown in full, said
// on purpose), last4 or hash.
func (p *parser) redact(e entry, what string) (Redaction, *Error) {
	if n := e.v; n.Kind == yaml.ScalarNode && n.Tag == tagBool {
		if strings.EqualFold(n.Value, "true") {
			return RedactFull, nil
		}
		return RedactNone, nil
	}
	if n := e.v; n.Kind == yaml.ScalarNode && n.Tag == tagStr {
		switch Redaction(n.Value) {
		case RedactLast4, RedactHash:
			return Redaction(n.Value), nil
		}
	}
	return RedactNone, p.errf(at(e), "redact of %s is %s (expected true, false, last4 or hash)", what, describeNode(e.v))
}

func (p *parser) enum(e entry, what string) ([]string, *Error) {
	if e.v.Kind != yaml.SequenceNode || len(e.v.Content) == 0 {
		return nil, p.errf(at(e), "enum of %s is %s (expected a non-empty list of strings)", what, describeNode(e.v))
	}
	out := make([]string, 0, len(e.v.Content))
	for _, n := range e.v.Content {
		s, err := p.str(entry{n, n}, "enum value of "+what)
		if err != nil {
			return nil, err
		}
		if contains(out, s) {
			return nil, p.errf(n, "enum value %s of %s is listed twice", quote(s), what)
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *parser) display(e entry, what string) (*Display, *yaml.Node, *Error) {
	if err := p.mapping(e, "display of "+what, "a mapping with label and/or money"); err != nil {
		return nil, nil, err
	}
	d := &Display{}
	var moneyN *yaml.Node
	for _, en := range entries(e.v) {
		var err *Error
		switch en.k.Value {
		case "label":
			if d.Label, err = p.str(en, "label of "+what); err == nil && strings.TrimSpace(d.Label) == "" {
				err = p.errf(en.v, "empty label of %s (leave label out instead)", what)
			}
		case "money":
			moneyN = en.k
			d.Money, err = p.money(en, what)
		default:
			err = p.unknownKey(en.k, "in the display of "+what, displayKeys)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if d.Label == "" && d.Money == nil {
		return nil, nil, p.errf(e.v, "empty display of %s (expected label and/or money)", what)
	}
	return d, moneyN, nil
}

func (p *parser) money(e entry, what string) (*Money, *Error) {
	if err := p.mapping(e, "money of "+what, "a mapping with minor_units and currency or currency_arg"); err != nil {
		return nil, err
	}
	m := &Money{}
	var hasUnits bool
	var curN *yaml.Node
	for _, en := range entries(e.v) {
		var err *Error
		switch en.k.Value {
		case "minor_units":
			hasUnits = true
			var n int64
			if n, err = p.int(en, "minor_units of "+what); err == nil && (n < 0 || n > maxMinorUnits) {
				err = p.errf(en.v, "minor_units of %s is %d (expected 0 to %d: the digits after the decimal point, 2 for cents)", what, n, maxMinorUnits)
			}
			m.MinorUnits = int(n)
		case "currency":
			if curN != nil {
				return nil, p.errf(en.k, "both currency and currency_arg in the money of %s (expected one)", what)
			}
			curN = en.k
			if m.Currency, err = p.str(en, "currency of "+what); err == nil && !knownCurrency(m.Currency) {
				err = p.errf(en.v, "currency %s of %s is not an ISO 4217 code (expected three capital letters such as EUR)", quote(m.Currency), what)
			}
		case "currency_arg":
			if curN != nil {
				return nil, p.errf(en.k, "both currency and currency_arg in the money of %s (expected one)", what)
			}
			curN = en.k
			if m.CurrencyArg, err = p.str(en, "currency_arg of "+what); err == nil {
				if msg := checkArgName(m.CurrencyArg); msg != "" {
					err = p.errf(en.v, "%s in currency_arg of %s", msg, what)
				}
			}
		default:
			err = p.unknownKey(en.k, "in the money of "+what, moneyKeys)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasUnits {
		return nil, p.errf(e.k, "money of %s has no minor_units (expected the digits after the decimal point, such as minor_units: 2)", what)
	}
	return m, nil
}

// checkAction checks, once the whole action is read, what depends on more than one key: every
// argument a condition or template names is declared (when the action declares any), fits its
// operators, and a money hint's currency_arg is a declared string.
func (p *parser) checkAction(a *Action, n *yaml.Node, effectN, resourceN *yaml.Node) *Error {
	where := "in action " + quote(a.Name)
	if a.Arguments == nil {
		return nil
	}
	declared := func() string {
		names := make([]string, 0, len(a.Arguments))
		for _, d := range a.Arguments {
			names = append(names, d.Name)
		}
		sort.Strings(names)
		if len(names) == 0 {
			return "none"
		}
		return strings.Join(names, ", ")
	}
	for i := range a.Rules {
		for j := range a.Rules[i].When {
			c := &a.Rules[i].When[j]
			d := a.Argument(c.Arg)
			pos := &yaml.Node{Line: c.Pos.Line, Column: c.Pos.Column}
			if d == nil {
				return p.errf(pos, "condition %s in rule %d of action %s names argument %s, which arguments: does not declare (declared: %s)",
					quote(c.Key), i, quote(a.Name), quote(c.Arg), declared())
			}
			if msg := operatorFits(c, d); msg != "" {
				return p.errf(pos, "condition %s in rule %d of action %s %s", quote(c.Key), i, quote(a.Name), msg)
			}
		}
	}
	for _, t := range []struct {
		tmpl *Template
		n    *yaml.Node
		what string
	}{{a.Effect, effectN, "effect template"}, {a.Resource, resourceN, "resource template"}} {
		for _, name := range t.tmpl.Placeholders() {
			if name == ResourcePlaceholder {
				continue
			}
			d := a.Argument(name)
			switch {
			case d == nil:
				return p.errf(t.n, "%s %s %s names argument %s, which arguments: does not declare (declared: %s)",
					t.what, quote(t.tmpl.src), where, quote(name), declared())
			case d.Type != TypeString && d.Type != TypeInteger:
				return p.errf(t.n, "%s %s %s uses argument %s, declared %s (a placeholder needs a string or an integer)",
					t.what, quote(t.tmpl.src), where, quote(name), d.Type)
			case d.Optional:
				return p.errf(t.n, "%s %s %s uses argument %s, declared optional (a placeholder is rendered on every call, so its argument is required)",
					t.what, quote(t.tmpl.src), where, quote(name))
			case d.Redact != RedactNone:
				// The effect key and resource are shown everywhere; a redacted value in one
				// would be shown in full.
				return p.errf(t.n, "%s %s %s uses argument %s, declared redact (the rendered %s is shown in full on every surface)",
					t.what, quote(t.tmpl.src), where, quote(name), t.what)
			case d.Editable != nil:
				// An edit changes what is done, never which effect or target it is.
				return p.errf(t.n, "%s %s %s uses argument %s, declared editable (an approver's edit would change which effect or target the call is)",
					t.what, quote(t.tmpl.src), where, quote(name))
			}
		}
	}
	for _, d := range a.Arguments {
		if d.Display == nil || d.Display.Money == nil || d.Display.Money.CurrencyArg == "" {
			continue
		}
		c := a.Argument(d.Display.Money.CurrencyArg)
		if c == nil || c.Type != TypeString {
			pos := &yaml.Node{Line: d.Pos.Line, Column: d.Pos.Column}
			return p.errf(pos, "display money of argument %s %s takes its currency from %s, which is not a declared string argument",
				quote(d.Name), where, quote(d.Display.Money.CurrencyArg))
		}
	}
	return nil
}

// operatorFits says why condition c can never hold for an argument declared d, or "".
func operatorFits(c *Condition, d *Argument) string {
	want := d.Type.Kind()
	switch c.Op {
	case OpLt, OpLte, OpGt, OpGte:
		if d.Type != TypeInteger {
			return "compares argument " + quote(c.Arg) + ", declared " + string(d.Type) + " (" + string(c.Op) + " applies to integers)"
		}
	case OpPrefix, OpSuffix:
		if d.Type != TypeString {
			return "tests argument " + quote(c.Arg) + ", declared " + string(d.Type) + " (" + string(c.Op) + " applies to strings)"
		}
	case OpEq, OpNeq:
		if canon.KindOf(c.Operand)&want == 0 {
			return "compares argument " + quote(c.Arg) + ", declared " + string(d.Type) + ", with " + describeValue(c.Operand) + " (the types never match)"
		}
	case OpIn, OpNotIn:
		for _, m := range c.Operand.([]any) {
			if canon.KindOf(m)&want == 0 {
				return "lists " + describeValue(m) + " for argument " + quote(c.Arg) + ", declared " + string(d.Type) + " (a member of another type never matches)"
			}
		}
	}
	return ""
}
