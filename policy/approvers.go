package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Keys of the approvers sections, in the order error messages list them.
var (
	approversKeys      = []string{"roles", "policy_change"}
	actionApproverKeys = []string{"roles", "required", "verified", "remind_after", "escalate_after", "escalate_to", "on_expiry", "standing"}
	escalateToKeys     = []string{"roles", "people"}
)

// Approvers is the policy's `approvers:` section: the roles people answer approval requests in
// (docs/approvals.md). A role's members are the names listed here and, at answer time, the
// local approver accounts of the store that were given the role.
type Approvers struct {
	Roles map[string]*Role
	// PolicyChange is who approves a change of the policy itself (the reserved action
	// PolicyChangeAction, docs/governance.md); nil means anyone but the proposer, one grant.
	PolicyChange *ApproverRule
	Pos          Position // of the approvers key
}

// Role is one role of the approvers section.
type Role struct {
	Name    string
	Members []string // NFKC-normalized and trimmed, in file order, no two naming the same person
	Pos     Position // of the role's name
}

// ApproverRule is an action's `approvers:` entry: who may answer its approval requests and how
// many must grant.
type ApproverRule struct {
	// Roles an approver must be a member of (any one of them); nil means anyone but the
	// requesting principal may answer.
	Roles []string
	// Required is how many distinct people must grant; one entitled deny denies. At least 1.
	Required int
	// Verified refuses answers from approvers whose identity latch did not verify (the CLI's
	// --as NAME): only answers authenticated by a login session, an approver token, a JWT or a
	// trusted proxy count.
	Verified bool
	// RemindAfter, when positive, is how long a request may wait unanswered before the sweeper
	// reminds its approvers, once (docs/approvals.md#reminders-and-escalation).
	RemindAfter time.Duration
	// EscalateAfter, when positive, is how long a request may wait unanswered before the
	// sweeper escalates it to EscalateTo, once; from then on the people EscalateTo names may
	// answer it too (EscalatedRule).
	EscalateAfter time.Duration
	// EscalateTo is who a request is escalated to; set exactly when EscalateAfter is.
	EscalateTo *EscalateTo
	// OnExpiry is what a request still pending at its expiry is written as: OnExpiryExpire
	// (the default, "": expired, and the call may ask again) or OnExpiryDeny (denied, by
	// store.ExpiryApprover) (docs/approvals.md#reminders-and-escalation).
	OnExpiry string
	// Standing is the `standing:` entry: how far an approver may widen one answer into a
	// standing approval (docs/approvals.md#standing-approvals); nil when standing approvals of
	// the action are not allowed.
	Standing *StandingRule
	Pos      Position // of the approvers key

	rolePos     []Position // of each entry of Roles
	requiredPos Position   // of required's value; zero when absent
	remindPos   Position   // of remind_after's value; zero when absent
	escalatePos Position   // of escalate_after's value; zero when absent

	// people are approvers named directly rather than by role: set only by EscalatedRule.
	people []string
}

// Values of an approver rule's `on_expiry:`.
const (
	OnExpiryExpire = "expire"
	OnExpiryDeny   = "deny"
)

// DeniesAtExpiry reports whether a request of this rule still pending at its expiry is written
// denied rather than expired.
func (r ApproverRule) DeniesAtExpiry() bool { return r.OnExpiry == OnExpiryDeny }

// EscalateTo is an approver rule's `escalate_to:`: the roles and the people a request is
// escalated to. At least one of them is set.
type EscalateTo struct {
	Roles  []string // roles of approvers.roles
	People []string // approver names, NFKC-normalized and trimmed, no two naming the same person
	Pos    Position // of the escalate_to key

	rolePos []Position
}

// EscalatedRule returns the rule that decides who may answer a request of this rule once it is
// escalated: the same rule, whose roles also include EscalateTo's roles and whose people
// include EscalateTo's people. Required, Verified and the self-approval rule are unchanged: an
// escalation adds who may answer, never how many must grant. A rule that names no roles lets
// anyone but the requester answer already, so it is returned unchanged. The result is a copy.
func (r ApproverRule) EscalatedRule() ApproverRule {
	out := r
	out.Roles = slices.Clone(r.Roles)
	out.people = slices.Clone(r.people)
	if r.EscalateTo == nil || len(r.Roles) == 0 {
		return out
	}
	for _, role := range r.EscalateTo.Roles {
		if !slices.Contains(out.Roles, role) {
			out.Roles = append(out.Roles, role)
		}
	}
	out.people = append(out.people, r.EscalateTo.People...)
	return out
}

// Escalated reports whether a request of this rule created at created is escalated at now:
// the rule escalates, and EscalateAfter has passed since created. It is decided from the clock
// alone, so every process and surface agrees on it whether or not a sweeper has yet sent the
// escalation notice.
func (r ApproverRule) Escalated(created, now time.Time) bool {
	return r.EscalateAfter > 0 && r.EscalateTo != nil && !now.Before(created.Add(r.EscalateAfter))
}

// RuleAt returns the rule that decides who may answer a request of this rule created at
// created, at now: EscalatedRule once it is Escalated, else the rule itself.
func (r ApproverRule) RuleAt(created, now time.Time) ApproverRule {
	if r.Escalated(created, now) {
		return r.EscalatedRule()
	}
	return r
}

// DefaultApprovers is the rule of an action that has no `approvers:` entry: anyone but the
// requesting principal, one grant, verified or not — what latch did before roles existed.
var DefaultApprovers = ApproverRule{Required: 1}

// ApproversFor returns the approver rule of the named action: its `approvers:` entry, or
// DefaultApprovers when it has none or is not listed. The result is a copy.
func (p *Policy) ApproversFor(action string) ApproverRule {
	if p != nil {
		a := p.Actions[action]
		if action == PolicyChangeAction && p.Approvers != nil && p.Approvers.PolicyChange != nil {
			a = &Action{Approvers: p.Approvers.PolicyChange}
		}
		if a != nil && a.Approvers != nil {
			r := *a.Approvers
			r.Roles = slices.Clone(r.Roles)
			if r.EscalateTo != nil {
				et := *r.EscalateTo
				et.Roles, et.People = slices.Clone(et.Roles), slices.Clone(et.People)
				r.EscalateTo = &et
			}
			if r.Standing != nil {
				st := *r.Standing
				r.Standing = &st
			}
			if r.Required < 1 {
				r.Required = 1
			}
			return r
		}
	}
	return DefaultApprovers
}

// RoleMembers returns the names the policy lists for role (nil when it defines no such role).
func (p *Policy) RoleMembers(role string) []string {
	if p == nil || p.Approvers == nil || p.Approvers.Roles[role] == nil {
		return nil
	}
	return slices.Clone(p.Approvers.Roles[role].Members)
}

// HasRole reports whether the policy defines role.
func (p *Policy) HasRole(role string) bool {
	return p != nil && p.Approvers != nil && p.Approvers.Roles[role] != nil
}

// Entitlement says whether one approver may answer an action's requests, and through which
// role.
type Entitlement struct {
	Entitled bool
	Role     string // the role that entitles, "" when the rule names no roles or none does
	Reason   string // "" when entitled; approver_not_entitled otherwise
}

// Entitled decides whether the approver named name may answer requests of action under rule:
// with no roles, anyone may (the self-approval check is the store's); otherwise name must be a
// member of one of the rule's roles — listed in the policy (compared as NameKey compares), or
// given the role elsewhere (extraRoles: the roles of the approver's local account). A role in
// extraRoles that the policy does not define, or that the rule does not name, counts for
// nothing. Entitled is pure.
func (p *Policy) Entitled(rule ApproverRule, name string, extraRoles []string) Entitlement {
	if len(rule.Roles) == 0 {
		return Entitlement{Entitled: true}
	}
	key := NameKey(name)
	if key == "" {
		return Entitlement{Reason: ReasonNotEntitled}
	}
	for _, m := range rule.people {
		if NameKey(m) == key {
			return Entitlement{Entitled: true}
		}
	}
	for _, r := range rule.Roles {
		if !p.HasRole(r) {
			continue
		}
		for _, m := range p.Approvers.Roles[r].Members {
			if NameKey(m) == key {
				return Entitlement{Entitled: true, Role: r}
			}
		}
		if slices.Contains(extraRoles, r) {
			return Entitlement{Entitled: true, Role: r}
		}
	}
	return Entitlement{Reason: ReasonNotEntitled}
}

// ReasonNotEntitled refuses an answer by someone the action's approver rule does not name.
const ReasonNotEntitled = "approver_not_entitled"

var nameFolder = cases.Fold()

// NameKey is the form under which two names of people (approvers, requesting agents and users)
// are compared: NFKC-normalized, Unicode case-folded, with white space, control and invisible
// format characters removed. `Carol`, ` carol `, `CAROL`, `ｃａｒｏｌ` and `ca\u200brol` all have the
// key "carol"; look-alikes from other scripts (a Cyrillic `с` for a Latin `c`) do not. An empty
// key names nobody.
func NameKey(s string) string {
	s = norm.NFKC.String(nameFolder.String(norm.NFKC.String(s)))
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) || unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

// validRoleName reports whether s is a role name: 1 to 64 letters, digits, '-', '_' and '.',
// starting with a letter.
func validRoleName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// memberName checks one name listed in a role and returns it as answers record it.
func memberName(s string) (string, string) {
	if !utf8.ValidString(s) {
		return "", "is not valid UTF-8"
	}
	n := strings.TrimSpace(norm.NFKC.String(s))
	if n == "" {
		return "", "is empty"
	}
	for _, r := range n {
		switch {
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return "", "contains a control character or a line break"
		case unicode.Is(unicode.Cf, r):
			return "", fmt.Sprintf("contains an invisible format character (%U)", r)
		}
	}
	return n, ""
}

func (p *parser) approvers(e entry) (*Approvers, *Error) {
	if e := p.mapping(e, "approvers", "a mapping with roles"); e != nil {
		return nil, e
	}
	ap := &Approvers{Roles: map[string]*Role{}, Pos: posOf(e.k)}
	for _, en := range entries(e.v) {
		if en.k.Value == "policy_change" {
			r, e := p.actionApprovers(en, "policy_change")
			if e != nil {
				return nil, e
			}
			ap.PolicyChange = r
			continue
		}
		if en.k.Value != "roles" {
			return nil, p.unknownKey(en.k, "in approvers", approversKeys)
		}
		if isNull(en.v) {
			continue
		}
		if e := p.mapping(en, "approvers.roles", "a mapping from role names to lists of approver names"); e != nil {
			return nil, e
		}
		for _, rn := range entries(en.v) {
			r, e := p.role(rn)
			if e != nil {
				return nil, e
			}
			ap.Roles[r.Name] = r
		}
	}
	return ap, nil
}

func (p *parser) role(e entry) (*Role, *Error) {
	name := e.k.Value
	if !validRoleName(name) {
		return nil, p.errf(e.k, "bad role name %s (expected 1 to 64 letters, digits, -, _ and ., starting with a letter, like payments-leads)", quote(name))
	}
	r := &Role{Name: name, Pos: posOf(e.k)}
	if isNull(e.v) {
		return r, nil // no names in the policy: members come from accounts only
	}
	if e.v.Kind != yaml.SequenceNode {
		return nil, p.errf(at(e), "role %s is %s (expected a list of approver names, like [alice, bob])", quote(name), describeNode(e.v))
	}
	seen := map[string]string{}
	for i, mn := range e.v.Content {
		if mn.Kind != yaml.ScalarNode || mn.Tag != tagStr {
			return nil, p.errf(mn, "member %d of role %s is %s (expected an approver name)", i, quote(name), describeNode(mn))
		}
		m, bad := memberName(mn.Value)
		if bad != "" {
			return nil, p.errf(mn, "member %s of role %s %s (expected a one-line approver name)", quote(mn.Value), quote(name), bad)
		}
		k := NameKey(m)
		if first, dup := seen[k]; dup {
			return nil, p.errf(mn, "member %s of role %s names the same person as %s (names are compared without case, spaces or invisible characters; list each person once)",
				quote(m), quote(name), quote(first))
		}
		seen[k] = m
		r.Members = append(r.Members, m)
	}
	return r, nil
}

// actionApprovers parses an action's approvers entry. Roles are checked against the approvers
// section once the whole document is read (checkApprovers): the section may come after actions.
func (p *parser) actionApprovers(e entry, where string) (*ApproverRule, *Error) {
	if e := p.mapping(e, "approvers "+where, "a mapping with roles, required and verified"); e != nil {
		return nil, e
	}
	r := &ApproverRule{Required: 1, Pos: posOf(e.k)}
	for _, en := range entries(e.v) {
		switch en.k.Value {
		case "roles":
			if en.v.Kind != yaml.SequenceNode || len(en.v.Content) == 0 {
				return nil, p.errf(at(en), "roles of approvers %s is %s (expected a non-empty list of role names from approvers.roles; leave roles out to let anyone but the requester answer)",
					where, describeNode(en.v))
			}
			for _, rn := range en.v.Content {
				s, e := p.str(entry{en.k, rn}, "role in approvers "+where)
				if e != nil {
					return nil, e
				}
				if slices.Contains(r.Roles, s) {
					return nil, p.errf(rn, "role %s is listed twice in approvers %s", quote(s), where)
				}
				r.Roles = append(r.Roles, s)
				r.rolePos = append(r.rolePos, posOf(rn))
			}
		case "required":
			n, e := p.int(en, "required in approvers "+where)
			if e != nil {
				return nil, e
			}
			if n < 1 {
				return nil, p.errf(en.v, "required in approvers %s is %d (expected at least 1: how many distinct people must grant)", where, n)
			}
			if n > 1000 {
				return nil, p.errf(en.v, "required in approvers %s is %d (expected at most 1000)", where, n)
			}
			r.Required = int(n)
			r.requiredPos = posOf(en.v)
		case "verified":
			v, e := p.bool(en, "verified in approvers "+where)
			if e != nil {
				return nil, e
			}
			r.Verified = v
		case "remind_after", "escalate_after", "escalate_to":
			if where == "policy_change" {
				return nil, p.errf(en.k, "%s is not available in approvers.policy_change (a policy change is reviewed, not chased; expected one of roles, required, verified)", en.k.Value)
			}
			if e := p.escalation(en, r, where); e != nil {
				return nil, e
			}
		case "on_expiry":
			if where == "policy_change" {
				return nil, p.errf(en.k, "on_expiry is not available in approvers.policy_change (a proposed policy change that nobody answers expires; expected one of roles, required, verified)")
			}
			v, e := p.str(en, "on_expiry in approvers "+where)
			if e != nil {
				return nil, e
			}
			if v != OnExpiryExpire && v != OnExpiryDeny {
				return nil, p.errf(en.v, "on_expiry in approvers %s is %s (expected expire, the default: written expired, or deny: written denied)", where, quote(v))
			}
			r.OnExpiry = v
		case "standing":
			st, e := p.standingRule(en, where)
			if e != nil {
				return nil, e
			}
			r.Standing = st
		default:
			return nil, p.unknownKey(en.k, "in approvers "+where, actionApproverKeys)
		}
	}
	if (r.EscalateAfter > 0) != (r.EscalateTo != nil) {
		if r.EscalateTo == nil {
			return nil, p.errf(e.k, "approvers %s has escalate_after but no escalate_to (expected escalate_to: {roles: [...]} or {people: [...]}: who the request is escalated to)", where)
		}
		return nil, p.errf(e.k, "approvers %s has escalate_to but no escalate_after (expected escalate_after: a duration like 1h: how long a request waits before it is escalated)", where)
	}
	return r, nil
}

// escalation parses remind_after, escalate_after and escalate_to of an action's approvers. How
// they order against each other and the action's approval_ttl is checked with the whole action
// (checkEscalation).
func (p *parser) escalation(en entry, r *ApproverRule, where string) *Error {
	var e *Error
	switch en.k.Value {
	case "remind_after":
		r.RemindAfter, e = p.duration(en, "remind_after in approvers "+where, MaxApprovalTTL)
		r.remindPos = posOf(en.v)
	case "escalate_after":
		r.EscalateAfter, e = p.duration(en, "escalate_after in approvers "+where, MaxApprovalTTL)
		r.escalatePos = posOf(en.v)
	case "escalate_to":
		r.EscalateTo, e = p.escalateTo(en, where)
	}
	return e
}

func (p *parser) escalateTo(e entry, where string) (*EscalateTo, *Error) {
	what := "escalate_to in approvers " + where
	if e := p.mapping(e, what, "a mapping with roles and/or people"); e != nil {
		return nil, e
	}
	t := &EscalateTo{Pos: posOf(e.k)}
	seen := map[string]string{}
	for _, en := range entries(e.v) {
		if en.k.Value != "roles" && en.k.Value != "people" {
			return nil, p.unknownKey(en.k, "in "+what, escalateToKeys)
		}
		if en.v.Kind != yaml.SequenceNode || len(en.v.Content) == 0 {
			return nil, p.errf(at(en), "%s of %s is %s (expected a non-empty list)", en.k.Value, what, describeNode(en.v))
		}
		for _, n := range en.v.Content {
			s, e := p.str(entry{en.k, n}, en.k.Value+" entry of "+what)
			if e != nil {
				return nil, e
			}
			if en.k.Value == "roles" {
				if slices.Contains(t.Roles, s) {
					return nil, p.errf(n, "role %s is listed twice in %s", quote(s), what)
				}
				t.Roles = append(t.Roles, s)
				t.rolePos = append(t.rolePos, posOf(n))
				continue
			}
			m, bad := memberName(s)
			if bad != "" {
				return nil, p.errf(n, "person %s in %s %s (expected a one-line approver name)", quote(s), what, bad)
			}
			k := NameKey(m)
			if first, dup := seen[k]; dup {
				return nil, p.errf(n, "person %s in %s names the same person as %s (list each person once)", quote(m), what, quote(first))
			}
			seen[k] = m
			t.People = append(t.People, m)
		}
	}
	if len(t.Roles) == 0 && len(t.People) == 0 {
		return nil, p.errf(e.k, "%s names nobody (expected roles: [...] and/or people: [...])", what)
	}
	return t, nil
}

// checkEscalation refuses reminders and escalations that could never happen in order before
// the request expires: remind_after must come before escalate_after, and both before the
// action's approval_ttl — which must therefore be stated, so that the order is checked here
// rather than found out when a request expires unreminded.
func (p *parser) checkEscalation(pol *Policy, a *Action, errAt func(Position, string, ...any) *Error) *Error {
	r := a.Approvers
	if r.RemindAfter == 0 && r.EscalateAfter == 0 {
		return nil
	}
	if r.EscalateTo != nil {
		for i, role := range r.EscalateTo.Roles {
			if !pol.HasRole(role) {
				return errAt(r.EscalateTo.rolePos[i], "unknown role %s in escalate_to of action %s (%s)", quote(role), quote(a.Name), pol.rolesExpected())
			}
		}
	}
	if r.RemindAfter > 0 && r.EscalateAfter > 0 && r.RemindAfter >= r.EscalateAfter {
		return errAt(r.remindPos, "remind_after %s is not shorter than escalate_after %s in approvers of action %s (expected the reminder before the escalation)",
			r.RemindAfter, r.EscalateAfter, quote(a.Name))
	}
	first, firstPos, firstName := r.RemindAfter, r.remindPos, "remind_after"
	if first == 0 {
		first, firstPos, firstName = r.EscalateAfter, r.escalatePos, "escalate_after"
	}
	if a.ApprovalTTL == 0 {
		return errAt(firstPos, "%s in approvers of action %s needs the action's approval_ttl (expected approval_ttl: a duration longer than %s, so that the request is still open when it comes)",
			firstName, quote(a.Name), first)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		pos  Position
	}{{"remind_after", r.RemindAfter, r.remindPos}, {"escalate_after", r.EscalateAfter, r.escalatePos}} {
		if d.v > 0 && d.v >= a.ApprovalTTL {
			return errAt(d.pos, "%s %s is not shorter than approval_ttl %s of action %s (expected it to come while the request is still open)",
				d.name, d.v, a.ApprovalTTL, quote(a.Name))
		}
	}
	return nil
}

// checkActionApprovers checks every action's approver rule against the approvers section, in
// file order, so that the first mistake in the file is the one reported.
func (p *parser) checkActionApprovers(pol *Policy) *Error {
	list := make([]*Action, 0, len(pol.Actions))
	for _, a := range pol.Actions {
		if a.Approvers != nil {
			list = append(list, a)
		}
	}
	slices.SortFunc(list, func(x, y *Action) int {
		if x.Pos.Line != y.Pos.Line {
			return x.Pos.Line - y.Pos.Line
		}
		return x.Pos.Column - y.Pos.Column
	})
	if pol.Approvers != nil && pol.Approvers.PolicyChange != nil {
		// Checked as the reserved action's rule, after the actions', which come first in a file
		// more often than not.
		list = append(list, &Action{Name: PolicyChangeAction, Approvers: pol.Approvers.PolicyChange, Pos: pol.Approvers.PolicyChange.Pos})
	}
	for _, a := range list {
		if e := p.checkApprovers(pol, a); e != nil {
			return e
		}
	}
	return nil
}

// checkApprovers refuses an action's approver rule that names a role the approvers section does
// not define, or that requires more distinct people than its roles list. A role's members are
// the names the policy lists and the accounts given the role; a role that lists names bounds
// required by them, so that what was reviewed can be satisfied; a role that lists none is
// filled by accounts only, and how many there will be is not known when the file is read
// (docs/approvals.md#who-may-approve).
func (p *parser) checkApprovers(pol *Policy, a *Action) *Error {
	r := a.Approvers
	if r == nil {
		return nil
	}
	errAt := func(pos Position, format string, args ...any) *Error {
		return &Error{File: p.file, Line: max(pos.Line, 1), Column: pos.Column, Msg: fmt.Sprintf(format, args...)}
	}
	for i, role := range r.Roles {
		if pol.HasRole(role) {
			continue
		}
		return errAt(r.rolePos[i], "unknown role %s in approvers of action %s (%s)", quote(role), quote(a.Name), pol.rolesExpected())
	}
	if e := p.checkEscalation(pol, a, errAt); e != nil {
		return e
	}
	if len(r.Roles) == 0 {
		return nil
	}
	people := map[string]bool{}
	for _, role := range r.Roles {
		members := pol.Approvers.Roles[role].Members
		if len(members) == 0 {
			return nil // filled by accounts: not bounded by the file
		}
		for _, m := range members {
			people[NameKey(m)] = true
		}
	}
	if r.Required > len(people) {
		at := r.requiredPos
		if at.Line == 0 {
			at = r.Pos
		}
		return errAt(at, "approvers of action %s require %d distinct %s but roles %s list %d (a request could never be granted; list more members or lower required)",
			quote(a.Name), r.Required, plural(r.Required, "approver", "approvers"), strings.Join(r.Roles, ", "), len(people))
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func normalizeApprovers(ap *Approvers) map[string]any {
	roles := make(map[string]any, len(ap.Roles))
	for name, r := range ap.Roles {
		roles[name] = stringList(r.Members)
	}
	n := map[string]any{"roles": roles}
	if ap.PolicyChange != nil {
		// Only when declared, so that a policy without it hashes as it always has: who may
		// approve a policy change is part of what an approval of the policy approves.
		n["policy_change"] = normalizeApproverRule(ap.PolicyChange)
	}
	return n
}

func normalizeApproverRule(r *ApproverRule) map[string]any {
	var roles any
	if len(r.Roles) > 0 {
		roles = stringList(r.Roles)
	}
	m := map[string]any{"roles": roles, "required": int64(max(r.Required, 1)), "verified": r.Verified}
	// Only when declared, so that a rule without them hashes as it always has.
	if r.RemindAfter > 0 {
		m["remind_after"] = durationString(r.RemindAfter)
	}
	if r.EscalateAfter > 0 {
		m["escalate_after"] = durationString(r.EscalateAfter)
	}
	if t := r.EscalateTo; t != nil {
		m["escalate_to"] = map[string]any{"roles": stringList(t.Roles), "people": stringList(t.People)}
	}
	// Only deny, which changes what the policy does: on_expiry: expire hashes as its absence.
	if r.DeniesAtExpiry() {
		m["on_expiry"] = OnExpiryDeny
	}
	return m
}

// rolesExpected says which roles the policy defines, for an error naming a role it does not.
func (pol *Policy) rolesExpected() string {
	var defined []string
	if pol.Approvers != nil {
		for n := range pol.Approvers.Roles {
			defined = append(defined, n)
		}
	}
	if len(defined) == 0 {
		return "the policy has no approvers section defining roles"
	}
	slices.Sort(defined)
	return "expected one of " + strings.Join(defined, ", ")
}

// StandingRule bounds the standing approvals an approver may grant from one request of an
// action: at most MaxUses calls, for at most MaxFor from the grant. Both are required.
type StandingRule struct {
	MaxUses int
	MaxFor  time.Duration
	Pos     Position // of the standing key
}

// maxStandingUses is the largest max_uses a policy may give: a standing approval is a bounded
// saving of re-asking, not a second allow rule.
const maxStandingUses = 10000

func (p *parser) standingRule(e entry, where string) (*StandingRule, *Error) {
	what := "standing in approvers " + where
	if e := p.mapping(e, what, "a mapping with max_uses and max_for"); e != nil {
		return nil, e
	}
	r := &StandingRule{Pos: posOf(e.k)}
	for _, en := range entries(e.v) {
		switch en.k.Value {
		case "max_uses":
			n, e := p.int(en, "max_uses of "+what)
			if e != nil {
				return nil, e
			}
			if n < 1 || n > maxStandingUses {
				return nil, p.errf(en.v, "max_uses of %s is %d (expected from 1 to %d)", what, n, maxStandingUses)
			}
			r.MaxUses = int(n)
		case "max_for":
			d, e := p.duration(en, "max_for of "+what, MaxApprovalTTL)
			if e != nil {
				return nil, e
			}
			r.MaxFor = d
		default:
			return nil, p.unknownKey(en.k, "in "+what, []string{"max_uses", "max_for"})
		}
	}
	switch {
	case r.MaxUses == 0:
		return nil, p.errf(e.k, "%s has no max_uses (expected how many calls one standing approval may admit at most)", what)
	case r.MaxFor == 0:
		return nil, p.errf(e.k, "%s has no max_for (expected how long one standing approval may last at most, like 1h)", what)
	}
	return r, nil
}
