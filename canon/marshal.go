package canon

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// marshal appends the canonical form of v to p.out. On refusal it returns false with p.reason
// and p.path set.
func (p *state) marshal(v any) bool {
	switch x := v.(type) {
	case nil:
		p.out = append(p.out, "null"...)
	case bool:
		if x {
			p.out = append(p.out, "true"...)
		} else {
			p.out = append(p.out, "false"...)
		}
	case string:
		return p.marshalString(x)
	case int64:
		return p.marshalInt(x)
	case int:
		return p.marshalInt(int64(x))
	case int32:
		return p.marshalInt(int64(x))
	case uint32:
		return p.marshalInt(int64(x))
	case []any:
		return marshalList(p, x, true, p.marshal)
	case []string:
		return marshalList(p, x, false, p.marshalString)
	case map[string]any:
		return marshalObject(p, x, true, p.marshal)
	case map[string]string:
		return marshalObject(p, x, false, p.marshalString)
	case json.RawMessage:
		if x == nil {
			p.out = append(p.out, "null"...)
			return true
		}
		// The embedded text is held to the same rules as any other input; a refusal inside
		// it is reported with the pointer continuing from where the RawMessage sits.
		data, pos := p.data, p.pos
		ok := p.parse(x)
		p.data, p.pos = data, pos
		return ok
	case *any:
		if x == nil {
			return p.marshal(nil)
		}
		return p.marshal(*x)
	case *bool:
		return marshalPtr(p, x)
	case *string:
		return marshalPtr(p, x)
	case *int64:
		return marshalPtr(p, x)
	case *int:
		return marshalPtr(p, x)
	case *int32:
		return marshalPtr(p, x)
	case *uint32:
		return marshalPtr(p, x)
	case *[]any:
		return marshalPtr(p, x)
	case *[]string:
		return marshalPtr(p, x)
	case *map[string]any:
		return marshalPtr(p, x)
	case *map[string]string:
		return marshalPtr(p, x)
	case *json.RawMessage:
		return marshalPtr(p, x)
	case float32, float64:
		return p.fail(fmt.Sprintf("unsupported type %T (numbers must be integers)", v))
	default:
		return p.fail(fmt.Sprintf("unsupported type %T", v))
	}
	return true
}

// marshalList appends x as an array, each element with elem. nested counts a level of nesting,
// for element types that can hold x again.
func marshalList[E any](p *state, x []E, nested bool, elem func(E) bool) bool {
	if x == nil {
		p.out = append(p.out, "null"...)
		return true
	}
	if nested && !p.enter() {
		return false
	}
	p.out = append(p.out, '[')
	for i, e := range x {
		if i > 0 {
			p.out = append(p.out, ',')
		}
		if !elem(e) {
			return p.at(strconv.Itoa(i))
		}
	}
	p.out = append(p.out, ']')
	if nested {
		p.depth--
	}
	return true
}

// marshalObject appends m as an object, its members in key order, each value with value. nested
// is as for marshalList.
func marshalObject[V any](p *state, m map[string]V, nested bool, value func(V) bool) bool {
	if m == nil {
		p.out = append(p.out, "null"...)
		return true
	}
	if nested && !p.enter() {
		return false
	}
	base := len(p.names)
	for k := range m {
		p.names = append(p.names, k)
	}
	if !p.sortNames(base) {
		return false
	}
	p.out = append(p.out, '{')
	for i := base; i < len(p.names); i++ {
		k := p.names[i]
		if i > base {
			p.out = append(p.out, ',')
		}
		p.appendString(k)
		p.out = append(p.out, ':')
		if !value(m[k]) {
			return p.at(k)
		}
	}
	p.out = append(p.out, '}')
	clear(p.names[base:])
	p.names = p.names[:base]
	if nested {
		p.depth--
	}
	return true
}

func marshalPtr[T any](p *state, x *T) bool {
	if x == nil {
		p.out = append(p.out, "null"...)
		return true
	}
	return p.marshal(*x)
}

// enter counts one level of nesting; it is what stops a map or slice that contains itself.
func (p *state) enter() bool {
	if p.depth++; p.depth > maxDepth {
		return p.fail("nesting deeper than " + strconv.Itoa(maxDepth))
	}
	return true
}

// sortNames sorts p.names[base:] in key order after checking each is valid UTF-8.
func (p *state) sortNames(base int) bool {
	names := p.names[base:]
	for _, k := range names {
		if !utf8.ValidString(k) {
			// The key cannot name itself in a pointer; the refusal points at the map.
			return p.fail("invalid UTF-8 in key " + strconv.Quote(k))
		}
	}
	slices.SortFunc(names, compareKeys[string])
	if x, y, clash := foldClash(p, len(names), func(i int) string { return names[i] }); clash {
		x, y = min(x, y), max(x, y)
		p.failClash(names[x], names[y])
		return p.at(names[y])
	}
	return true
}

func (p *state) marshalInt(n int64) bool {
	out, err := AppendInt(p.out, n)
	if err != nil {
		return p.fail(err.(*Error).Reason)
	}
	p.out = out
	return true
}

func (p *state) marshalString(s string) bool {
	if !utf8.ValidString(s) {
		return p.fail("invalid UTF-8")
	}
	p.appendString(s)
	return true
}

// appendString appends s, which is valid UTF-8, as a canonical JSON string.
func (p *state) appendString(s string) { p.out = appendQuoted(p.out, s) }

// appendQuoted appends s, which is valid UTF-8, to dst as a canonical JSON string.
func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[last:i]...)
		dst = appendEscapedRune(dst, rune(c))
		last = i + 1
	}
	dst = append(dst, s[last:]...)
	return append(dst, '"')
}

// AppendInt appends n to dst as a canonical JSON number, for the same writers as AppendString.
// An integer beyond ±MaxSafeInt is refused, as Marshal refuses it.
func AppendInt(dst []byte, n int64) ([]byte, error) {
	if n > MaxSafeInt || n < -MaxSafeInt {
		return dst, &Error{Reason: "integer out of safe range " + strconv.FormatInt(n, 10)}
	}
	return strconv.AppendInt(dst, n, 10), nil
}

// AppendString appends s to dst as a canonical JSON string, for writers that emit a document's
// fixed keys themselves, in sorted order, instead of building a map for Marshal. Invalid UTF-8
// is refused.
func AppendString(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return dst, &Error{Reason: "invalid UTF-8"}
	}
	return appendQuoted(dst, s), nil
}
