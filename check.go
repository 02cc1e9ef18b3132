package latch

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
)

// CheckError is one problem [Guard.Check] found between the policy and a function given to
// [Protect]: Action is the action name, Type the Go type of its arguments, Argument the
// argument concerned ("" when the problem is the action itself), Pos where the policy names it.
type CheckError struct {
	Action   string
	Type     string
	Argument string
	Pos      policy.Position
	Msg      string
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("latch: check %s (%s): %s", e.Action, e.Type, e.Msg)
}

// protection is what one Protect call was given.
type protection struct {
	action string
	typ    reflect.Type
}

// protections records the Protect calls of a guard, for Check.
type protections struct {
	mu   sync.Mutex
	list []protection
}

func (ps *protections) add(action string, t reflect.Type) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.list {
		if p.action == action && p.typ == t {
			return
		}
	}
	ps.list = append(ps.list, protection{action, t})
}

func (ps *protections) snapshot() []protection {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]protection(nil), ps.list...)
}

// Check compares every function given to [Protect] on this guard with the policy and returns
// every problem at once (joined; each is a [*CheckError]), or nil. Call it right after the
// Protect lines, at start-up, so that a mismatch stops the program before the first call
// instead of denying calls one by one:
//
//   - the policy does not list the action;
//   - an argument the policy requires (a condition or template names it, or it is declared
//     and not optional) is not a JSON field of the argument type A, or may be absent because
//     its field is `omitempty`/`omitzero`; fields are found as encoding/json finds them (tags,
//     embedded structs, `json:"-"`);
//   - a declared argument's field has a Go type that can never encode to the declared type;
//   - a field that may not be sent (additional: false) is not declared;
//   - any field of A, at any depth, is a float: a fractional number is never a latch value, so
//     it is refused here rather than at the first call that carries 12.5.
//
// Types whose JSON form Check cannot know (a map, an interface, a type with its own
// MarshalJSON) are checked for what can be known. Without Check, the same mistakes are still
// refused at call time (unknown_action, missing_argument, invalid_arguments).
func (g *Guard) Check() error {
	var errs []error
	for _, p := range g.protected.snapshot() {
		for _, e := range checkProtection(g.current(), p.action, p.typ) {
			errs = append(errs, e)
		}
	}
	return errors.Join(errs...)
}

// checkProtection lists the problems of one action and argument type.
func checkProtection(pol *policy.Policy, action string, t reflect.Type) []*CheckError {
	var out []*CheckError
	tname := typeName(t)
	problem := func(arg string, pos policy.Position, format string, args ...any) {
		out = append(out, &CheckError{Action: action, Type: tname, Argument: arg, Pos: pos, Msg: fmt.Sprintf(format, args...)})
	}
	for _, f := range floatFields(t) {
		problem("", policy.Position{}, "field %s is a float: a fractional number is never a latch value (use an integer of minor units, or a decimal string)", f)
	}
	var a *policy.Action
	if pol != nil {
		a = pol.Actions[action]
	}
	if a == nil {
		problem("", policy.Position{}, "the policy does not list action %q: every call would be denied unknown_action", action)
		return out
	}
	fields, known, notObject := jsonShape(t)
	if notObject {
		problem("", policy.Position{}, "arguments of type %s do not encode to a JSON object", tname)
		return out
	}
	if !known {
		return out
	}
	where := func(pos policy.Position) string {
		if pos.Line == 0 {
			return ""
		}
		return fmt.Sprintf(" (%s:%d:%d)", pol.File, pos.Line, pos.Column)
	}
	for _, r := range a.Requirements() {
		f := fields[r.Argument]
		switch {
		case f == nil:
			problem(r.Argument, r.Pos, "argument %q, required by %s%s, is not a JSON field of %s (its fields: %s)",
				r.Argument, r.By, where(r.Pos), tname, fieldNames(fields))
		case f.omit != "":
			problem(r.Argument, r.Pos, "argument %q, required by %s%s, may be absent: field %s is %s (drop %s, or declare the argument optional: true)",
				r.Argument, r.By, where(r.Pos), f.path, f.omit, f.omit)
		}
	}
	for _, d := range a.Arguments {
		f := fields[d.Name]
		if f == nil {
			continue
		}
		if k := f.kinds; k != 0 && k&d.Type.Kind() == 0 {
			problem(d.Name, d.Pos, "field %s (%s) can never encode to %s, the declared type of argument %q%s",
				f.path, f.typ, d.Type, d.Name, where(d.Pos))
		}
	}
	if a.RefuseAdditional {
		names := make([]string, 0, len(fields))
		for n := range fields {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if a.Argument(n) == nil {
				problem(n, a.Pos, "field %s (JSON %q) is not declared, and action %q says additional: false: every call with it would be denied invalid_arguments",
					fields[n].path, n, action)
			}
		}
	}
	return out
}

func typeName(t reflect.Type) string {
	if t == nil {
		return "nil"
	}
	return t.String()
}

func fieldNames(fields map[string]*jsonField) string {
	if len(fields) == 0 {
		return "none"
	}
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// jsonField is one member of the JSON object a struct encodes to.
type jsonField struct {
	name   string
	path   string // Go path, "Refund.Amount"
	typ    reflect.Type
	omit   string     // "omitempty" or "omitzero" when the member may be left out, else ""
	kinds  canon.Kind // what it can encode to; 0 when unknown
	depth  int
	tagged bool
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func marshals(t reflect.Type, iface reflect.Type) bool {
	return t.Implements(iface) || t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(iface)
}

// jsonShape returns the members of the JSON object values of t encode to. known is false when
// the members cannot be known from the type (a map, an interface, a custom marshaler);
// notObject is true when t never encodes to an object.
func jsonShape(t reflect.Type) (fields map[string]*jsonField, known, notObject bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || marshals(t, jsonMarshaler) {
		return nil, false, false
	}
	if marshals(t, textMarshaler) {
		return nil, false, true
	}
	switch t.Kind() {
	case reflect.Struct:
		return structFields(t), true, false
	case reflect.Map:
		return nil, false, false
	}
	return nil, false, true
}

// structFields follows encoding/json's rules: exported fields and embedded structs, named by
// their tag or Go name, `json:"-"` left out, embedded struct members promoted, and of several
// members with one name the shallowest wins, then the only tagged one, else none.
func structFields(t reflect.Type) map[string]*jsonField {
	type level struct {
		typ   reflect.Type
		path  string
		depth int
	}
	var all []*jsonField
	visited := map[reflect.Type]bool{}
	queue := []level{{t, "", 0}}
	for len(queue) > 0 {
		var next []level
		for _, lv := range queue {
			if visited[lv.typ] {
				continue
			}
			visited[lv.typ] = true
			for i := range lv.typ.NumField() {
				sf := lv.typ.Field(i)
				ft := sf.Type
				if sf.Anonymous {
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				path := sf.Name
				if lv.path != "" {
					path = lv.path + "." + sf.Name
				}
				if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
					next = append(next, level{ft, path, lv.depth + 1})
					continue
				}
				f := &jsonField{name: name, path: path, typ: sf.Type, depth: lv.depth, tagged: name != ""}
				if name == "" {
					f.name = sf.Name
				}
				for _, o := range strings.Split(opts, ",") {
					switch o {
					case "omitempty", "omitzero":
						f.omit = o
					}
				}
				f.kinds = encodeKinds(sf.Type, hasOpt(opts, "string"), 0)
				all = append(all, f)
			}
		}
		queue = next
	}
	byName := map[string][]*jsonField{}
	for _, f := range all {
		byName[f.name] = append(byName[f.name], f)
	}
	out := make(map[string]*jsonField, len(byName))
	for name, fs := range byName {
		min := fs[0].depth
		for _, f := range fs {
			if f.depth < min {
				min = f.depth
			}
		}
		var top, tagged []*jsonField
		for _, f := range fs {
			if f.depth == min {
				top = append(top, f)
				if f.tagged {
					tagged = append(tagged, f)
				}
			}
		}
		switch {
		case len(top) == 1:
			out[name] = top[0]
		case len(tagged) == 1:
			out[name] = tagged[0]
		}
	}
	return out
}

func hasOpt(opts, o string) bool {
	for _, x := range strings.Split(opts, ",") {
		if x == o {
			return true
		}
	}
	return false
}

// encodeKinds is the set of canon kinds a value of type t can encode to (0: unknown).
// quoted is the `,string` option, which writes numbers, booleans and strings as strings.
func encodeKinds(t reflect.Type, quoted bool, depth int) canon.Kind {
	if depth > 32 {
		return 0
	}
	if t.Kind() == reflect.Pointer {
		if marshals(t, jsonMarshaler) {
			return 0
		}
		return canon.KindNull | encodeKinds(t.Elem(), quoted, depth+1)
	}
	if marshals(t, jsonMarshaler) {
		return 0
	}
	if marshals(t, textMarshaler) {
		return canon.KindString
	}
	switch t.Kind() {
	case reflect.Bool:
		if quoted {
			return canon.KindString
		}
		return canon.KindBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if quoted {
			return canon.KindString
		}
		return canon.KindInt
	case reflect.Float32, reflect.Float64:
		if quoted {
			return canon.KindString
		}
		return canon.KindInt // whole floats encode as integers; floatFields refuses them anyway
	case reflect.String:
		return canon.KindString
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !marshals(t.Elem(), jsonMarshaler) && !marshals(t.Elem(), textMarshaler) {
			return canon.KindString | canon.KindNull // base64
		}
		return canon.KindList | canon.KindNull
	case reflect.Array:
		return canon.KindList
	case reflect.Map:
		return canon.KindObject | canon.KindNull
	case reflect.Struct:
		return canon.KindObject
	case reflect.Interface:
		return 0
	}
	return canon.KindOther // chan, func, complex: encoding fails
}

// floatFields lists the Go paths of every float that values of t can carry (not written as a
// string by `,string`), through structs, pointers, slices, arrays and map values.
func floatFields(t reflect.Type) []string {
	var out []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string, quoted bool)
	walk = func(t reflect.Type, path string, quoted bool) {
		if marshals(t, jsonMarshaler) || marshals(t, textMarshaler) {
			return
		}
		switch t.Kind() {
		case reflect.Float32, reflect.Float64:
			if !quoted {
				out = append(out, path+" ("+t.String()+")")
			}
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem(), path+"[]", false)
		case reflect.Map:
			walk(t.Elem(), path+"[key]", false)
		case reflect.Struct:
			if seen[t] {
				return
			}
			seen[t] = true
			for i := range t.NumField() {
				sf := t.Field(i)
				if !sf.IsExported() && !sf.Anonymous || sf.Tag.Get("json") == "-" {
					continue
				}
				p := sf.Name
				if path != "" {
					p = path + "." + sf.Name
				}
				_, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
				walk(sf.Type, p, hasOpt(opts, "string"))
			}
			seen[t] = false
		}
	}
	walk(t, "", false)
	for i, p := range out {
		out[i] = strings.ReplaceAll(p, "[]", "")
		if strings.HasPrefix(out[i], " (") {
			out[i] = typeName(t) + out[i]
		}
	}
	return out
}
