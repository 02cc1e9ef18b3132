package policy

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Authority is the optional `authority:` section (docs/authority.md): which principal may propose which
// action. With it, every action needs a matching grant.
type Authority struct {
	MaxDelegationDepth int // default [DefaultMaxDelegationDepth]
	Grants             []*Grant
	// BreakGlass are the break-glass envelopes, nil when none are declared.
	BreakGlass []*Envelope
	Pos        Position // of the authority key
}

// Grant is one entry of authority.grants.
type Grant struct {
	ID           string
	Subject      Subject
	Actions      []string   // name patterns, '.'-separated; never empty
	Resources    []string   // resource patterns, ':'-separated; nil when not declared
	Constraints  Conditions // nil when absent
	Environments []string   // exact names; nil when not declared
	ExpiresAt    time.Time  // zero when the grant does not expire
	Delegable    bool       // only with ExpiresAt
	// Tasks are task-id patterns (':'-separated, as resources; docs/authority.md); nil when not
	// declared (any task, or none). A grant that names tasks admits only calls carrying a
	// matching task.
	Tasks []string
	// Budgets are the grant's budgets (docs/budgets.md), charged on every call it decides and on
	// every call a delegation beneath it decides; nil when none.
	Budgets []Budget
	Pos     Position // of the grant's mapping
}

// Subject says whom a grant is for. Both are patterns (':'-separated segments); "" does not
// constrain that side. At least one is set.
type Subject struct {
	Agent, User string
}

// CheckPattern validates a pattern whose segments are separated by sep (docs/authority.md): '.' for
// action names, ':' for resources and subjects. A segment is a literal, or a literal followed by
// one '*' (a prefix; a lone '*' is the empty prefix, so any one segment). The last segment may be
// '**' (one or more further segments), only after at least one segment and only when every
// segment before it is a plain literal. No '?', no '*' anywhere else, no empty segments, no
// control characters. Patterns are case-sensitive and not normalized.
func CheckPattern(p string, sep byte) error {
	if p == "" {
		return errors.New("empty pattern")
	}
	if !utf8.ValidString(p) {
		return errors.New("invalid UTF-8")
	}
	for _, r := range p {
		switch {
		case r == '?':
			return errors.New("? is not a pattern character (use a trailing * for a prefix)")
		case r < 0x20, r == 0x7f, 0x80 <= r && r <= 0x9f:
			return fmt.Errorf("control character U+%04X", r)
		}
	}
	segs := strings.Split(p, string(sep))
	for i, seg := range segs {
		switch {
		case seg == "":
			return fmt.Errorf("empty segment %d (segments are separated by a single %q)", i, sep)
		case seg == "**":
			if i != len(segs)-1 {
				return errors.New("** is allowed only as the last segment")
			}
			if i == 0 {
				return errors.New("** needs at least one literal segment before it")
			}
			for _, prev := range segs[:i] {
				if strings.Contains(prev, "*") {
					return errors.New("** is allowed only after literal segments")
				}
			}
		case strings.Contains(seg, "*"):
			if strings.IndexByte(seg, '*') != len(seg)-1 {
				return fmt.Errorf("segment %q: * is allowed only once, at the end of a segment", seg)
			}
		}
	}
	return nil
}

// checkActionPattern is CheckPattern for action names, whose literal text must also be in the
// action-name alphabet: a pattern no action name can match is a typo.
func checkActionPattern(p string) error {
	if err := CheckPattern(p, '.'); err != nil {
		return err
	}
	for _, seg := range strings.Split(p, ".") {
		if lit := strings.TrimRight(seg, "*"); !nameChars(lit) {
			return fmt.Errorf("segment %q has characters an action name cannot have (letters, digits, _ and -)", seg)
		}
	}
	return nil
}

func (p *parser) authority(e entry) (*Authority, *Error) {
	if err := p.mapping(e, "authority", "a mapping with grants"); err != nil {
		return nil, err
	}
	au := &Authority{MaxDelegationDepth: DefaultMaxDelegationDepth, Pos: posOf(e.k)}
	var hasGrants bool
	for _, en := range entries(e.v) {
		var err *Error
		switch en.k.Value {
		case "max_delegation_depth":
			var n int64
			if n, err = p.int(en, "max_delegation_depth"); err == nil && n < 0 {
				err = p.errf(en.v, "max_delegation_depth is %d (expected 0 or more)", n)
			}
			au.MaxDelegationDepth = int(n)
		case "grants":
			hasGrants = true
			au.Grants, err = p.grants(en)
		case "break_glass":
			au.BreakGlass, err = p.breakGlass(en)
		default:
			err = p.unknownKey(en.k, "in the authority section", authorityKeys)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasGrants {
		return nil, p.errf(e.v, "missing grants in the authority section (expected a list of grants)")
	}
	return au, nil
}

func (p *parser) grants(e entry) ([]*Grant, *Error) {
	if isNull(e.v) || e.v.Kind == yaml.SequenceNode && len(e.v.Content) == 0 {
		return nil, nil // no grants: nothing is authorized
	}
	if e.v.Kind != yaml.SequenceNode {
		return nil, p.errf(e.v, "grants is %s (expected a list of grants)", describeNode(e.v))
	}
	ids := map[string]*yaml.Node{}
	var gs []*Grant
	for i, gn := range e.v.Content {
		g, idNode, err := p.grant(i, gn)
		if err != nil {
			return nil, err
		}
		if first := ids[g.ID]; first != nil {
			return nil, p.errf(idNode, "duplicate grant id %s (first at line %d, column %d)", quote(g.ID), first.Line, first.Column)
		}
		ids[g.ID] = idNode
		gs = append(gs, g)
	}
	return gs, nil
}

func validGrantID(s string) bool {
	if s == "" || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// ParseGrant parses one grant written on its own, as `latch delegate --file GRANT.yaml` reads
// it: a YAML mapping with the keys of an authority.grants entry (subject, actions, resources,
// constraints, environments, expires_at, delegable, tasks, budgets), under the same strict rules as [Parse]. file
// names it in errors ("" is reported as "grant"); every error is an *Error with a line of at
// least 1.
//
// The grant has no `id`, and one is refused rather than ignored: the store assigns a delegation
// its id (dlg_…) when it is created, and an id in the file would name something that never
// exists (`latch revoke` with it would find nothing). Whether the grant is a valid delegation
// — contained in its parent on every dimension — is not decided here but by package authority,
// which knows the parent.
func ParseGrant(file string, data []byte) (*Grant, error) {
	if file == "" {
		file = "grant"
	}
	p := &parser{file: file, grantDoc: true}
	root, e := p.decode(data)
	if e != nil {
		return nil, e
	}
	if e := p.check(root, 1, ""); e != nil {
		return nil, e
	}
	if root.Kind != yaml.MappingNode {
		return nil, p.errf(root, "the grant is %s (expected a mapping with subject and actions)", describeNode(root))
	}
	g := &Grant{Pos: posOf(root)}
	if e := p.grantFields(root, g, "in the grant"); e != nil {
		return nil, e
	}
	return g, nil
}

func (p *parser) grant(i int, gn *yaml.Node) (*Grant, *yaml.Node, *Error) {
	if gn.Kind != yaml.MappingNode {
		return nil, nil, p.errf(gn, "grant %d is %s (expected a mapping with id, subject and actions)", i, describeNode(gn))
	}
	g := &Grant{Pos: posOf(gn)}
	var idNode *yaml.Node
	where := fmt.Sprintf("in grant %d", i)
	for _, en := range entries(gn) {
		if en.k.Value != "id" {
			continue
		}
		id, err := p.str(en, "id "+where)
		if err != nil {
			return nil, nil, err
		}
		if !validGrantID(id) {
			return nil, nil, p.errf(en.v, "bad grant id %s (expected a letter or digit, then letters, digits, ., _ or -)", quote(id))
		}
		g.ID, idNode = id, en.v
		where = "in grant " + quote(id)
	}
	if idNode == nil {
		return nil, nil, p.errf(gn, "missing id %s (expected a unique id such as billing-agents)", where)
	}
	if err := p.grantFields(gn, g, where); err != nil {
		return nil, nil, err
	}
	return g, idNode, nil
}

// grantFields parses every key of a grant mapping except a policy grant's id into g. where
// names the grant in messages.
func (p *parser) grantFields(gn *yaml.Node, g *Grant, where string) *Error {
	var hasSubject, delegable bool
	var delegableNode *yaml.Node
	for _, en := range entries(gn) {
		var err *Error
		switch en.k.Value {
		case "id":
			if p.grantDoc {
				err = p.errf(en.k, "id %s (a delegation's id is assigned when it is created, dlg_…; leave id out)", where)
			}
		case "subject":
			hasSubject = true
			g.Subject, err = p.subject(en, where)
		case "actions":
			g.Actions, err = p.patterns(en, "actions "+where, checkActionPattern)
		case "resources":
			g.Resources, err = p.patterns(en, "resources "+where, func(s string) error { return CheckPattern(s, ':') })
		case "constraints":
			g.Constraints, err = p.conditions(en, "constraints", where)
		case "environments":
			g.Environments, err = p.patterns(en, "environments "+where, func(s string) error {
				if strings.TrimSpace(s) != s {
					return errors.New("leading or trailing space")
				}
				return nil
			})
		case "tasks":
			g.Tasks, err = p.patterns(en, "tasks "+where, func(s string) error { return CheckPattern(s, ':') })
		case "expires_at":
			var s string
			if s, err = p.str(en, "expires_at "+where); err == nil {
				t, perr := time.Parse(time.RFC3339Nano, s)
				if y := t.UTC().Year(); perr != nil || y < 1 || y > 9999 {
					// The year check keeps the UTC form (used by the hash) an RFC 3339 time.
					err = p.errf(en.v, "bad expires_at %s %s (expected an RFC 3339 time with an offset, like 2026-12-31T23:59:59Z)", quote(s), where)
				}
				g.ExpiresAt = t
			}
		case "delegable":
			delegableNode = en.v
			delegable, err = p.bool(en, "delegable "+where)
			g.Delegable = delegable
		case "budgets":
			g.Budgets, err = p.budgets(en, where, false)
		default:
			keys := grantKeys
			if p.grantDoc {
				keys = grantKeys[1:] // no id
			}
			err = p.unknownKey(en.k, where, keys)
		}
		if err != nil {
			return err
		}
	}
	switch {
	case !hasSubject:
		return p.errf(gn, "missing subject %s (expected subject: {agent: …, user: …})", where)
	case g.Actions == nil:
		return p.errf(gn, "missing actions %s (expected a list of action patterns)", where)
	case delegable && g.ExpiresAt.IsZero():
		name := "delegable grant " + quote(g.ID)
		if p.grantDoc {
			name = "delegable grant"
		}
		return p.errf(delegableNode, "%s has no expires_at (a grant that can be delegated must expire)", name)
	}
	return nil
}

func (p *parser) subject(e entry, where string) (Subject, *Error) {
	var s Subject
	if err := p.mapping(e, "subject "+where, "a mapping with agent and/or user"); err != nil {
		return s, err
	}
	for _, en := range entries(e.v) {
		var dst *string
		switch en.k.Value {
		case "agent":
			dst = &s.Agent
		case "user":
			dst = &s.User
		default:
			return s, p.unknownKey(en.k, "in the subject "+where, subjectKeys)
		}
		v, err := p.str(en, en.k.Value+" "+where)
		if err != nil {
			return s, err
		}
		if perr := CheckPattern(v, ':'); perr != nil {
			return s, p.errf(en.v, "bad %s pattern %s %s: %v", en.k.Value, quote(v), where, perr)
		}
		*dst = v
	}
	if s.Agent == "" && s.User == "" {
		return s, p.errf(e.v, "empty subject %s (expected agent, user or both)", where)
	}
	return s, nil
}

// patterns parses a non-empty list of strings, each checked by check.
func (p *parser) patterns(e entry, what string, check func(string) error) ([]string, *Error) {
	if e.v.Kind != yaml.SequenceNode {
		return nil, p.errf(at(e), "%s is %s (expected a list)", what, describeNode(e.v))
	}
	if len(e.v.Content) == 0 {
		return nil, p.errf(e.v, "empty %s (expected at least one entry; leave the key out instead)", what)
	}
	out := make([]string, 0, len(e.v.Content))
	for _, n := range e.v.Content {
		s, err := p.str(entry{n, n}, "entry of "+what)
		if err != nil {
			return nil, err
		}
		if s == "" {
			return nil, p.errf(n, "empty entry in %s", what)
		}
		if cerr := check(s); cerr != nil {
			return nil, p.errf(n, "bad entry %s in %s: %v", quote(s), what, cerr)
		}
		out = append(out, s)
	}
	return out, nil
}
