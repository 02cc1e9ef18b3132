package canon

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// The parser is a recursive descent over the bytes of the text. It checks the JSON grammar
// (RFC 8259) and the value rules of docs/guarantees.md#allowed-argument-values and writes the canonical form as it goes: every
// token is copied or re-escaped into p.out in source order, and when an object closes its
// members are put in key order in place. Values are built only when p.values is set.

// parse parses one complete JSON text. On refusal it returns false with p.reason and p.path set.
func (p *state) parse(data []byte) bool {
	p.data = data
	p.pos = 0
	if p.values && len(data) <= 64<<10 {
		// One copy of the text serves every unescaped string and key as a substring. Past
		// 64 KiB each string is copied on its own instead, so that a small value does not
		// pin a large document.
		p.src = string(data)
	}
	if !p.value() {
		return false
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return p.syntax("after top-level value")
	}
	return true
}

func (p *state) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// syntax refuses the text at p.pos: an unexpected byte, or the end of the input.
func (p *state) syntax(context string) bool {
	if p.pos >= len(p.data) {
		return p.fail("syntax error at offset " + strconv.Itoa(p.pos) + ": unexpected end of input " + context)
	}
	return p.fail("syntax error at offset " + strconv.Itoa(p.pos) + ": invalid character " + quoteByte(p.data[p.pos]) + " " + context)
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	const hexDigits = "0123456789abcdef"
	return string([]byte{'0', 'x', hexDigits[c>>4], hexDigits[c&0xf]})
}

// value parses any value at p.pos (after optional whitespace) into p.v and p.out.
func (p *state) value() bool {
	p.skipSpace()
	if p.pos >= len(p.data) {
		return p.syntax("looking for beginning of value")
	}
	switch c := p.data[p.pos]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		off, end, esc, ok := p.string(&p.str)
		if !ok {
			return false
		}
		if p.values {
			p.v = p.makeString(off, end, esc, p.str)
		}
		p.str = p.str[:0]
		return true
	case 't':
		return p.literal("true", true)
	case 'f':
		return p.literal("false", false)
	case 'n':
		return p.literal("null", nil)
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return p.number()
		}
		return p.syntax("looking for beginning of value")
	}
}

func (p *state) literal(word string, v any) bool {
	for i := 0; i < len(word); i++ {
		if p.pos >= len(p.data) || p.data[p.pos] != word[i] {
			return p.syntax("in literal " + word)
		}
		p.pos++
	}
	p.out = append(p.out, word...)
	p.v = v
	return true
}

// number parses a number. Only plain integers are allowed: a fraction or an exponent is
// refused even when the value is integral (1.0, 1e3), because two texts for one number would
// be one more thing to coerce. "-0" is refused too: it is integral in JSON's grammar but has
// no int64 of its own, and RFC 8785 would rewrite it as "0" — a coercion.
func (p *state) number() bool {
	d := p.data
	start := p.pos
	i := start
	neg := d[i] == '-'
	if neg {
		i++
	}
	digits := i
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		p.pos = i
		return p.syntax("in numeric literal")
	}
	intEnd := i
	integral := true
	if i < len(d) && d[i] == '.' {
		integral = false
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.pos = i
			return p.syntax("after decimal point in numeric literal")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		integral = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			p.pos = i
			return p.syntax("in exponent of numeric literal")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	text := d[start:i]
	if !integral {
		return p.fail("non-integer number " + clip(text))
	}
	if neg && intEnd-digits == 1 && d[digits] == '0' {
		return p.fail("negative zero -0")
	}
	// 2^53-1 has 16 digits; anything longer is out of range without arithmetic.
	if intEnd-digits > 16 {
		return p.fail("integer out of safe range " + clip(text))
	}
	var n int64
	for _, c := range d[digits:intEnd] {
		n = n*10 + int64(c-'0')
	}
	if n > MaxSafeInt {
		return p.fail("integer out of safe range " + clip(text))
	}
	if neg {
		n = -n
	}
	p.pos = i
	// The text is already canonical: no leading zeros (the grammar), no sign on zero, no
	// fraction, no exponent.
	p.out = append(p.out, text...)
	if p.values {
		p.v = n
	}
	return true
}

// clip shortens long number text in a refusal reason.
func clip(text []byte) string {
	const max = 40
	if len(text) > max {
		return string(text[:max]) + "..."
	}
	return string(text)
}

// string parses the string at p.pos, writes its canonical form to p.out and reports where its
// unescaped bytes are: data[off:end] if it had no escapes, else (*dst)[off:end], appended there.
func (p *state) string(dst *[]byte) (off, end int, esc bool, ok bool) {
	d := p.data
	start := p.pos
	i := start + 1
	// Fast path: no escapes, so the source text is the canonical text. Only the bytes that
	// need checking (control characters, non-ASCII) leave the tight loop.
	for i < len(d) {
		c := d[i]
		if c == '"' {
			p.out = append(p.out, d[start:i+1]...)
			p.pos = i + 1
			return start + 1, i, false, true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			p.pos = i
			return 0, 0, false, p.syntax("in string literal")
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(d[i:])
		if r == utf8.RuneError && size == 1 {
			return 0, 0, false, p.fail("invalid UTF-8 at offset " + strconv.Itoa(i))
		}
		i += size
	}
	if i >= len(d) {
		p.pos = i
		return 0, 0, false, p.syntax("in string literal")
	}

	// Slow path: the string has escapes. The prefix before the first one is copied as is
	// to both the unescaped bytes and the canonical text; the rest is decoded and re-escaped.
	buf := *dst
	off = len(buf)
	buf = append(buf, d[start+1:i]...)
	p.out = append(p.out, d[start:i]...)
	for {
		if i >= len(d) {
			*dst = buf
			p.pos = i
			return 0, 0, false, p.syntax("in string literal")
		}
		c := d[i]
		switch {
		case c == '"':
			*dst = buf
			p.out = append(p.out, '"')
			p.pos = i + 1
			return off, len(buf), true, true
		case c == '\\':
			if i+1 >= len(d) {
				*dst = buf
				p.pos = i + 1
				return 0, 0, false, p.syntax("in string escape code")
			}
			var r rune
			switch d[i+1] {
			case '"':
				r = '"'
			case '\\':
				r = '\\'
			case '/':
				r = '/'
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			case 'u':
				var ok bool
				r, ok = p.hex4(i + 2)
				if !ok {
					*dst = buf
					return 0, 0, false, false
				}
				i += 4
				if r >= 0xD800 && r < 0xDC00 {
					// A leading surrogate must be followed by an escaped trailing one.
					if i+3 < len(d) && d[i+2] == '\\' && d[i+3] == 'u' {
						r2, ok := p.hex4(i + 4)
						if !ok {
							*dst = buf
							return 0, 0, false, false
						}
						if r2 >= 0xDC00 && r2 < 0xE000 {
							r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
							i += 6
							break
						}
					}
					*dst = buf
					return 0, 0, false, p.fail("invalid UTF-8: lone surrogate \\u" + hex4text(d[i-2:i+2]) + " at offset " + strconv.Itoa(i-4))
				}
				if r >= 0xDC00 && r < 0xE000 {
					*dst = buf
					return 0, 0, false, p.fail("invalid UTF-8: lone surrogate \\u" + hex4text(d[i-2:i+2]) + " at offset " + strconv.Itoa(i-4))
				}
			default:
				*dst = buf
				p.pos = i + 1
				return 0, 0, false, p.syntax("in string escape code")
			}
			i += 2
			buf = utf8.AppendRune(buf, r)
			p.out = appendEscapedRune(p.out, r)
		case c < 0x20:
			*dst = buf
			p.pos = i
			return 0, 0, false, p.syntax("in string literal")
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.out = append(p.out, c)
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				*dst = buf
				return 0, 0, false, p.fail("invalid UTF-8 at offset " + strconv.Itoa(i))
			}
			buf = append(buf, d[i:i+size]...)
			p.out = append(p.out, d[i:i+size]...)
			i += size
		}
	}
}

// hex4 decodes the four hex digits of a \u escape at data[i:i+4].
func (p *state) hex4(i int) (rune, bool) {
	var r rune
	for j := i; j < i+4; j++ {
		if j >= len(p.data) {
			p.pos = j
			return 0, p.syntax("in \\u hexadecimal character escape")
		}
		c := p.data[j]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			p.pos = j
			return 0, p.syntax("in \\u hexadecimal character escape")
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// hex4text lowercases four hex digits for a refusal reason.
func hex4text(b []byte) string {
	var s [4]byte
	for i, c := range b[:4] {
		if c >= 'A' && c <= 'F' {
			c += 'a' - 'A'
		}
		s[i] = c
	}
	return string(s[:])
}

// makeString returns the unescaped string at data[off:end] or, if it had escapes, buf[off:end].
func (p *state) makeString(off, end int, esc bool, buf []byte) string {
	switch {
	case esc:
		return string(buf[off:end])
	case p.src != "":
		return p.src[off:end]
	default:
		return string(p.data[off:end])
	}
}

// keyBytes returns the unescaped bytes of a member's key.
func (p *state) keyBytes(it *item) []byte {
	if it.kEsc {
		return p.keys[it.kOff:it.kEnd]
	}
	return p.data[it.kOff:it.kEnd]
}

func (p *state) array() bool {
	if p.depth++; p.depth > maxDepth {
		return p.fail("nesting deeper than " + strconv.Itoa(maxDepth))
	}
	p.pos++
	p.out = append(p.out, '[')
	base := len(p.vals)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
	} else {
		for n := 0; ; n++ {
			if !p.value() {
				return p.at(strconv.Itoa(n))
			}
			if p.values {
				p.vals = append(p.vals, p.v)
			}
			p.skipSpace()
			if p.pos >= len(p.data) {
				return p.syntax("after array element")
			}
			c := p.data[p.pos]
			p.pos++
			if c == ']' {
				break
			}
			if c != ',' {
				p.pos--
				return p.syntax("after array element")
			}
			p.out = append(p.out, ',')
		}
	}
	p.out = append(p.out, ']')
	if p.values {
		elems := p.vals[base:]
		a := make([]any, len(elems))
		copy(a, elems)
		clear(elems)
		p.vals = p.vals[:base]
		p.v = a
	}
	p.depth--
	return true
}

func (p *state) object() bool {
	if p.depth++; p.depth > maxDepth {
		return p.fail("nesting deeper than " + strconv.Itoa(maxDepth))
	}
	p.pos++
	p.out = append(p.out, '{')
	base := len(p.items)
	keyMark := len(p.keys)
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
	} else {
		for {
			p.skipSpace()
			if p.pos >= len(p.data) || p.data[p.pos] != '"' {
				return p.syntax("looking for beginning of object key string")
			}
			start := len(p.out)
			off, end, esc, ok := p.string(&p.keys)
			if !ok {
				return false
			}
			p.skipSpace()
			if p.pos >= len(p.data) || p.data[p.pos] != ':' {
				return p.syntax("after object key")
			}
			p.pos++
			p.out = append(p.out, ':')
			p.items = append(p.items, item{kOff: off, kEnd: end, kEsc: esc, start: start})
			idx := len(p.items) - 1
			if !p.value() {
				return p.at(string(p.keyBytes(&p.items[idx])))
			}
			it := &p.items[idx]
			it.end = len(p.out)
			it.val = p.v
			p.skipSpace()
			if p.pos >= len(p.data) {
				return p.syntax("after object key:value pair")
			}
			c := p.data[p.pos]
			p.pos++
			if c == '}' {
				break
			}
			if c != ',' {
				p.pos--
				return p.syntax("after object key:value pair")
			}
			p.out = append(p.out, ',')
		}
	}
	members := p.items[base:]
	if !p.sortMembers(members) {
		return false
	}
	if x, y, clash := foldClash(p, len(members), func(i int) []byte { return p.keyBytes(&members[i]) }); clash {
		// Name the two keys in the order they were written; the pointer is the later one's.
		if members[x].start > members[y].start {
			x, y = y, x
		}
		first, second := string(p.keyBytes(&members[x])), string(p.keyBytes(&members[y]))
		p.failClash(first, second)
		return p.at(second)
	}
	if p.values {
		m := make(map[string]any, len(members))
		for i := range members {
			it := &members[i]
			m[p.makeString(it.kOff, it.kEnd, it.kEsc, p.keys)] = it.val
		}
		p.v = m
	}
	clear(members)
	p.items = p.items[:base]
	p.keys = p.keys[:keyMark]
	p.out = append(p.out, '}')
	p.depth--
	return true
}

// sortMembers puts an object's members in key order, refuses a duplicate key, and rewrites
// the members' canonical text in out (which ends with them) in that order.
func (p *state) sortMembers(members []item) bool {
	sorted := true
	for i := 1; i < len(members); i++ {
		if compareKeys(p.keyBytes(&members[i-1]), p.keyBytes(&members[i])) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return true
	}
	if len(members) <= 16 {
		// Insertion sort: objects in arguments are small, and it needs no closure.
		for i := 1; i < len(members); i++ {
			for j := i; j > 0 && compareKeys(p.keyBytes(&members[j-1]), p.keyBytes(&members[j])) > 0; j-- {
				members[j-1], members[j] = members[j], members[j-1]
			}
		}
	} else {
		slices.SortFunc(members, func(a, b item) int {
			return compareKeys(p.keyBytes(&a), p.keyBytes(&b))
		})
	}
	for i := 1; i < len(members); i++ {
		if compareKeys(p.keyBytes(&members[i-1]), p.keyBytes(&members[i])) == 0 {
			key := string(p.keyBytes(&members[i]))
			p.fail("duplicate key " + strconv.Quote(key))
			return p.at(key)
		}
	}
	// The members' text runs from the first member's start to the end of out, separated by
	// commas; copy it aside and write it back in order.
	first := members[0].start
	for i := range members {
		first = min(first, members[i].start)
	}
	p.tmp = append(p.tmp[:0], p.out[first:]...)
	p.out = p.out[:first]
	for i := range members {
		if i > 0 {
			p.out = append(p.out, ',')
		}
		p.out = append(p.out, p.tmp[members[i].start-first:members[i].end-first]...)
	}
	return true
}

// appendEscapedRune appends r to a JSON string body as RFC 8785 (ECMAScript JSON.stringify)
// writes it: the two-character escapes for " \ and five controls, \u00xx with lowercase hex
// for the other controls, and everything else as itself in UTF-8.
func appendEscapedRune(b []byte, r rune) []byte {
	if r >= 0x20 && r != '"' && r != '\\' {
		return utf8.AppendRune(b, r)
	}
	switch r {
	case '"':
		return append(b, '\\', '"')
	case '\\':
		return append(b, '\\', '\\')
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	const hexDigits = "0123456789abcdef"
	return append(b, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
}
