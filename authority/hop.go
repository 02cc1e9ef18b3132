package authority

import (
	"strconv"

	"github.com/latchkit/latch/policy"
)

// ViaHop is the Via of a hop: a delegation one agent (the sender, who holds the parent) creates
// for exactly one other agent (the receiver) to act under when it does work handed to it. A hop
// is considered only for a call that presents it ([Request].Hop), and such a call is decided by
// the hop's chain alone.
const ViaHop = "hop"

// ReasonHop refuses a call that presents a hop which does not exist (or is no hop), is not live
// (it or a delegation above it is revoked or expired, or its chain no longer holds), or is
// addressed to another subject than the caller.
const ReasonHop = "authority_hop"

// DimHop is the dimension of a [ReasonHop] refusal.
const DimHop = "hop"

// evaluateHop decides r against the hop r.Hop alone: no policy grant and no other delegation is
// considered, so a receiver holding wider grants of its own is held to what was handed to it.
// The records of ds have been checked.
func evaluateHop(a *policy.Authority, ds []Delegation, r Request) Decision {
	deny := func(msg string) Decision {
		return Decision{Reason: ReasonHop, Dimension: DimHop, DelegationID: r.Hop,
			Trace: []string{"hop " + strconv.Quote(r.Hop) + ": " + msg}}
	}
	var d *Delegation
	for i := range ds {
		if ds[i].ID == r.Hop {
			if d != nil {
				return deny("the id names more than one record")
			}
			d = &ds[i]
		}
	}
	switch {
	case d == nil:
		return deny("no such hop")
	case d.Via != ViaHop:
		return deny("delegation " + d.ID + " is not a hop")
	case !matchSubject(d.Grant.Subject, r.Agent, r.User):
		return deny("addressed to " + principalText(d.Grant.Subject.Agent, d.Grant.Subject.User) + ", not to the caller " + principalText(r.Agent, r.User))
	}
	c := walk(a, ds, d, r.Now)
	if c.reason != "" {
		return deny("not live: " + c.reason + " on " + c.dim + ": " + c.msg)
	}
	e := evaluation{progress: -1}
	if m := mismatch(&d.Grant, &r); m >= 0 {
		e.miss("hop ", d.ID, m)
		return Decision{Reason: ReasonNoAuthority, Dimension: matchDims[m], DelegationID: d.ID, Trace: e.trace()}
	}
	rootID := c.root.ID
	if f, reason := constraints(&d.Grant, r.Args); f.failed() {
		e.near("hop ", d.ID, reason, f, rootID, d.ID)
		e.best.Trace = e.trace()
		return e.best
	}
	e.line("hop ", d.ID, ": allowed beneath grant ", rootID)
	return e.allow(rootID, d.ID, links(a, ds, d, c.depth))
}

// Concrete reports whether s, an agent or user name, is a concrete name rather than a pattern
// (valid, with no wildcard): a hop is addressed to one concrete agent.
func Concrete(s string) bool { return concrete(s, ':') }
