package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Template is a parsed effect-key or resource template (docs/policy.md): literal text with {name}
// placeholders, where {{ and }} stand for literal braces. A placeholder names a top-level
// argument, or is {resource}, the call's rendered resource, or {$request_key}, the caller's own
// request key for the call.
type Template struct {
	src        string
	parts      []tpart
	names      []string
	requestKey bool     // the template has {$request_key}
	pos        Position // in the policy file; zero when parsed on its own
}

type tpart struct {
	text        string // literal text, or the placeholder's name
	placeholder bool
}

// ResourcePlaceholder is the placeholder that renders the call's resource.
const ResourcePlaceholder = "resource"

// RequestKeyPlaceholder is the placeholder that renders the caller's own request key for the
// call (an MCP client's _meta latch/request_key, an HTTP begin's Idempotency-Key, a Go caller's
// latch.WithRequestKey): an effect key written {$request_key}, or a template using it, lets the
// caller name the effect. The $ sets it apart from argument names, which cannot start with one.
const RequestKeyPlaceholder = "$request_key"

// ErrNoRequestKey is matched by the error of rendering a template with {$request_key} for a
// call that carries no request key.
var ErrNoRequestKey = errors.New("the call carries no request key")

// ParseTemplate parses a template. An empty template, an unbalanced brace and an empty or
// malformed placeholder name are errors; the message gives the byte offset.
func ParseTemplate(s string) (*Template, error) {
	if s == "" {
		return nil, errors.New("empty template")
	}
	t := &Template{src: s}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, tpart{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '{':
			if i+1 < len(s) && s[i+1] == '{' {
				lit.WriteByte('{')
				i += 2
				continue
			}
			j := strings.IndexByte(s[i+1:], '}')
			if j < 0 {
				return nil, fmt.Errorf("unclosed { at offset %d (write {{ for a literal brace)", i)
			}
			name := s[i+1 : i+1+j]
			if name == "" {
				return nil, fmt.Errorf("empty placeholder {} at offset %d", i)
			}
			if strings.HasPrefix(name, "$") && name != RequestKeyPlaceholder {
				return nil, fmt.Errorf("unknown placeholder {%s} at offset %d (the only $ placeholder is {%s})", name, i, RequestKeyPlaceholder)
			}
			if name != RequestKeyPlaceholder && !isIdent(name) {
				return nil, fmt.Errorf("bad placeholder {%s} at offset %d (expected an argument name of letters, digits and _, or resource)", name, i)
			}
			flush()
			t.parts = append(t.parts, tpart{text: name, placeholder: true})
			if name == RequestKeyPlaceholder {
				t.requestKey = true
			} else if !contains(t.names, name) {
				t.names = append(t.names, name)
			}
			i += j + 2
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				lit.WriteByte('}')
				i += 2
				continue
			}
			return nil, fmt.Errorf("unmatched } at offset %d (write }} for a literal brace)", i)
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	return t, nil
}

// isIdent reports whether s is [A-Za-z_][A-Za-z0-9_]*.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// String returns the template's source text.
func (t *Template) String() string {
	if t == nil {
		return ""
	}
	return t.src
}

// Equal reports whether two templates have the same source text (go-cmp uses it).
func (t *Template) Equal(u *Template) bool {
	if t == nil || u == nil {
		return t == u
	}
	return t.src == u.src
}

// Placeholders returns the distinct placeholder names in order of first appearance: argument
// names and resource. {$request_key}, which names no argument, is left out (UsesRequestKey).
func (t *Template) Placeholders() []string {
	if t == nil {
		return nil
	}
	return append([]string(nil), t.names...)
}

// UsesRequestKey reports whether the template has {$request_key}: a call renders it only when it
// carries a request key.
func (t *Template) UsesRequestKey() bool { return t != nil && t.requestKey }

// Render fills the template. Each placeholder must name a top-level argument holding a
// non-empty string or an int64 (written in decimal); {resource} renders resource, which must be
// non-empty. Anything else is an error naming the placeholder and why. A template with
// {$request_key} renders only with RenderKeyed.
func (t *Template) Render(args map[string]any, resource string) (string, error) {
	return t.RenderKeyed(args, resource, "")
}

// RenderKeyed is Render for a call that may carry a request key: {$request_key} renders
// requestKey, and an error matching ErrNoRequestKey when it is "".
func (t *Template) RenderKeyed(args map[string]any, resource, requestKey string) (string, error) {
	if t == nil {
		return "", errors.New("render: no template")
	}
	var b strings.Builder
	b.Grow(len(t.src) + 16)
	for _, p := range t.parts {
		if !p.placeholder {
			b.WriteString(p.text)
			continue
		}
		if p.text == ResourcePlaceholder {
			if resource == "" {
				return "", errors.New("placeholder {resource}: the call has no resource")
			}
			b.WriteString(resource)
			continue
		}
		if p.text == RequestKeyPlaceholder {
			if requestKey == "" {
				return "", fmt.Errorf("placeholder {%s}: %w", RequestKeyPlaceholder, ErrNoRequestKey)
			}
			b.WriteString(requestKey)
			continue
		}
		v, ok := args[p.text]
		if !ok {
			return "", fmt.Errorf("placeholder {%s}: argument %s is missing", p.text, p.text)
		}
		switch v := v.(type) {
		case string:
			if v == "" {
				return "", fmt.Errorf("placeholder {%s}: argument %s is an empty string", p.text, p.text)
			}
			b.WriteString(v)
		case int64:
			var buf [24]byte
			b.Write(strconv.AppendInt(buf[:0], v, 10))
		default:
			return "", fmt.Errorf("placeholder {%s}: argument %s is %s, want a non-empty string or an integer", p.text, p.text, kindPhrase(v))
		}
	}
	return b.String(), nil
}
