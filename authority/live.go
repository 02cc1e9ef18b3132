package authority

import (
	"strconv"
	"time"

	"github.com/latchkit/latch/policy"
)

// Live reports whether the grant id — a policy grant of a, or a delegation of ds — can still
// decide a call at now, as [Evaluate] would check it before matching anything: a policy grant
// has not expired; a delegation's record reads, and its whole chain up to a policy grant is
// present, unrevoked, unexpired, delegable at every link, still contained in its parent and
// within a.MaxDelegationDepth. It returns nil, or an [*Error] whose Reason and Dimension say why
// not (no_authority on parent when no record has the id).
//
// Unlike Evaluate, an unreadable delegation elsewhere in ds does not make id dead: Live answers
// an operator's question about one grant (which budgets are in force), not a call's.
func Live(a *policy.Authority, ds []Delegation, id string, now time.Time) error {
	pg, pd, n := lookup(a, ds, id)
	switch {
	case n == 0:
		return &Error{ReasonNoAuthority, DimParent, "no grant or delegation " + strconv.Quote(id)}
	case n > 1:
		return &Error{ReasonUnreadable, DimRecord, "id " + strconv.Quote(id) + " names " + strconv.Itoa(n) + " records"}
	case pd == nil:
		if expired(pg.ExpiresAt, now) {
			f := expiredRefusal("grant "+pg.ID, pg.ExpiresAt, now)
			return &Error{ReasonExpired, f.dim, f.msg}
		}
		return nil
	}
	if f := checkRecord(pd); f.failed() {
		return &Error{ReasonUnreadable, f.dim, "delegation " + idText(pd.ID) + ": " + f.msg}
	}
	if c := walk(a, ds, pd, now); c.reason != "" {
		return &Error{c.reason, c.dim, c.msg}
	}
	return nil
}
