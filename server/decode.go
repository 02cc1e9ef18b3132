package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// decode reads the request body into v strictly: JSON only, at most limit bytes, no member v
// does not declare (named in the problem), no member of the wrong type (named, with the type it
// must have), nothing after the object. An empty body decodes as {} when empty is allowed.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any, emptyOK bool) *Problem {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return problem(http.StatusUnsupportedMediaType, "unsupported_media_type", fmt.Sprintf("Content-Type %q: the body must be application/json (with curl: --json, or -H 'Content-Type: application/json')", ct))
		}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) && emptyOK {
		return nil
	}
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
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
