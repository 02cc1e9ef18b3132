package latch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// Standing approvals (docs/approvals.md#standing-approvals): an approver granting a request may
// also grant a bounded standing approval from it — the same action by the same principal, on
// the same resource and environment, with arguments within stated bounds, at most a number of
// calls and until an expiry the policy caps. A call presents its id ("sta_…") where it presents
// an approval request's; each use is spent in the call's reservation transaction, as a single
// approval is. The action still requires approval: a standing approval only saves re-asking.

// ErrStandingUnsupported is returned by the standing approval methods of a guard whose store
// keeps no standing approvals.
var ErrStandingUnsupported = errors.New("the store keeps no standing approvals")

// checkStanding checks the standing terms of a grant r against the policy's approvers of the
// request's action and against the request itself, and gives the grant its standing id. A grant
// without terms passes unchanged. It writes nothing; refusals are *store.StandingError.
func (g *Guard) checkStanding(r *store.AnswerRequest, cur *store.Approval, pol *policy.Policy, rule policy.ApproverRule) error {
	if r.Standing == nil || !r.Grant {
		return nil
	}
	refuse := func(reason, format string, args ...any) error {
		return &store.StandingError{ID: r.ID, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	sr := rule.Standing
	if sr == nil {
		return refuse(store.ReasonStandingNotAllowed, "the policy's approvers of %s allow no standing approvals", safetext.Quote(cur.ActionName))
	}
	if a := pol.Actions[cur.ActionName]; a != nil && a.Precondition != nil || !cur.PreconditionAt.IsZero() {
		// An approval of such an action is bound to the state of its target the approver saw;
		// later calls would act on states nobody saw.
		return refuse(store.ReasonStandingNotAllowed, "approvals of %s are bound to its target's state (precondition)", safetext.Quote(cur.ActionName))
	}
	terms, err := store.CheckStandingTerms(*r.Standing, cur.Action)
	if err != nil {
		return refuse(store.ReasonInvalidStanding, "%s", err.Error())
	}
	switch {
	case terms.Uses > sr.MaxUses:
		return refuse(store.ReasonStandingTooWide, "uses is %d, the policy allows at most %d", terms.Uses, sr.MaxUses)
	case time.Duration(terms.For) > sr.MaxFor:
		return refuse(store.ReasonStandingTooWide, "for is %s, the policy allows at most %s", time.Duration(terms.For), sr.MaxFor)
	}
	r.Standing = &terms
	if r.StandingID == "" {
		r.StandingID = newID(store.StandingPrefix)
	}
	return nil
}

func (g *Guard) standingStore() (store.StandingStore, error) {
	ss, ok := g.store.(store.StandingStore)
	if !ok {
		return nil, ErrStandingUnsupported
	}
	return ss, nil
}

// Standing returns one standing approval; an error matching store.ErrNotFound when there is none.
func (g *Guard) Standing(ctx context.Context, id string) (*store.Standing, error) {
	ss, err := g.standingStore()
	if err != nil {
		return nil, wrapOp("standing approval", err)
	}
	s, err := ss.Standing(ctx, id)
	if err != nil {
		return nil, wrapOp("", err)
	}
	return s, nil
}

// Standings lists standing approvals, newest first; a zero f.Now is the guard's clock.
func (g *Guard) Standings(ctx context.Context, f store.StandingFilter) ([]*store.Standing, error) {
	ss, err := g.standingStore()
	if err != nil {
		return nil, wrapOp("standing approvals", err)
	}
	if f.Now.IsZero() {
		f.Now = g.cfg.Now()
	}
	list, err := ss.Standings(ctx, f)
	if err != nil {
		return nil, wrapOp("", err)
	}
	return list, nil
}

// RevokeStanding ends a standing approval before its expiry: calls presenting it afterwards are
// refused approval_revoked. Whoever may answer the action's requests may revoke it (the
// policy's approvers of the action, as Answer checks them); anyone else is refused
// approver_not_entitled. A zero req.Now is the guard's clock.
func (g *Guard) RevokeStanding(ctx context.Context, req *store.RevokeStandingRequest) (*store.Standing, error) {
	if req == nil {
		return nil, wrapOp("revoke standing approval", errors.New("no request"))
	}
	ss, err := g.standingStore()
	if err != nil {
		return nil, wrapOp("revoke standing approval", err)
	}
	r := *req
	if r.Now.IsZero() {
		r.Now = g.cfg.Now()
	}
	cur, err := ss.Standing(ctx, r.ID)
	if err != nil {
		return nil, wrapOp("revoke standing approval", err)
	}
	if name, err := store.NormalizeApprover(r.By); err == nil {
		ok, err := g.entitled(ctx, g.current().ApproversFor(cur.ActionName), name)
		if err != nil {
			return nil, wrapOp("revoke standing approval "+safetext.Quote(r.ID), err)
		}
		if !ok {
			return nil, wrapOp("", &store.StandingError{ID: r.ID, Reason: store.ReasonNotEntitled,
				Detail: safetext.Quote(name) + " may not answer requests of " + safetext.Quote(cur.ActionName)})
		}
	}
	s, err := ss.RevokeStanding(ctx, &r)
	if err != nil {
		return nil, wrapOp("", err)
	}
	g.emitWritten(ctx, store.EventFilter{ApprovalID: s.From}, 1, store.EventStandingRevoked)
	return s, nil
}

// standingFor returns the id of an active standing approval that admits the call pr, "" when
// none does: a call that needs approval and presents none is admitted by one, so that its
// principal is not asked again. Of several, the one expiring first is spent. The read is
// advisory: the reservation decides again under its lock, and a call whose standing approval
// was spent meanwhile is refused as presenting it would be (approval_exhausted); asked again,
// it finds none and goes before a person.
func (g *Guard) standingFor(ctx context.Context, pr *prepared) string {
	ss, ok := g.store.(store.StandingStore)
	if !ok {
		return ""
	}
	if fn, _, _ := g.preconditionFor(pr); fn != nil {
		return "" // its approvals are bound to the target's state: a person sees it
	}
	now := g.cfg.Now()
	list, err := ss.Standings(ctx, store.StandingFilter{State: store.StandingActive, Now: now})
	if err != nil {
		return "" // a person is asked, as without standing approvals
	}
	var best *store.Standing
	for _, s := range list {
		if s.ActionName != pr.call.Action || s.Agent != pr.principal.Agent || s.User != pr.principal.User {
			continue
		}
		req := &store.ReserveRequest{Now: now, Action: pr.call.Action, ApprovalID: s.ID, Document: pr.doc, ResourceRendered: resourceRendered(pr)}
		if reason, _, _ := store.CheckStandingUse(s, req); reason != "" {
			continue
		}
		if best == nil || s.ExpiresAt.Before(best.ExpiresAt) {
			best = s
		}
	}
	if best == nil {
		return ""
	}
	return best.ID
}

// resourceRendered reports whether the call's resource was rendered from its arguments by the
// action's template, rather than named by the call.
func resourceRendered(pr *prepared) bool {
	return pr.call.Resource == "" && pr.action != nil && pr.action.Resource != nil
}
