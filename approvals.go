package latch

import (
	"context"
	"fmt"
	"time"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/store"
)

// requestApproval stores a pending approval request bound to the call's action hash.
func (g *Guard) requestApproval(ctx context.Context, pr *prepared, actionID string) (*store.Approval, error) {
	now := g.cfg.Now()
	ttl := g.cfg.ApprovalTTL
	if pr.action != nil && pr.action.ApprovalTTL > 0 {
		ttl = pr.action.ApprovalTTL
	}
	a := &store.Approval{
		ID: newID("apr_"), Status: store.Pending, ActionHash: pr.hash, Action: pr.doc, ActionName: pr.call.Action,
		Agent: pr.principal.Agent, User: pr.principal.User, PolicyHash: g.policy.Hash, CreatedAt: now, ExpiresAt: now.Add(ttl),
	}
	events := append(g.proposal(pr, actionID, now), store.NewEvent(store.EventApprovalRequested, now, actionID, pr.key, a.ID,
		map[string]any{"action_hash": pr.hash, "expires_at": a.ExpiresAt.UTC().Format(time.RFC3339Nano)}))
	for i := range events {
		events[i].ApprovalID = a.ID
	}
	if err := g.store.CreateApproval(ctx, a, events); err != nil {
		return nil, wrapOp("request approval for "+safetext.Quote(pr.call.Action), err)
	}
	g.emit(ctx, noReceipt, events)
	return a, nil
}

// waitApproval blocks until a is answered or expires, polling with backoff (docs/guarantees.md#approvals). It
// returns nil when a was granted; the spend itself is checked by the reservation.
func (g *Guard) waitApproval(ctx context.Context, a *store.Approval) error {
	delay := 20 * time.Millisecond
	for {
		cur, err := g.store.Approval(ctx, a.ID)
		if err != nil {
			return wrapOp("wait for approval "+a.ID, err)
		}
		switch {
		case cur.Status == store.Granted:
			return nil
		case cur.Status != store.Pending:
			return &ApprovalMismatchError{ApprovalID: a.ID, Reason: string(cur.Status)}
		case !g.cfg.Now().Before(cur.ExpiresAt):
			return &ApprovalMismatchError{ApprovalID: a.ID, Reason: "expired"}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("latch: wait for approval %s: %w", a.ID, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, time.Second)
	}
}

// Approve grants a pending approval request as approver. A principal may not approve its own
// request; an expired request is written expired and refused.
func (g *Guard) Approve(ctx context.Context, approvalID, approver string) (*store.Approval, error) {
	return g.answer(ctx, approvalID, approver, true)
}

// Deny denies a pending approval request as approver.
func (g *Guard) Deny(ctx context.Context, approvalID, approver string) (*store.Approval, error) {
	return g.answer(ctx, approvalID, approver, false)
}

func (g *Guard) answer(ctx context.Context, id, approver string, grant bool) (*store.Approval, error) {
	return AnswerApproval(ctx, g.store, &store.AnswerRequest{Now: g.cfg.Now(), ID: id, Grant: grant, Approver: approver})
}

// AnswerApproval answers an approval request on a store directly, for operator tools that have
// no policy at hand.
func AnswerApproval(ctx context.Context, st store.Store, req *store.AnswerRequest) (*store.Approval, error) {
	a, err := st.AnswerApproval(ctx, req)
	if err != nil {
		return a, wrapOp("", err) // the store's error names the request: "answer approval ID: …"
	}
	return a, nil
}

// Resolve settles an ambiguous effect as committed or failed, recording who said so (docs/guarantees.md#resolving-an-ambiguous-effect).
// Resolving anything but an ambiguous effect is refused and changes nothing.
func (g *Guard) Resolve(ctx context.Context, key string, to store.State, by string) (*store.Effect, error) {
	return ResolveEffect(ctx, g.store, &store.ResolveRequest{Now: g.cfg.Now(), Key: key, To: to, By: by})
}

// ResolveEffect resolves an ambiguous effect on a store directly.
func ResolveEffect(ctx context.Context, st store.Store, req *store.ResolveRequest) (*store.Effect, error) {
	e, err := st.Resolve(ctx, req)
	if err != nil {
		return nil, wrapOp("", err)
	}
	return e, nil
}
