package authority

import (
	"strconv"

	"github.com/latchkit/latch/policy"
)

// CheckDelegation decides whether creator may create child beneath parent (a policy grant id
// or a delegation id), as docs/authority.md describes. It returns nil, or an [*Error] whose Reason and Dimension say
// why not:
//
//   - authority_unreadable: some delegation in ds is unreadable or malformed (as for
//     [Evaluate], one unreadable row refuses everything);
//   - invalid_grant: child is not a well-formed grant;
//   - no_authority on parent: no policy grant or delegation has that id;
//   - authority_revoked, authority_expired, authority_escalation: the parent is not valid at
//     creator.Now (revoked, expired, or itself no longer contained in its own parent);
//   - authority_escalation on delegable: the parent may not be delegated;
//   - no_authority on subject: creator.Agent and creator.User are not matched by the parent's
//     subject;
//   - authority_escalation on depth: the child would be deeper than max_delegation_depth;
//   - authority_escalation on the first dimension (subject, actions, resources,
//     constraints.<key>, environments, tasks, expires_at) on which child is not a provable subset of
//     the parent; leaving out a dimension the parent constrains is widening;
//   - authority_expired on expires_at: child has already expired at creator.Now.
//
// Only creator's Agent, User and Now are used. child.ID is ignored: the store assigns the
// delegation's id. A child that is itself delegable is checked the same way, and whatever is
// delegated beneath it later is checked against it. CheckDelegation is pure.
func CheckDelegation(a *policy.Authority, ds []Delegation, parent string, child *policy.Grant, creator Request) error {
	for i := range ds {
		if f := checkRecord(&ds[i]); f.failed() {
			return &Error{ReasonUnreadable, DimRecord, "delegation " + idText(ds[i].ID) + ": " + f.msg + "; one unreadable delegation refuses everything"}
		}
	}
	if child == nil {
		return &Error{ReasonInvalidGrant, "", "no grant"}
	}
	if f := validGrant(child); f.failed() {
		return &Error{ReasonInvalidGrant, f.dim, f.msg}
	}
	pg, pd, n := lookup(a, ds, parent)
	switch {
	case n == 0 && a.Envelope(parent) != nil:
		return &Error{ReasonNoAuthority, DimParent, strconv.Quote(parent) + " is a break-glass envelope: it is opened (latch break-glass), never delegated"}
	case n == 0:
		return &Error{ReasonNoAuthority, DimParent, "no grant or delegation " + strconv.Quote(parent)}
	case n > 1:
		return &Error{ReasonUnreadable, DimParent, "id " + strconv.Quote(parent) + " names " + strconv.Itoa(n) + " records"}
	}
	now := creator.Now
	grant, depth := pg, 1
	if pd != nil {
		c := walk(a, ds, pd, now)
		if c.reason != "" {
			return &Error{c.reason, c.dim, "parent " + parent + ": " + c.msg}
		}
		grant, depth = &pd.Grant, c.depth+1
	} else if expired(pg.ExpiresAt, now) {
		f := expiredRefusal("parent grant "+pg.ID, pg.ExpiresAt, now)
		return &Error{ReasonExpired, f.dim, f.msg}
	}
	if !grant.Delegable {
		return &Error{ReasonEscalation, DimDelegable, "parent " + parent + " is not delegable"}
	}
	if !matchSubject(grant.Subject, creator.Agent, creator.User) {
		return &Error{ReasonNoAuthority, DimSubject, "creator " + principalText(creator.Agent, creator.User) + " is not matched by the subject of parent " + parent + " (only a principal a grant is for may delegate it)"}
	}
	if limit := maxDepth(a); depth > limit {
		return &Error{ReasonEscalation, DimDepth, "the delegation would be " + strconv.Itoa(depth) + " deep (max_delegation_depth is " + strconv.Itoa(limit) + ")"}
	}
	if f := contained(grant, child); f.failed() {
		return &Error{ReasonEscalation, f.dim, f.msg}
	}
	if expired(child.ExpiresAt, now) {
		f := expiredRefusal("the delegation", child.ExpiresAt, now)
		return &Error{ReasonExpired, f.dim, f.msg}
	}
	return nil
}

func principalText(agent, user string) string {
	s := strconv.Quote(agent)
	if user != "" {
		s += " for user " + strconv.Quote(user)
	}
	return s
}
