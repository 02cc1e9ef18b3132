package server

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// decode reads the request body into v strictly: JSON only, at most limit bytes, no member v
// does not declare (named in the problem), no member of the wrong type (named, with the type it
// must have), nothing after the object. An empty body decodes as {} when empty is allowed.
//
// encoding/json alone is lenient in two ways a request must not be: it matches member names to
// fields case-insensitively, and it lets the last of two members of one name win. A body
// {"action":"billing.refund","ACTION":"billing.charge"} would then be read as a charge by this
// server and as a refund by a log, a proxy or a person reading it. So before decoding, every
// object in the body (at any depth, arguments and results included) is checked for a member name
// given twice, and every object v's type declares for a member whose name is not exactly one of
// its fields; the problem names the member's JSON pointer.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any, emptyOK bool) *Problem {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return problem(http.StatusUnsupportedMediaType, "unsupported_media_type", fmt.Sprintf("Content-Type %q: the body must be application/json (with curl: --json, or -H 'Content-Type: application/json')", ct))
		}
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return bodyProblem(err, emptyOK)
	}
	if h, ok := v.(hotDecoder); ok && h.decodeHot(raw) {
		return nil // read as decodeRaw would read it (hotjson.go)
	}
	return decodeRaw(raw, v, emptyOK)
}

// decodeRaw decodes a whole body strictly into v, as decode describes.
func decodeRaw(raw []byte, v any, emptyOK bool) *Problem {
	if p := checkMembers(raw, reflect.TypeOf(v)); p != nil {
		return p
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// One JSON value only: trailing data is a malformed request, not something to ignore.
		var extra json.RawMessage
		if err2 := dec.Decode(&extra); !errors.Is(err2, io.EOF) {
			err = err2
			if err == nil {
				err = errors.New("the body holds more than one JSON value")
			}
		}
	}
	return bodyProblem(err, emptyOK)
}

// bodyProblem is the problem of reading or decoding a body with err; nil for no error, and
// for an empty body when empty is allowed.
func bodyProblem(err error, emptyOK bool) *Problem {
	if errors.Is(err, io.EOF) && emptyOK {
		return nil
	}
	if err == nil {
		return nil
	}
	var (
		tooBig *http.MaxBytesError
		syn    *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooBig):
		return problem(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body exceeds %d bytes", tooBig.Limit))
	case errors.Is(err, io.EOF):
		return problem(http.StatusBadRequest, "invalid_json", "the request body is empty: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return problem(http.StatusBadRequest, "invalid_json", "the request body ends inside a JSON value")
	case errors.As(err, &syn):
		return problem(http.StatusBadRequest, "invalid_json", fmt.Sprintf("the request body is not JSON: %v (at byte %d)", strings.TrimPrefix(syn.Error(), "json: "), syn.Offset))
	case errors.As(err, &typ):
		p := problem(http.StatusBadRequest, "wrong_type", "")
		p.Field = typ.Field
		if p.Field == "" {
			p.Detail = fmt.Sprintf("the body must be a JSON object, not %s", typ.Value)
		} else {
			p.Detail = fmt.Sprintf("field %q must be %s, not %s", typ.Field, jsonType(typ.Type.String()), typ.Value)
		}
		return p
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		p := problem(http.StatusBadRequest, "unknown_field", fmt.Sprintf("unknown field %q", name))
		p.Field = name
		return p
	}
	return problem(http.StatusBadRequest, "invalid_json", strings.TrimPrefix(err.Error(), "json: "))
}

// checkMembers walks the first JSON value of body: an object may not give one member name twice,
// and an object whose Go type (t, then the types of its fields) declares its members may hold
// only members named exactly as a field. It returns nil when the body is not well-formed JSON:
// decoding reports that, in its own words.
func checkMembers(body []byte, t reflect.Type) *Problem {
	m := &members{dec: json.NewDecoder(bytes.NewReader(body))}
	m.dec.UseNumber() // numbers are skipped; no need to parse them as floats
	p, _ := m.value(t, nil, 0)
	return p
}

// maxDepth is how deep checkMembers follows nested values: encoding/json refuses a value nested
// deeper (exceeded max depth), so the walk stops there and decoding says so. Without the stop a
// megabyte of "[" would be walked a million frames deep.
const maxDepth = 10000

// errTooDeep stops the walk at maxDepth.
var errTooDeep = errors.New("nested deeper than the decoder reads")

// members is a walk over one JSON value's tokens.
type members struct{ dec *json.Decoder }

// pointer is the JSON pointer of a value, as a link to its parent's: written out (String) only
// for a problem, so that the walk costs the same at every depth instead of copying the pointer
// of each level into the next.
type pointer struct {
	parent *pointer
	token  string // the member name (escaped) or the array index
}

// String is the pointer as RFC 6901 writes it; "" for the body itself (a nil pointer).
func (p *pointer) String() string {
	var toks []string
	for ; p != nil; p = p.parent {
		toks = append(toks, p.token)
	}
	var b strings.Builder
	for i := len(toks) - 1; i >= 0; i-- {
		b.WriteString("/" + toks[i])
	}
	return b.String()
}

// value checks the next value, whose Go type is t (nil when undeclared: any, a map's or a raw
// message's members are only checked for duplicates), at JSON pointer ptr, depth values deep.
func (m *members) value(t reflect.Type, ptr *pointer, depth int) (*Problem, error) {
	if depth >= maxDepth {
		return nil, errTooDeep
	}
	tok, err := m.dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		return m.object(declared(t), ptr, depth)
	case json.Delim('['):
		var elem reflect.Type
		if t = deref(t); t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && !isRaw(t) {
			elem = t.Elem()
		}
		for i := 0; m.dec.More(); i++ {
			if p, err := m.value(elem, &pointer{ptr, strconv.Itoa(i)}, depth+1); p != nil || err != nil {
				return p, err
			}
		}
		_, err = m.dec.Token() // ]
		return nil, err
	}
	return nil, nil
}

// object checks an object's members; o, when not nil, declares the only names it may hold.
func (m *members) object(o *objectType, ptr *pointer, depth int) (*Problem, error) {
	seen := map[string]bool{}
	for m.dec.More() {
		tok, err := m.dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		at := &pointer{ptr, pointerToken(name)}
		if seen[name] {
			p := problem(http.StatusBadRequest, "duplicate_member",
				fmt.Sprintf("member %q appears twice in one object (at %s): member names must be unique", name, at))
			p.Field, p.Pointer = topField(ptr, name), at.String()
			return p, nil
		}
		seen[name] = true
		var child reflect.Type
		if o != nil {
			f, ok := o.fields[name]
			if !ok {
				return unknownMember(o, name, ptr, at), nil
			}
			child = f
		}
		if p, err := m.value(child, at, depth+1); p != nil || err != nil {
			return p, err
		}
	}
	_, err := m.dec.Token() // }
	return nil, err
}

// unknownMember is the problem of a member named otherwise than every field of o.
func unknownMember(o *objectType, name string, ptr, at *pointer) *Problem {
	detail := fmt.Sprintf("unknown field %q (at %s)", name, at)
	for f := range o.fields {
		if strings.EqualFold(f, name) {
			detail += fmt.Sprintf(": member names are case-sensitive; the field is %q", f)
			break
		}
	}
	p := problem(http.StatusBadRequest, "unknown_field", detail)
	p.Field, p.Pointer = topField(ptr, name), at.String()
	return p
}

// topField is name when the object at ptr is the body itself, "" deeper down.
func topField(ptr *pointer, name string) string {
	if ptr == nil {
		return name
	}
	return ""
}

// pointerToken escapes a member name as a JSON pointer token (RFC 6901).
func pointerToken(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}

// objectType is the members a Go struct declares to encoding/json.
type objectType struct{ fields map[string]reflect.Type }

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawMessage      = reflect.TypeFor[json.RawMessage]()
)

// declared is the objectType of t, or nil when t does not declare its members (a map, an
// interface, a raw message, a type that decodes itself, no type at all).
func declared(t reflect.Type) *objectType {
	t = deref(t)
	if t == nil || t.Kind() != reflect.Struct || decodesItself(t) {
		return nil
	}
	o := &objectType{fields: map[string]reflect.Type{}}
	addFields(o, t)
	return o
}

// addFields adds t's fields under their JSON names, promoting an embedded struct's as
// encoding/json does.
func addFields(o *objectType, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if ft := deref(f.Type); ft != nil && ft.Kind() == reflect.Struct {
				addFields(o, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		o.fields[name] = f.Type
	}
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func isRaw(t reflect.Type) bool {
	return t == rawMessage || t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
}

func decodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler)
}

// jsonType names a Go type as the JSON a client must send.
func jsonType(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// missing is the problem of a required member that is absent or empty.
func missing(field string) *Problem {
	p := problem(http.StatusBadRequest, "missing_field", fmt.Sprintf("field %q is required", field))
	p.Field = field
	return p
}

// writeJSON writes v as a JSON answer with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	hd := w.Header()
	hd["Content-Type"], hd["Cache-Control"] = jsonContentType, noStore
	w.WriteHeader(status)
	_ = writeValue(w, v)
}

// writeValue writes v as one line of JSON, ending in a newline: by v itself when it is a
// hotEncoder that can, else by encoding/json (HTML not escaped), from a pooled buffer.
func writeValue(w io.Writer, v any) error {
	bp := answerBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledAnswer {
			answerBufs.Put(bp)
		}
	}()
	b, ok := (*bp)[:0], false
	if h, isHot := v.(hotEncoder); isHot {
		b, ok = h.appendJSON(b) // ends with its newline
	}
	if !ok {
		buf := bytes.NewBuffer(b[:0])
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return err
		}
		b = buf.Bytes()
	}
	*bp = b
	_, err := w.Write(b)
	return err
}

// hotEncoder is an answer that writes itself as encoding/json would (hotjson.go), or reports
// false and is written by encoding/json.
type hotEncoder interface {
	appendJSON(b []byte) ([]byte, bool)
}

// The header values of every JSON answer, set without canonicalizing their names again.
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// maxPooledAnswer is the largest buffer kept for the next answer: a rare large one is left to
// the collector.
const maxPooledAnswer = 64 << 10

// answerBufs keeps the buffers answers are written into.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
