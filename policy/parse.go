package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Keys of each mapping, in the order error messages list them.
var (
	topKeys       = []string{"schema", "mode", "environment", "version", "actions", "authority", "gateway", "approvers", "retention", "scopes"}
	actionKeys    = []string{"effect", "resource", "arguments", "lease", "approval_ttl", "max_attempts", "rules", "decision", "approvers", "budgets", "precondition"}
	ruleKeys      = []string{"when", "decision"}
	authorityKeys = []string{"max_delegation_depth", "grants", "break_glass"}
	grantKeys     = []string{"id", "subject", "actions", "resources", "constraints", "environments", "expires_at", "delegable", "tasks", "budgets"}
	subjectKeys   = []string{"agent", "user"}
)

// YAML tags as yaml.v3 resolves them.
const (
	tagNull      = "!!null"
	tagBool      = "!!bool"
	tagStr       = "!!str"
	tagInt       = "!!int"
	tagFloat     = "!!float"
	tagTimestamp = "!!timestamp"
	tagMerge     = "!!merge"
)

// Parse parses and validates a policy document. file names it in errors and in Policy.File ("" is
// reported as "policy"). Every error is an *Error with a line of at least 1.
func Parse(file string, data []byte) (*Policy, error) {
	if file == "" {
		file = "policy"
	}
	p := &parser{file: file}
	pol, e := p.document(data)
	if e != nil {
		return nil, e
	}
	return pol, nil
}

type parser struct {
	file     string
	grantDoc bool // the document is one delegated grant (ParseGrant), not a policy
}

type entry struct{ k, v *yaml.Node }

func entries(n *yaml.Node) []entry {
	es := make([]entry, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		es = append(es, entry{n.Content[i], n.Content[i+1]})
	}
	return es
}

func posOf(n *yaml.Node) Position { return Position{Line: n.Line, Column: n.Column} }

func (p *parser) errf(n *yaml.Node, format string, args ...any) *Error {
	line, col := n.Line, n.Column
	if line < 1 {
		line, col = 1, 0
	}
	return &Error{File: p.file, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// at returns the node an error about e's value should point at: the value, or the key when the
// value is an implicit null (`lease:` with nothing after it), which has no text of its own.
func at(e entry) *yaml.Node {
	if isNull(e.v) && e.v.Value == "" {
		return e.k
	}
	return e.v
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == tagNull }

func (p *parser) unknownKey(k *yaml.Node, where string, expected []string) *Error {
	return p.errf(k, "unknown key %s %s (expected one of %s)", quote(k.Value), where, strings.Join(expected, ", "))
}

func (p *parser) document(data []byte) (*Policy, *Error) {
	root, e := p.decode(data)
	if e != nil {
		return nil, e
	}
	if e := p.check(root, 1, ""); e != nil {
		return nil, e
	}
	if root.Kind != yaml.MappingNode {
		return nil, p.errf(root, "the policy is %s (expected a mapping starting with schema: %s)", describeNode(root), Schema)
	}
	pol := &Policy{File: p.file, Mode: ModeEnforce, Actions: map[string]*Action{}}
	es := entries(root)
	var schema *entry
	for i := range es {
		if es[i].k.Value == "schema" {
			schema = &es[i]
		}
	}
	if schema == nil {
		return nil, p.errf(root, "missing schema (expected schema: %s)", Schema)
	}
	s, e := p.str(*schema, "schema")
	if e != nil {
		return nil, e
	}
	if s != Schema {
		return nil, p.errf(schema.v, "unknown schema %s (expected %s)", quote(s), Schema)
	}
	pol.Schema = s
	for _, en := range es {
		var e *Error
		switch en.k.Value {
		case "schema":
		case "mode":
			var s string
			if s, e = p.str(en, "mode"); e == nil {
				switch m := Mode(s); m {
				case ModeEnforce, ModeObserve:
					pol.Mode = m
				default:
					e = p.errf(en.v, "bad mode %s (expected enforce or observe)", quote(s))
				}
			}
		case "environment":
			if pol.Environment, e = p.str(en, "environment"); e == nil && pol.Environment == "" {
				e = p.errf(en.v, "empty environment (expected a name such as production, or leave environment out)")
			}
		case "version":
			pol.Version, e = p.str(en, "version")
		case "actions":
			e = p.actions(en, pol)
		case "authority":
			pol.Authority, e = p.authority(en)
		case "gateway":
			pol.Gateway, e = p.gateway(en)
		case "approvers":
			pol.Approvers, e = p.approvers(en)
		case "retention":
			pol.Retention, e = p.retention(en)
		case "scopes":
			pol.Scopes, e = p.scopes(en)
		default:
			e = p.unknownKey(en.k, "at the top level", topKeys)
		}
		if e != nil {
			return nil, e
		}
	}
	if e := p.checkActionApprovers(pol); e != nil {
		return nil, e
	}
	if e := p.checkEnvelopes(pol); e != nil {
		return nil, e
	}
	pol.compiled = make(map[*Action]*compiledAction, len(pol.Actions))
	for _, a := range pol.Actions {
		pol.compiled[a] = compileAction(a)
	}
	h, err := hashPolicy(pol)
	if err != nil {
		return nil, &Error{File: p.file, Line: 1, Msg: "hash policy: " + err.Error()}
	}
	pol.Hash = h
	return pol, nil
}

// decode checks the text and parses exactly one YAML document.
func (p *parser) decode(data []byte) (root *yaml.Node, e *Error) {
	if e := p.checkText(data); e != nil {
		return nil, e
	}
	defer func() {
		// The YAML parser is not ours; whatever it does with hostile input, a policy load must
		// end in a refusal, never a crash.
		if r := recover(); r != nil {
			root, e = nil, &Error{File: p.file, Line: 1, Msg: fmt.Sprintf("invalid YAML: parser failure: %v", r)}
		}
	}()
	empty, kind := "empty policy (expected a mapping starting with schema: "+Schema+")", "policy"
	if p.grantDoc {
		empty, kind = "empty grant (expected a mapping with subject and actions)", "grant"
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: p.file, Line: 1, Column: 1, Msg: empty}
		}
		return nil, p.yamlError(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, p.yamlError(err)
	default:
		return nil, p.errf(&extra, "a second YAML document (expected exactly one document in a %s file)", kind)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{File: p.file, Line: 1, Column: 1, Msg: empty}
	}
	return doc.Content[0], nil
}

// yamlError turns a yaml.v3 syntax error ("yaml: line 3: did not find expected key") into an
// *Error. The parser reports a line but not a column.
func (p *parser) yamlError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil && n >= 1 {
				line = n
				msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return &Error{File: p.file, Line: line, Msg: "invalid YAML: " + msg}
}

// checkText refuses what is not UTF-8 text before the YAML parser sees it, so that the refusal
// has a position (the parser reports encoding problems without one). Control characters other
// than tab and line breaks are refused: they hide text from a reviewer.
func (p *parser) checkText(data []byte) *Error {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		bad := ""
		switch {
		case r == utf8.RuneError && size <= 1:
			bad = "invalid UTF-8 (a policy file is UTF-8 text)"
		case r == '\n':
			line, col = line+1, 1
			i += size
			continue
		case r == '\r':
			if i+1 < len(data) && data[i+1] == '\n' {
				i++
				continue
			}
			line, col = line+1, 1
			i += size
			continue
		case r == '\t':
		case r < 0x20, r == 0x7f, 0x80 <= r && r <= 0x9f:
			bad = fmt.Sprintf("control character U+%04X (only tabs and line breaks are allowed)", r)
		case isBidiControl(r):
			bad = fmt.Sprintf("bidirectional control character U+%04X (it can make the text a reviewer reads differ from what is evaluated)", r)
		case r == 0xfeff && i != 0:
			bad = "byte order mark inside the text"
		case r == 0xfffe, r == 0xffff:
			bad = fmt.Sprintf("noncharacter U+%04X", r)
		}
		if bad != "" {
			return &Error{File: p.file, Line: line, Column: col, Msg: bad}
		}
		col++
		i += size
	}
	return nil
}

// isBidiControl reports whether r is a Unicode bidirectional formatting character: the
// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) and the implicit marks
// (U+200E, U+200F, U+061C). They reorder how text is displayed, not what it is.
func isBidiControl(r rune) bool {
	return 0x202a <= r && r <= 0x202e || 0x2066 <= r && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// maxNesting bounds how deep lists and mappings may nest. A policy needs a handful of levels;
// the bound keeps every later walk (and the canonical JSON of the hash) far from any limit.
const maxNesting = 64

// check walks the whole document once and refuses, wherever they are, the constructs that make
// what a reviewer reads differ from what is evaluated: anchors, aliases, merge keys, explicit
// tags, duplicate or non-string keys, floats and integers not in plain decimal; and nesting
// deeper than maxNesting; and strings (keys and values) that hold, once YAML's escapes are
// undone, a character a reviewer cannot see (see hiddenChar). path names where n is
// (actions."billing.charge".effect), for that last error.
func (p *parser) check(n *yaml.Node, depth int, path string) *Error {
	if depth > maxNesting {
		return p.errf(n, "nesting deeper than %d levels", maxNesting)
	}
	if n.Kind == yaml.AliasNode {
		return p.errf(n, "alias *%s (aliases are not allowed: write the value out so that what is reviewed is what is evaluated)", n.Value)
	}
	if n.Anchor != "" {
		return p.errf(n, "anchor &%s (anchors are not allowed: write each value out)", n.Anchor)
	}
	if n.Style&yaml.TaggedStyle != 0 {
		return p.errf(n, "explicit tag %s (tags are not allowed; quote a value to make it a string)", n.Tag)
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == tagFloat && isBudgetLimit(path) {
			return p.errf(n, "%s is float %s (expected a non-negative integer: a budget's limit is a count or a sum of integers)", path, n.Value)
		}
		if e := p.checkScalar(n); e != nil {
			return e
		}
		if n.Tag == tagStr {
			return p.checkChars(n, path, false)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if e := p.check(c, depth+1, fmt.Sprintf("%s[%d]", path, i)); e != nil {
				return e
			}
		}
	case yaml.MappingNode:
		seen := make(map[string]*yaml.Node, len(n.Content)/2)
		for _, en := range entries(n) {
			k := en.k
			if k.Kind == yaml.ScalarNode && k.Tag == tagStr {
				// A key is checked as a key: the error names the mapping it is in.
				if e := p.checkChars(k, path, true); e != nil {
					return e
				}
			}
			if e := p.check(k, depth+1, path); e != nil {
				return e
			}
			if k.Kind != yaml.ScalarNode || k.Tag != tagStr {
				return p.errf(k, "%s as a mapping key (keys must be strings; quote it)", describeNode(k))
			}
			if first := seen[k.Value]; first != nil {
				return p.errf(k, "duplicate key %s (first at line %d, column %d; a key may appear once)", quote(k.Value), first.Line, first.Column)
			}
			seen[k.Value] = k
			if e := p.check(en.v, depth+1, pathJoin(path, k.Value)); e != nil {
				return e
			}
		}
	case yaml.DocumentNode:
		return p.errf(n, "nested document")
	}
	return nil
}

func (p *parser) checkScalar(n *yaml.Node) *Error {
	switch n.Tag {
	case tagNull, tagBool:
	case tagStr, tagTimestamp:
		if !utf8.ValidString(n.Value) {
			return p.errf(n, "invalid UTF-8 in a string")
		}
	case tagInt:
		if !isDecimal(n.Value) {
			return p.errf(n, "integer %s is not in plain decimal (expected digits with an optional leading -, no leading zeros, base prefixes or _)", n.Value)
		}
		if _, ok := parseSafeInt(n.Value); !ok {
			return p.errf(n, "integer %s is outside ±(2^53-1)", n.Value)
		}
	case tagFloat:
		if isDecimal(strings.TrimPrefix(n.Value, "+")) {
			return p.errf(n, "integer %s is outside ±(2^53-1)", n.Value)
		}
		return p.errf(n, "float %s (floats are not allowed: money is integer minor units or a decimal string; quote it if it is text)", n.Value)
	case tagMerge:
		return p.errf(n, "merge key << (merge keys are not allowed: write the keys out)")
	default:
		return p.errf(n, "unsupported value of type %s", n.Tag)
	}
	return nil
}

// checkChars refuses a string scalar (a key when key is set, at path) that holds a character
// hiddenChar reports. The raw text was checked before parsing (checkText), but YAML's escapes in
// a double-quoted string ("\u202e", "\x1b", "\0", "\u200b") produce such characters from
// plain ASCII: the string a reviewer reads is then not the one that is evaluated, or that is
// shown to an approver, or that names an action.
func (p *parser) checkChars(n *yaml.Node, path string, key bool) *Error {
	for _, r := range n.Value {
		if what := hiddenChar(r); what != "" {
			where := "the value of " + path
			switch {
			case key && path == "":
				where = "a top-level key"
			case key:
				where = "a key in " + path
			case path == "":
				where = "the document"
			}
			return p.errf(n, "%s holds %s U+%04X (%s, written out or as a YAML escape, is refused: it can make the text a reviewer reads differ from what is evaluated or shown)",
				where, what, r, quote(n.Value))
		}
	}
	return nil
}

// hiddenChar names the kind of r when a policy string may not hold it, or returns "": NUL and
// the other C0 and C1 control characters (tabs and line breaks too: no policy string is
// multi-line, and one shown to an approver could fake a line), bidirectional controls, zero-width and other invisible format characters (Unicode Cf), the
// line and paragraph separators, and the noncharacters U+FFFE and U+FFFF.
func hiddenChar(r rune) string {
	switch {
	case r == 0:
		return "the NUL character"
	case unicode.IsControl(r):
		return "the control character"
	case isBidiControl(r):
		return "the bidirectional control character"
	case unicode.Is(unicode.Cf, r):
		return "the invisible format character"
	case r == 0x2028 || r == 0x2029:
		return "the line or paragraph separator"
	case r == 0xfffe || r == 0xffff:
		return "the noncharacter"
	}
	return ""
}

// pathJoin appends a mapping key to a path: bare when it is a plain name, quoted otherwise (an
// action name holds dots).
func pathJoin(path, key string) string {
	k := key
	if key == "" || !nameChars(key) {
		k = quote(key)
	}
	if path == "" {
		return k
	}
	return path + "." + k
}

// isDecimal reports whether s is -?(0|[1-9][0-9]*).
func isDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseSafeInt(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v > maxSafeInt || v < -maxSafeInt {
		return 0, false
	}
	return v, true
}

// describeNode names a node for a message: `a list`, `integer 5`, `string "x"`.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case tagNull:
			return "null"
		case tagBool:
			return "boolean " + n.Value
		case tagInt:
			return "integer " + n.Value
		case tagFloat:
			return "float " + n.Value
		case tagStr, tagTimestamp:
			return "string " + quote(n.Value)
		}
		return n.Tag + " " + quote(n.Value)
	}
	return "a document"
}

// str returns a string value. An unquoted date or timestamp is taken as its text.
func (p *parser) str(e entry, what string) (string, *Error) {
	if n := e.v; n.Kind == yaml.ScalarNode && (n.Tag == tagStr || n.Tag == tagTimestamp) {
		return n.Value, nil
	}
	return "", p.errf(at(e), "%s is %s (expected a string)", what, describeNode(e.v))
}

func (p *parser) int(e entry, what string) (int64, *Error) {
	if n := e.v; n.Kind == yaml.ScalarNode && n.Tag == tagInt {
		v, _ := parseSafeInt(n.Value) // checked by check
		return v, nil
	}
	return 0, p.errf(at(e), "%s is %s (expected an integer)", what, describeNode(e.v))
}

func (p *parser) bool(e entry, what string) (bool, *Error) {
	if n := e.v; n.Kind == yaml.ScalarNode && n.Tag == tagBool {
		return strings.EqualFold(n.Value, "true"), nil
	}
	return false, p.errf(at(e), "%s is %s (expected true or false)", what, describeNode(e.v))
}

func (p *parser) mapping(e entry, what, expected string) *Error {
	if e.v.Kind != yaml.MappingNode {
		return p.errf(at(e), "%s is %s (expected %s)", what, describeNode(e.v), expected)
	}
	return nil
}

// value converts a checked node to canon's value model.
func value(n *yaml.Node) any {
	switch n.Kind {
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, c := range n.Content {
			l[i] = value(c)
		}
		return l
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for _, en := range entries(n) {
			m[en.k.Value] = value(en.v)
		}
		return m
	}
	switch n.Tag {
	case tagNull:
		return nil
	case tagBool:
		return strings.EqualFold(n.Value, "true")
	case tagInt:
		v, _ := parseSafeInt(n.Value)
		return v
	}
	return n.Value
}

func (p *parser) actions(e entry, pol *Policy) *Error {
	if isNull(e.v) {
		return nil // no actions: every call is unknown_action
	}
	if e := p.mapping(e, "actions", "a mapping from action names to entries"); e != nil {
		return e
	}
	for _, en := range entries(e.v) {
		name := en.k.Value
		if !validActionName(name) {
			return p.errf(en.k, "bad action name %s (expected dot-separated segments of letters, digits, _ and -, like billing.charge)", quote(name))
		}
		if name == PolicyChangeAction {
			return p.errf(en.k, "action name %s is reserved: it is a change of the policy itself, whose approvers are approvers.policy_change", quote(name))
		}
		a, e := p.action(en)
		if e != nil {
			return e
		}
		pol.Actions[name] = a
	}
	return nil
}

// validActionName reports whether s is non-empty, '.'-separated segments of [A-Za-z0-9_-]+.
func validActionName(s string) bool {
	if s == "" {
		return false
	}
	for _, seg := range strings.Split(s, ".") {
		if seg == "" || !nameChars(seg) {
			return false
		}
	}
	return true
}

func nameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (p *parser) action(e entry) (*Action, *Error) {
	name := e.k.Value
	where := "in action " + quote(name)
	if e.v.Kind != yaml.MappingNode {
		return nil, p.errf(at(e), "action %s is %s (expected a mapping with decision or rules)", quote(name), describeNode(e.v))
	}
	a := &Action{Name: name, Pos: posOf(e.k)}
	var decision, rules, effectN, resourceN *yaml.Node
	for _, en := range entries(e.v) {
		var err *Error
		switch en.k.Value {
		case "effect":
			effectN = en.v
			a.Effect, err = p.template(en, "effect template "+where)
		case "resource":
			resourceN = en.v
			a.Resource, err = p.template(en, "resource template "+where)
			switch {
			case err != nil:
			case contains(a.Resource.names, ResourcePlaceholder):
				err = p.errf(en.v, "resource template %s %s uses {resource} (a resource cannot be rendered from itself)", quote(a.Resource.src), where)
			case a.Resource.requestKey:
				// The resource is part of the action hash, which a retry under another request
				// key must keep: only the effect key may be named by the caller.
				err = p.errf(en.v, "resource template %s %s uses {%s} (only an effect template may: the resource is part of the action, which the caller's request key does not choose)",
					quote(a.Resource.src), where, RequestKeyPlaceholder)
			}
		case "arguments":
			err = p.argumentsSection(en, a, where)
		case "lease":
			a.Lease, err = p.duration(en, "lease "+where, MaxLease)
		case "approval_ttl":
			a.ApprovalTTL, err = p.duration(en, "approval_ttl "+where, MaxApprovalTTL)
		case "max_attempts":
			var n int64
			if n, err = p.int(en, "max_attempts "+where); err == nil && n < 1 {
				err = p.errf(en.v, "max_attempts %s is %d (expected at least 1; leave it out for no ceiling)", where, n)
			}
			a.MaxAttempts = int(n)
		case "decision":
			decision = en.k
			a.Decision, err = p.decision(en, where)
		case "rules":
			rules = en.k
			a.Rules, err = p.rules(en, name)
		case "approvers":
			a.Approvers, err = p.actionApprovers(en, where)
		case "budgets":
			a.Budgets, err = p.budgets(en, where, true)
		case "precondition":
			a.Precondition, err = p.precondition(en, where)
		default:
			err = p.unknownKey(en.k, where, actionKeys)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case decision != nil && rules != nil:
		later := rules
		if decision.Line > rules.Line || decision.Line == rules.Line && decision.Column > rules.Column {
			later = decision
		}
		return nil, p.errf(later, "both decision and rules %s (expected exactly one)", where)
	case decision == nil && rules == nil:
		return nil, p.errf(e.k, "action %s has neither decision nor rules (expected exactly one)", quote(name))
	}
	if err := p.checkAction(a, e.k, effectN, resourceN); err != nil {
		return nil, err
	}
	if err := p.checkActionBudgets(a); err != nil {
		return nil, err
	}
	return a, nil
}

func (p *parser) template(e entry, what string) (*Template, *Error) {
	s, err := p.str(e, what)
	if err != nil {
		return nil, err
	}
	t, terr := ParseTemplate(s)
	if terr != nil {
		return nil, p.errf(e.v, "bad %s %s: %v", what, quote(s), terr)
	}
	t.pos = posOf(e.v)
	return t, nil
}

// Bounds on the durations of an action. A lease is how long a crashed holder blocks its key
// before the effect counts as lost, so a lease of years is a key blocked for years; a long
// execution extends its lease as it goes. An approval is a bearer capability, so it should not
// outlive the situation a person judged. Below MinDuration nothing can complete in time.
const (
	MinDuration    = time.Second
	MaxLease       = 7 * 24 * time.Hour
	MaxApprovalTTL = 30 * 24 * time.Hour
)

func (p *parser) duration(e entry, what string, max time.Duration) (time.Duration, *Error) {
	if e.v.Kind == yaml.ScalarNode && e.v.Tag == tagInt {
		return 0, p.errf(e.v, "%s is a bare number %s (expected a duration with a unit, like 5m or 1h30m)", what, e.v.Value)
	}
	s, err := p.str(e, what)
	if err != nil {
		return 0, err
	}
	d, perr := time.ParseDuration(s)
	if perr != nil {
		return 0, p.errf(e.v, "bad duration %s for %s (expected a duration like 5m or 1h30m)", quote(s), what)
	}
	if d <= 0 {
		return 0, p.errf(e.v, "%s is %s (expected a positive duration)", what, quote(s))
	}
	if d < MinDuration || d > max {
		return 0, p.errf(e.v, "%s is %s (expected from %s to %s)", what, quote(s), MinDuration, fmtBound(max))
	}
	return d, nil
}

// fmtBound writes a whole number of days as days: 168h0m0s reads as 7 days (168h).
func fmtBound(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d %s (%dh)", d/(24*time.Hour), plural(int(d/(24*time.Hour)), "day", "days"), d/time.Hour)
	}
	return d.String()
}

func (p *parser) decision(e entry, where string) (Decision, *Error) {
	s, err := p.str(e, "decision "+where)
	if err != nil {
		return "", err
	}
	if d := Decision(s); d.Valid() {
		return d, nil
	}
	return "", p.errf(e.v, "bad decision %s %s (expected allow, approve or deny)", quote(s), where)
}

func (p *parser) rules(e entry, action string) ([]Rule, *Error) {
	if isNull(e.v) || e.v.Kind == yaml.SequenceNode && len(e.v.Content) == 0 {
		return nil, p.errf(at(e), "empty rules in action %s (expected at least one rule; write decision: deny to deny every call)", quote(action))
	}
	if e.v.Kind != yaml.SequenceNode {
		return nil, p.errf(e.v, "rules in action %s is %s (expected a list of rules)", quote(action), describeNode(e.v))
	}
	rules := make([]Rule, 0, len(e.v.Content))
	for i, rn := range e.v.Content {
		where := fmt.Sprintf("in rule %d of action %s", i, quote(action))
		if rn.Kind != yaml.MappingNode {
			return nil, p.errf(rn, "rule %d of action %s is %s (expected a mapping with decision and optionally when)", i, quote(action), describeNode(rn))
		}
		r := Rule{Pos: posOf(rn)}
		var hasDecision bool
		for _, en := range entries(rn) {
			var err *Error
			switch en.k.Value {
			case "when":
				r.When, err = p.conditions(en, "when", where)
			case "decision":
				hasDecision = true
				r.Decision, err = p.decision(en, where)
			default:
				err = p.unknownKey(en.k, where, ruleKeys)
			}
			if err != nil {
				return nil, err
			}
		}
		if !hasDecision {
			return nil, p.errf(rn, "missing decision %s (expected decision: allow, approve or deny)", where)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// conditions parses a `when:` or `constraints:` mapping.
func (p *parser) conditions(e entry, field, where string) (Conditions, *Error) {
	if err := p.mapping(e, field+" "+where, "a mapping of <argument>_<op>: operand"); err != nil {
		return nil, err
	}
	if len(e.v.Content) == 0 {
		return nil, p.errf(e.v, "empty %s %s (expected at least one condition; leave %s out to apply to every call)", field, where, field)
	}
	conds := make(Conditions, 0, len(e.v.Content)/2)
	for _, en := range entries(e.v) {
		key := en.k.Value
		arg, op, ce := splitConditionKey(key)
		if ce != nil {
			return nil, p.errf(en.k, "%s %s %s", ce.head, where, ce.tail)
		}
		operand := value(en.v)
		if ce := checkOperand(key, op, operand); ce != nil {
			return nil, p.errf(at(en), "%s %s %s", ce.head, where, ce.tail)
		}
		conds = append(conds, Condition{Key: key, Arg: arg, Op: op, Operand: operand, Pos: posOf(en.k)})
	}
	return conds, nil
}
