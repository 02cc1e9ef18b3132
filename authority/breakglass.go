package authority

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/latchkit/latch/policy"
)

// ViaBreakGlass is the Via of a delegation opened in a break-glass envelope ([CheckBreakGlass]).
// Only such a delegation may have an envelope as its parent, and an envelope is the root of
// its chain for it alone.
const ViaBreakGlass = "break-glass"

// Dimensions of a refused break-glass opening, beside the grant's own.
const (
	DimOpener = "opener" // the person opening is not verified, or not one of the envelope's openers
	DimReason = "reason" // no reason, or one too long
	DimTTL    = "ttl"    // the TTL is not positive
)

// MaxReasonBytes bounds the reason of a break-glass opening: a sentence or a ticket, kept on
// the delegation, its event and its record.
const MaxReasonBytes = 1000

// Opener is the person opening a break-glass grant, as the surface that authenticated them
// knows them.
type Opener struct {
	Name string
	// Verified is set when latch itself authenticated the person: a console session, a
	// person's token or JWT, a trusted proxy, a local account's password. A name merely
	// asserted (latch approve --as NAME) is not, and opens nothing.
	Verified bool
	// Roles are the roles of the policy's approvers section the person is a member of (listed
	// there, or given by their local account).
	Roles []string
}

// BreakGlassRequest is one break-glass opening (docs/authority.md): Opener opens Grant in the
// envelope named Envelope, for TTL from Now, saying why in Reason.
type BreakGlassRequest struct {
	Envelope string
	// Grant is the grant to open: the envelope's shape or narrower, for one concrete agent,
	// with ExpiresAt set to Now + TTL.
	Grant  *policy.Grant
	TTL    time.Duration
	Reason string
	Opener Opener
	Now    time.Time
}

// CheckBreakGlass decides whether r may open its grant, as docs/authority.md describes. It
// returns nil, or an [*Error] whose Reason and Dimension say why not, checked in this order:
//
//   - authority_unreadable: some delegation in ds is unreadable (one unreadable row refuses
//     everything, as for [Evaluate]);
//   - no_authority on parent: the policy has no envelope r.Envelope;
//   - no_authority on opener: the opener was not verified, or the envelope names openers and
//     the person is a member of none of those roles;
//   - invalid_grant on reason: no reason, or one longer than [MaxReasonBytes] or not UTF-8;
//   - invalid_grant on ttl: a TTL that is not positive;
//   - authority_escalation on expires_at: a TTL longer than the envelope's max_ttl, or a grant
//     that does not expire, or expires later than Now + max_ttl;
//   - invalid_grant: the grant is not well formed;
//   - authority_escalation on delegable: the grant is delegable (a break-glass grant never is);
//   - authority_escalation on the first dimension on which the grant is not a provable subset
//     of the envelope: the subject (one concrete agent, matched by the envelope's agent pattern;
//     a user contained in its user pattern), then actions, resources, constraints and
//     environments as for a delegation;
//   - authority_expired on expires_at: the grant has already expired at Now.
//
// CheckBreakGlass is pure.
func CheckBreakGlass(a *policy.Authority, ds []Delegation, r BreakGlassRequest) error {
	for i := range ds {
		if f := checkRecord(&ds[i]); f.failed() {
			return &Error{ReasonUnreadable, DimRecord, "delegation " + idText(ds[i].ID) + ": " + f.msg + "; one unreadable delegation refuses everything"}
		}
	}
	env := a.Envelope(r.Envelope)
	if env == nil {
		return &Error{ReasonNoAuthority, DimParent, "no break-glass envelope " + strconv.Quote(r.Envelope)}
	}
	if f := mayOpen(env, r.Opener); f.failed() {
		return &Error{ReasonNoAuthority, f.dim, f.msg}
	}
	switch reason := strings.TrimSpace(r.Reason); {
	case reason == "":
		return &Error{ReasonInvalidGrant, DimReason, "no reason given (say why the emergency needs it: it is kept with the grant)"}
	case len(r.Reason) > MaxReasonBytes:
		return &Error{ReasonInvalidGrant, DimReason, "the reason is " + strconv.Itoa(len(r.Reason)) + " bytes (at most " + strconv.Itoa(MaxReasonBytes) + ")"}
	case !utf8.ValidString(r.Reason):
		return &Error{ReasonInvalidGrant, DimReason, "the reason is not UTF-8 text"}
	}
	switch {
	case r.TTL <= 0:
		return &Error{ReasonInvalidGrant, DimTTL, "the TTL is " + r.TTL.String() + " (expected a positive duration, at most the envelope's max_ttl " + env.MaxTTL.String() + ")"}
	case r.TTL > env.MaxTTL:
		return &Error{ReasonEscalation, DimExpiresAt, "the TTL " + r.TTL.String() + " is longer than envelope " + env.ID + "'s max_ttl " + env.MaxTTL.String()}
	}
	child := r.Grant
	if child == nil {
		return &Error{ReasonInvalidGrant, "", "no grant"}
	}
	if f := validGrant(child); f.failed() {
		return &Error{ReasonInvalidGrant, f.dim, f.msg}
	}
	if f := withinMaxTTL(env, child, r.Now); f.failed() {
		return &Error{ReasonEscalation, f.dim, f.msg}
	}
	if child.Delegable {
		return &Error{ReasonEscalation, DimDelegable, "a break-glass grant is never delegable (open another one instead)"}
	}
	if f := containedOpening(&env.Grant, child); f.failed() {
		return &Error{ReasonEscalation, f.dim, f.msg}
	}
	if expired(child.ExpiresAt, r.Now) {
		f := expiredRefusal("the break-glass grant", child.ExpiresAt, r.Now)
		return &Error{ReasonExpired, f.dim, f.msg}
	}
	return nil
}

// mayOpen checks the person: verified, and a member of one of the envelope's opener roles
// when it names any.
func mayOpen(env *policy.Envelope, o Opener) refusal {
	switch {
	case strings.TrimSpace(o.Name) == "":
		return refusal{DimOpener, "no person is named as the opener"}
	case !o.Verified:
		return refusal{DimOpener, strconv.Quote(o.Name) + " was not verified (break-glass is opened by a person latch authenticated: a console session, a person's token or JWT, or a local account's password)"}
	case len(env.Openers) == 0:
		return refusal{}
	}
	for _, role := range env.Openers {
		if slices.Contains(o.Roles, role) {
			return refusal{}
		}
	}
	return refusal{DimOpener, strconv.Quote(o.Name) + " is not a member of the envelope's openers " + list(env.Openers)}
}

// withinMaxTTL checks that g, opened at opened, expires, and no later than the envelope's
// max_ttl after it. Evaluation checks it again, against the time the grant was stored, so a
// max_ttl shortened in the policy cuts a grant opened under a longer one.
func withinMaxTTL(env *policy.Envelope, g *policy.Grant, opened time.Time) refusal {
	switch {
	case g.ExpiresAt.IsZero():
		return refusal{DimExpiresAt, "the break-glass grant has no expires_at (it must expire, at most max_ttl " + env.MaxTTL.String() + " after it is opened)"}
	case opened.IsZero():
		return refusal{DimExpiresAt, "no time of opening is known, so the grant cannot be shown to end within max_ttl " + env.MaxTTL.String()}
	case g.ExpiresAt.After(opened.Add(env.MaxTTL)):
		return refusal{DimExpiresAt, "the grant expires at " + timeText(g.ExpiresAt) + ", more than envelope " + env.ID + "'s max_ttl " + env.MaxTTL.String() + " after it was opened at " + timeText(opened)}
	}
	return refusal{}
}

// containedOpening checks a break-glass grant against its envelope. The subject is narrowed
// here, not replaced as in a delegation: the envelope's subject says whom an opening may be
// for (the person who opens it is checked apart, as an opener), so the grant names one concrete
// agent its agent pattern matches, and a user its user pattern contains. Every other dimension
// is a delegation's ([contained]).
func containedOpening(env, child *policy.Grant) refusal {
	s, cs := env.Subject, child.Subject
	switch {
	case cs.Agent == "":
		return refusal{DimSubject, "the grant names no agent (a break-glass grant is for one concrete agent)"}
	case !concrete(cs.Agent, ':'):
		return refusal{DimSubject, "agent " + strconv.Quote(cs.Agent) + " is a pattern (a break-glass grant is for one concrete agent)"}
	case s.Agent != "" && !Match(s.Agent, cs.Agent, ':'):
		return refusal{DimSubject, "agent " + strconv.Quote(cs.Agent) + " is not matched by the envelope's agent pattern " + strconv.Quote(s.Agent)}
	case s.User != "" && cs.User == "":
		return refusal{DimSubject, "the envelope is limited to user " + strconv.Quote(s.User) + " and the grant names no user, which would allow every user"}
	case s.User != "" && !Contains(s.User, cs.User, ':'):
		return refusal{DimSubject, "user " + strconv.Quote(cs.User) + " is not contained in the envelope's user pattern " + strconv.Quote(s.User)}
	}
	return contained(env, child)
}

// opening checks the link from a break-glass delegation d to its envelope, the root of its
// chain: the envelope still exists, still contains d, and d still ends within its max_ttl of
// when it was opened. An envelope is never delegable: only an opening is beneath it.
func (c *chain) opening(a *policy.Authority, d *Delegation) {
	env := a.Envelope(d.Parent)
	if env == nil {
		c.fail(ReasonRevoked, DimParent, "break-glass envelope "+d.Parent+" of delegation "+d.ID+" no longer exists")
		return
	}
	c.root, c.envelope = &env.Grant, env.ID
	if f := containedOpening(&env.Grant, &d.Grant); f.failed() {
		c.fail(ReasonEscalation, f.dim, "break-glass delegation "+d.ID+" is not within envelope "+env.ID+": "+f.msg)
	}
	if d.Grant.Delegable {
		c.fail(ReasonEscalation, DimDelegable, "break-glass delegation "+d.ID+" is delegable, which a break-glass grant never is")
	}
	if f := withinMaxTTL(env, &d.Grant, d.CreatedAt); f.failed() {
		c.fail(ReasonEscalation, f.dim, "break-glass delegation "+d.ID+": "+f.msg)
	}
}
