package authority

// Reasons, stable snake_case codes carried by a [Decision] and an [*Error] across process
// boundaries (receipts, events, CLI JSON). The first six are the deny reasons (docs/authority.md), in
// precedence order: when several grants nearly match, the decision reports the first of these
// that any of them hit.
const (
	ReasonUnreadable  = "authority_unreadable" // a stored delegation could not be read: everything is denied
	ReasonEscalation  = "authority_escalation" // a delegation is (no longer) contained in its parent
	ReasonRevoked     = "authority_revoked"    // a delegation or one above it was revoked, or its parent is gone
	ReasonExpired     = "authority_expired"    // the grant, or one above it, is past its expires_at
	ReasonConstraint  = "authority_constraint" // a constraint of the grant does not hold for the arguments
	ReasonNoAuthority = "no_authority"         // no grant matches the subject, action, resource, environment and task

	// ReasonInvalidGrant is returned only by [CheckDelegation], for a child grant that is not a
	// well-formed grant (a pattern CheckPattern refuses, no actions, a malformed constraint).
	ReasonInvalidGrant = "invalid_grant"
)

// Dimensions name what failed, in a [Decision] and an [*Error]. A constraint is named
// "constraints.<key>" with the key as written, such as "constraints.amount_lte".
const (
	DimSubject      = "subject"
	DimActions      = "actions"
	DimResources    = "resources"
	DimConstraints  = "constraints" // prefix of "constraints.<key>"
	DimEnvironments = "environments"
	DimTasks        = "tasks"
	DimExpiresAt    = "expires_at"
	DimDelegable    = "delegable" // the parent does not allow delegation
	DimDepth        = "depth"     // the chain is deeper than max_delegation_depth
	DimParent       = "parent"    // the parent does not exist, or cannot be told apart from another
	DimRevoked      = "revoked"   // the delegation itself, or one above it, was revoked
	DimRecord       = "record"    // a stored delegation is unreadable or malformed
)

// Error is a refused delegation ([CheckDelegation]): Reason is one of the Reason constants,
// Dimension names what was refused.
type Error struct {
	Reason    string
	Dimension string
	Msg       string
}

// Error formats the error as "reason on dimension: message".
func (e *Error) Error() string {
	if e.Dimension == "" {
		return e.Reason + ": " + e.Msg
	}
	return e.Reason + " on " + e.Dimension + ": " + e.Msg
}

// Is reports whether target is an *Error with the same Reason and, when target's Dimension is
// set, the same Dimension; so errors.Is(err, &authority.Error{Reason: authority.ReasonEscalation})
// tests for any escalation.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason && (t.Dimension == "" || t.Dimension == e.Dimension)
}

// rank orders deny reasons by precedence, 0 the highest; unknown reasons rank lowest.
func rank(reason string) int {
	switch reason {
	case ReasonUnreadable:
		return 0
	case ReasonEscalation:
		return 1
	case ReasonRevoked:
		return 2
	case ReasonExpired:
		return 3
	case ReasonConstraint:
		return 4
	}
	return 5
}
