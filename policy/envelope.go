package policy

import (
	"fmt"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"
)

// Budget is one entry of a grant's or an action's `budgets:` list (docs/budgets.md): at most
// Limit of Metric within any rolling Window.
type Budget struct {
	// Metric is BudgetCount (one per call) or the name of an integer argument, whose values
	// are summed.
	Metric string
	Limit  int64         // ≥ 0
	Window time.Duration // > 0
	// Per is set on an action's own budget and says whose calls share it: BudgetPerAgent,
	// BudgetPerUser or BudgetPerPrincipal. It is "" on a grant's budget, which the grant's
	// holders share.
	Per string
	Pos Position // of the budget's mapping
}

// Metric and per values of a Budget.
const (
	BudgetCount        = "count"
	BudgetPerAgent     = "agent"
	BudgetPerUser      = "user"
	BudgetPerPrincipal = "principal"
)

// Envelope is one entry of authority.break_glass (docs/authority.md): the widest grant a
// break-glass opening may create, and for how long at most. An envelope decides no call on its
// own; `latch break-glass` opens a recorded, expiring, revocable delegation inside it.
type Envelope struct {
	Grant  // the envelope's shape; Delegable and ExpiresAt are never set
	MaxTTL time.Duration
	// Openers are the roles of the approvers section whose members may open the envelope; nil
	// when any person latch verified may.
	Openers []string
	// Doc is the envelope's shape as a grant document (the keys of a grant, without id,
	// max_ttl and openers), as [ParseGrant] reads it: what an opening that brings no grant of
	// its own starts from.
	Doc []byte

	idPos      Position
	openersPos []Position
}

// MaxBreakGlassTTL bounds an envelope's max_ttl: break-glass is for an emergency, and a
// standing need is a grant.
const MaxBreakGlassTTL = 24 * time.Hour

// envelopeKeys are the keys of an envelope, in the order messages list them: a grant's, less
// expires_at and delegable (an opening sets its own expiry and is never delegable), plus
// max_ttl and openers.
func envelopeKeys() []string {
	keys := []string{}
	for _, k := range grantKeys {
		if k != "expires_at" && k != "delegable" {
			keys = append(keys, k)
		}
	}
	return append(keys, "max_ttl", "openers")
}

// breakGlass parses authority.break_glass: a list of envelopes with distinct ids.
func (p *parser) breakGlass(e entry) ([]*Envelope, *Error) {
	if isNull(e.v) || e.v.Kind == yaml.SequenceNode && len(e.v.Content) == 0 {
		return nil, nil
	}
	if e.v.Kind != yaml.SequenceNode {
		return nil, p.errf(at(e), "break_glass is %s (expected a list of envelopes)", describeNode(e.v))
	}
	ids := map[string]*Envelope{}
	var out []*Envelope
	for i, n := range e.v.Content {
		env, err := p.envelope(i, n)
		if err != nil {
			return nil, err
		}
		if first := ids[env.ID]; first != nil {
			return nil, &Error{File: p.file, Line: env.idPos.Line, Column: env.idPos.Column,
				Msg: fmt.Sprintf("duplicate break-glass envelope id %s (first at line %d, column %d)", quote(env.ID), first.idPos.Line, first.idPos.Column)}
		}
		ids[env.ID] = env
		out = append(out, env)
	}
	return out, nil
}

// envelope parses one envelope: its id, max_ttl and openers here, and the rest — the grant
// shape — by the grant parser, so that an envelope reads every key a grant reads.
func (p *parser) envelope(i int, n *yaml.Node) (*Envelope, *Error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "break-glass envelope %d is %s (expected a mapping with id, subject, actions and max_ttl)", i, describeNode(n))
	}
	env := &Envelope{Grant: Grant{Pos: posOf(n)}}
	where := fmt.Sprintf("in break-glass envelope %d", i)
	var idNode *yaml.Node
	for _, en := range entries(n) {
		if en.k.Value != "id" {
			continue
		}
		id, err := p.str(en, "id "+where)
		if err != nil {
			return nil, err
		}
		if !validGrantID(id) {
			return nil, p.errf(en.v, "bad envelope id %s (expected a letter or digit, then letters, digits, ., _ or -)", quote(id))
		}
		env.ID, env.idPos, idNode = id, posOf(en.v), en.v
		where = "in break-glass envelope " + quote(id)
	}
	if idNode == nil {
		return nil, p.errf(n, "missing id %s (expected a unique id such as payments-incident)", where)
	}
	// The grant shape: every key but those of the envelope itself, in file order.
	shape := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	var hasTTL bool
	for _, en := range entries(n) {
		var err *Error
		switch en.k.Value {
		case "id":
		case "max_ttl":
			hasTTL = true
			env.MaxTTL, err = p.duration(en, "max_ttl "+where, MaxBreakGlassTTL)
		case "openers":
			env.Openers, err = p.patterns(en, "openers "+where, func(s string) error {
				if !validRoleName(s) {
					return fmt.Errorf("not a role name")
				}
				return nil
			})
			for _, o := range en.v.Content {
				env.openersPos = append(env.openersPos, posOf(o))
			}
		case "expires_at":
			err = p.errf(en.k, "expires_at %s (an envelope does not expire: each opening expires after its TTL, at most max_ttl)", where)
		case "delegable":
			err = p.errf(en.k, "delegable %s (a break-glass grant is never delegable: open another one instead)", where)
		default:
			if !slices.Contains(grantKeys, en.k.Value) {
				err = p.unknownKey(en.k, where, envelopeKeys())
			}
			shape.Content = append(shape.Content, en.k, en.v)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasTTL {
		return nil, p.errf(n, "missing max_ttl %s (expected the longest an opening may last, like 4h; at most %s)", where, fmtBound(MaxBreakGlassTTL))
	}
	if err := p.grantFields(shape, &env.Grant, where); err != nil {
		return nil, err
	}
	doc, merr := yaml.Marshal(shape)
	if merr == nil {
		_, merr = ParseGrant(env.ID, doc)
	}
	if merr != nil {
		// The shape was read above; failing to write it back is latch's fault, but an envelope
		// nobody can open is refused here rather than at the emergency.
		return nil, p.errf(n, "envelope %s cannot be written as a grant document: %v", quote(env.ID), merr)
	}
	env.Doc = doc
	return env, nil
}

// checkEnvelopes refuses an envelope whose id is also a grant's (an id names one thing: a
// delegation's parent, a receipt's grant_id), and an opener role the approvers section does not
// define.
func (p *parser) checkEnvelopes(pol *Policy) *Error {
	au := pol.Authority
	if au == nil {
		return nil
	}
	grants := map[string]*Grant{}
	for _, g := range au.Grants {
		grants[g.ID] = g
	}
	for _, env := range au.BreakGlass {
		if g := grants[env.ID]; g != nil {
			return &Error{File: p.file, Line: env.idPos.Line, Column: env.idPos.Column,
				Msg: fmt.Sprintf("break-glass envelope id %s is also the id of the grant at line %d (an id names one grant or one envelope)", quote(env.ID), g.Pos.Line)}
		}
		for i, role := range env.Openers {
			if pol.HasRole(role) {
				continue
			}
			pos := env.openersPos[i]
			return &Error{File: p.file, Line: pos.Line, Column: pos.Column,
				Msg: fmt.Sprintf("unknown role %s in openers of break-glass envelope %s (%s)", quote(role), quote(env.ID), pol.rolesExpected())}
		}
	}
	return nil
}

// Envelope returns the break-glass envelope with the given id, or nil.
func (a *Authority) Envelope(id string) *Envelope {
	if a == nil {
		return nil
	}
	for _, e := range a.BreakGlass {
		if e != nil && e.ID == id {
			return e
		}
	}
	return nil
}

func normalizeEnvelopes(envs []*Envelope) []any {
	out := make([]any, len(envs))
	for i, e := range envs {
		m := normalizeGrant(&e.Grant)
		delete(m, "delegable") // an envelope has neither
		delete(m, "expires_at")
		m["max_ttl"] = durationString(e.MaxTTL)
		m["openers"] = stringList(e.Openers)
		out[i] = m
	}
	return out
}

// Scopes is the policy's `scopes:` section (docs/scopes.md): where the resources each
// principal is assigned come from, when no scope provider is given in code.
type Scopes struct {
	// Static maps a principal ("agent" or "agent/user") to its resource patterns.
	Static map[string][]string
	// URL, when set, is asked for a principal's scope on each call.
	URL     string
	Timeout time.Duration // with URL: how long a call waits for the answer (default DefaultScopeTimeout)
	// Actions are the action-name patterns the section applies to; nil means every action.
	Actions []string
	Pos     Position // of the scopes key
}

// BreakGlassGrant writes the grant document a break-glass opening stores (docs/authority.md):
// doc — an envelope's Doc, or a narrower grant the opener brings, as [ParseGrant] reads it —
// with its subject replaced by subject when subject names anyone, and expires_at set to
// expires. doc may not carry an expires_at of its own: an opening's TTL sets it. It returns the
// document and the grant it parses to. file names doc in errors, each an *Error with a line.
// Whether the grant fits the envelope is not decided here but by package authority.
func BreakGlassGrant(file string, doc []byte, subject Subject, expires time.Time) ([]byte, *Grant, error) {
	if file == "" {
		file = "grant"
	}
	if _, err := ParseGrant(file, doc); err != nil {
		return nil, nil, err
	}
	p := &parser{file: file, grantDoc: true}
	root, e := p.decode(doc) // as ParseGrant just did: a mapping, checked
	if e != nil {
		return nil, nil, e
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, en := range entries(root) {
		switch en.k.Value {
		case "expires_at":
			return nil, nil, p.errf(en.k, "expires_at in the grant (a break-glass grant expires after the TTL it is opened for, at most the envelope's max_ttl: leave expires_at out)")
		case "subject":
			if subject != (Subject{}) {
				continue // written below
			}
		}
		out.Content = append(out.Content, en.k, en.v)
	}
	str := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
	}
	if subject != (Subject{}) {
		sn := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle}
		if subject.Agent != "" {
			sn.Content = append(sn.Content, str("agent"), str(subject.Agent))
		}
		if subject.User != "" {
			sn.Content = append(sn.Content, str("user"), str(subject.User))
		}
		out.Content = append([]*yaml.Node{str("subject"), sn}, out.Content...)
	}
	out.Content = append(out.Content, str("expires_at"), str(expires.UTC().Format(time.RFC3339Nano)))
	b, err := yaml.Marshal(out)
	if err != nil {
		return nil, nil, &Error{File: file, Line: 1, Msg: "write the break-glass grant: " + err.Error()}
	}
	g, err := ParseGrant(file, b)
	if err != nil {
		return nil, nil, err // a subject that is no pattern: reported as the stored grant reads it
	}
	return b, g, nil
}
