package server

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The bodies of the two requests every remote call makes — POST /v1/actions and POST
// /v1/actions/{id}/outcome — and their answers are read and written here without reflection,
// in one pass. Everything else goes through decode and writeJSON.
//
// The readers are a fast path, not a second grammar: they accept only bodies of the plainest
// form (member names without escapes, top-level strings without escapes, wait_seconds as a
// plain integer, each member once, at most maxHotDepth deep) and say no to anything else, which
// decode then reads the strict way and, when it is wrong, refuses with its own problem. So a
// body is either read here to exactly what decode would read, or read by decode; no body is
// accepted here that decode refuses (TestHotDecodeAgreesWithDecode holds both to that).
// The writers produce the bytes encoding/json writes for the same value
// (TestHotEncodeAgreesWithJSON).

// maxHotDepth is how deep the fast reader follows nested arguments before leaving the body to
// decode.
const maxHotDepth = 64

// maxHotMembers is the most members of one object the fast reader checks for duplicates (by
// comparing each name with those before it); a larger object is left to decode.
const maxHotMembers = 64

// hotDecoder is a request body with a fast reader: decodeHot reads raw into the receiver and
// reports true, or leaves the receiver as it was and reports false.
type hotDecoder interface {
	decodeHot(raw []byte) bool
}

// hotScan is a pass over one body.
type hotScan struct {
	b []byte
	i int
}

func (s *hotScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end reports whether only whitespace is left.
func (s *hotScan) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// name reads a member name and the colon after it: a string without escapes or control
// characters, valid UTF-8.
func (s *hotScan) name() ([]byte, bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		c := s.b[j]
		switch {
		case c == '"':
			n := s.b[start:j]
			if !ascii && !utf8.Valid(n) {
				return nil, false
			}
			s.i = j + 1
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return nil, false
			}
			s.i++
			return n, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// plainString reads a string value as a Go string: no escapes, no control characters, valid
// UTF-8 (what encoding/json would decode to the same bytes).
func (s *hotScan) plainString() (string, bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		c := s.b[j]
		switch {
		case c == '"':
			v := s.b[start:j]
			if !ascii && !utf8.Valid(v) {
				return "", false
			}
			s.i = j + 1
			return string(v), true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
	}
	return "", false
}

// smallInt reads a plain integer (no fraction, exponent or leading zero) of at most 9 digits.
func (s *hotScan) smallInt() (int, bool) {
	s.ws()
	start := s.i
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
		j++
	}
	nd := j - digits
	if nd == 0 || nd > 9 || nd > 1 && s.b[digits] == '0' {
		return 0, false
	}
	if j < len(s.b) {
		switch s.b[j] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(s.b[start:j]))
	if err != nil {
		return 0, false
	}
	s.i = j
	return n, true
}

// raw reads any JSON value and returns its bytes as they stand: well-formed, no member name
// twice in one object at any depth. null is left to decode.
func (s *hotScan) raw() ([]byte, bool) {
	s.ws()
	start := s.i
	if s.i+4 <= len(s.b) && string(s.b[s.i:s.i+4]) == "null" {
		return nil, false
	}
	if !s.value(0) {
		return nil, false
	}
	return s.b[start:s.i], true
}

// value checks one value at depth.
func (s *hotScan) value(depth int) bool {
	if depth > maxHotDepth {
		return false
	}
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return true
		}
		for {
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return s.str()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *hotScan) lit(l string) bool {
	if s.i+len(l) > len(s.b) || string(s.b[s.i:s.i+len(l)]) != l {
		return false
	}
	s.i += len(l)
	return true
}

// object checks an object: its members' names plain and each given once.
func (s *hotScan) object(depth int) bool {
	s.i++ // {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	var seenArr [16][]byte
	seen := seenArr[:0]
	for {
		n, ok := s.name()
		if !ok || len(seen) >= maxHotMembers {
			return false
		}
		for _, p := range seen {
			if bytes.Equal(p, n) {
				return false
			}
		}
		seen = append(seen, n)
		if !s.value(depth + 1) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str checks a string value: escapes as JSON allows them, no control characters. Other bytes
// are taken as they stand, as encoding/json takes them into a raw message.
func (s *hotScan) str() bool {
	j := s.i + 1
	for j < len(s.b) {
		c := s.b[j]
		switch {
		case c == '"':
			s.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if j+1 >= len(s.b) {
				return false
			}
			switch s.b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(s.b) {
					return false
				}
				for _, h := range s.b[j+2 : j+6] {
					if !isHex(h) {
						return false
					}
				}
				j += 6
			default:
				return false
			}
		default:
			j++
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number checks a number as JSON writes one.
func (s *hotScan) number() bool {
	j := s.i
	if s.b[j] == '-' {
		j++
	}
	switch {
	case j < len(s.b) && s.b[j] == '0':
		j++
	case j < len(s.b) && s.b[j] >= '1' && s.b[j] <= '9':
		for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
			j++
		}
	default:
		return false
	}
	if j < len(s.b) && s.b[j] == '.' {
		j++
		d := j
		for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
			j++
		}
		if j == d {
			return false
		}
	}
	if j < len(s.b) && (s.b[j] == 'e' || s.b[j] == 'E') {
		j++
		if j < len(s.b) && (s.b[j] == '+' || s.b[j] == '-') {
			j++
		}
		d := j
		for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
			j++
		}
		if j == d {
			return false
		}
	}
	s.i = j
	return true
}

// members walks the top-level object of the body, calling member for each name (given once
// each, checked here) with the scan positioned at its value; member reads the value and reports
// whether it could. Nothing may follow the object but whitespace.
func (s *hotScan) members(member func(name []byte) bool) bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return s.end()
	}
	var seenArr [8][]byte
	seen := seenArr[:0]
	for {
		n, ok := s.name()
		if !ok || len(seen) >= maxHotMembers {
			return false
		}
		for _, p := range seen {
			if bytes.Equal(p, n) {
				return false
			}
		}
		seen = append(seen, n)
		if !member(n) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return s.end()
		default:
			return false
		}
	}
}

func (req *actionRequest) decodeHot(raw []byte) bool {
	var v actionRequest
	s := hotScan{b: raw}
	ok := s.members(func(name []byte) bool {
		var ok bool
		switch string(name) {
		case "action":
			v.Action, ok = s.plainString()
		case "arguments":
			var a []byte
			if a, ok = s.raw(); ok {
				v.Arguments = json.RawMessage(bytes.Clone(a))
			}
		case "resource":
			v.Resource, ok = s.plainString()
		case "approval_id":
			v.ApprovalID, ok = s.plainString()
		case "wait_seconds":
			v.WaitSeconds, ok = s.smallInt()
		case "task":
			v.Task, ok = s.plainString()
		case "hop":
			v.Hop, ok = s.plainString()
		}
		return ok
	})
	if ok {
		*req = v
	}
	return ok
}

func (req *outcomeRequest) decodeHot(raw []byte) bool {
	var v outcomeRequest
	s := hotScan{b: raw}
	ok := s.members(func(name []byte) bool {
		var ok bool
		switch string(name) {
		case "outcome":
			v.Outcome, ok = s.plainString()
		case "result":
			var r []byte
			if r, ok = s.raw(); ok {
				v.Result = json.RawMessage(bytes.Clone(r))
			}
		case "error":
			v.Error, ok = s.plainString()
		}
		return ok
	})
	if ok {
		*req = v
	}
	return ok
}

// appendString appends s as encoding/json writes a string with HTML escaping off.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				const hex = "0123456789abcdef"
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', byte('0'+r-'\u2020'))
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendStringPtr appends *s as a string, or null.
func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

// appendRaw appends a raw JSON value as encoding/json writes a json.RawMessage: null when nil,
// and compacted. A value already compact (as the canonical writer's documents and arguments
// are) is copied as it stands; a value with whitespace between its tokens is compacted by
// json.Compact, which also refuses one that is not JSON.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	if len(raw) == 0 || !isCompact(raw) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return b, false
		}
		return append(b, buf.Bytes()...), true
	}
	return append(b, raw...), true
}

// isCompact reports whether raw has no whitespace outside its strings.
func isCompact(raw []byte) bool {
	in := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// appendJSON appends the answer of POST /v1/actions (and GET /v1/actions/{id}) as
// encoding/json writes it, reporting false when it cannot (a would_have, which is written by
// encoding/json instead).
func (a *actionJSON) appendJSON(b []byte) ([]byte, bool) {
	if a.WouldHave != nil {
		return b, false
	}
	var ok bool
	b = append(b, `{"status":`...)
	b = appendString(b, a.Status)
	b = append(b, `,"action_id":`...)
	b = appendString(b, a.ActionID)
	b = append(b, `,"action":`...)
	b = appendString(b, a.Action)
	b = append(b, `,"action_hash":`...)
	b = appendString(b, a.ActionHash)
	b = append(b, `,"arguments":`...)
	if b, ok = appendRaw(b, a.Arguments); !ok {
		return b, false
	}
	b = append(b, `,"resource":`...)
	b = appendStringPtr(b, a.Resource)
	b = append(b, `,"principal":{"agent":`...)
	b = appendStringPtr(b, a.Principal.Agent)
	b = append(b, `,"user":`...)
	b = appendStringPtr(b, a.Principal.User)
	b = append(b, `},"effect_key":`...)
	b = appendStringPtr(b, a.EffectKey)
	b = append(b, `,"attempt":`...)
	if a.Attempt == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*a.Attempt), 10)
	}
	b = append(b, `,"idempotency_token":`...)
	b = appendStringPtr(b, a.IdempotencyToken)
	b = append(b, `,"effect_token":`...)
	b = appendStringPtr(b, a.EffectToken)
	b = append(b, `,"lease_expires_at":`...)
	b = appendStringPtr(b, a.LeaseExpiresAt)
	b = append(b, `,"approval_id":`...)
	b = appendStringPtr(b, a.ApprovalID)
	b = append(b, `,"decision":`...)
	b = appendString(b, a.Decision)
	b = append(b, `,"reason":`...)
	b = appendString(b, a.Reason)
	if len(a.Receipt) > 0 {
		b = append(b, `,"receipt":`...)
		if b, ok = appendRaw(b, a.Receipt); !ok {
			return b, false
		}
	}
	if a.ReceiptHash != "" {
		b = append(b, `,"receipt_hash":`...)
		b = appendString(b, a.ReceiptHash)
	}
	return append(b, "}\n"...), true
}

// appendJSON appends the answer of POST /v1/actions/{id}/outcome as encoding/json writes it.
func (r *recorded) appendJSON(b []byte) ([]byte, bool) {
	var ok bool
	b = append(b, `{"status":`...)
	b = appendString(b, r.Status)
	b = append(b, `,"action_id":`...)
	b = appendString(b, r.ActionID)
	b = append(b, `,"result":`...)
	b = appendString(b, r.Result)
	b = append(b, `,"error":`...)
	b = appendStringPtr(b, r.Error)
	b = append(b, `,"receipt":`...)
	if b, ok = appendRaw(b, r.Receipt); !ok {
		return b, false
	}
	b = append(b, `,"receipt_hash":`...)
	b = appendString(b, r.ReceiptHash)
	return append(b, "}\n"...), true
}
