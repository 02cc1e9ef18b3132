package latch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// grantCache holds parsed delegation grants by delegation id: delegations are insert-only, so a
// parsed grant never goes stale (revocations are read fresh on every call).
type grantCache struct {
	mu     sync.Mutex
	grants map[string]*policy.Grant
}

func (c *grantCache) parse(d *store.Delegation) (*policy.Grant, error) {
	c.mu.Lock()
	g, ok := c.grants[d.ID]
	c.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err := policy.ParseGrant(d.ID, d.Grant)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.grants == nil {
		c.grants = map[string]*policy.Grant{}
	}
	c.grants[d.ID] = g
	c.mu.Unlock()
	return g, nil
}

// delegations reads every stored delegation for the authority axis. A row whose grant cannot be
// read is kept with its error: one unreadable row denies everything.
func (g *Guard) delegations(ctx context.Context) ([]authority.Delegation, error) {
	if g.store == nil {
		return nil, nil // a store-less guard (latch eval) sees the policy's grants only
	}
	ds, ok := g.store.(store.DelegationStore)
	if !ok {
		return nil, fmt.Errorf("store %T keeps no delegations", g.store)
	}
	rows, err := ds.Delegations(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]authority.Delegation, len(rows))
	for i, r := range rows {
		out[i] = authority.Delegation{ID: r.ID, Parent: r.Parent, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, Revoked: !r.RevokedAt.IsZero(), Via: r.Via}
		if r.Via != "" && r.Via != store.ViaBreakGlass && r.Via != store.ViaHop {
			// A way of coming to be this binary does not know: never guessed at.
			out[i].Err = fmt.Errorf("via %q is not one this version of latch knows", r.Via)
			continue
		}
		gr, err := g.grants.parse(r)
		if err != nil {
			out[i].Err = err
			continue
		}
		out[i].Grant = *gr
		out[i].Grant.ID = ""
	}
	return out, nil
}

// authorize decides the authority axis of a normalized call (docs/authority.md). It fails closed: a
// store that cannot be read denies with authority_unreadable.
func (g *Guard) authorize(ctx context.Context, pr *prepared) authority.Decision {
	hop, err := callHop(ctx, pr.call)
	if err == nil && isHopToken(hop) {
		// A token is checked before the store is read: a forged, expired or misaddressed one
		// never reaches it (hoptoken.go).
		hop, err = g.hopFromToken(hop, pr.principal, g.cfg.Now())
	}
	if err != nil {
		return authority.Decision{Reason: authority.ReasonHop, Dimension: authority.DimHop, Trace: []string{err.(*AuthorityError).Detail}}
	}
	ds, err := g.delegations(ctx)
	if err != nil {
		return authority.Decision{Reason: authority.ReasonUnreadable, Dimension: authority.DimRecord,
			Trace: []string{"delegations unreadable: " + err.Error()}}
	}
	return authority.Evaluate(pr.pol.Authority, ds, authority.Request{
		Agent: pr.principal.Agent, User: pr.principal.User, Action: pr.call.Action, Resource: pr.resource,
		Environment: pr.env, Task: pr.task, Args: pr.args, Now: g.cfg.Now(), Hop: hop,
	})
}

// delegationStore returns the guard's store as a delegation store.
func (g *Guard) delegationStore() (store.DelegationStore, error) {
	if g.current().Authority == nil {
		return nil, errors.New("latch: the policy has no authority section: there is nothing to delegate")
	}
	ds, ok := g.store.(store.DelegationStore)
	if !ok {
		return nil, fmt.Errorf("latch: store %T keeps no delegations", g.store)
	}
	return ds, nil
}

// Delegate creates a delegation beneath parent (a policy grant id or a delegation id) on behalf
// of creator: grantDoc is the child grant as YAML (the same keys as a policy grant, no id). The
// child must be a provable subset of the parent on every dimension (docs/authority.md); a refusal is an
// *AuthorityError naming the dimension, recorded as a delegation_rejected event.
func (g *Guard) Delegate(ctx context.Context, parent string, grantDoc []byte, creator Principal) (*store.Delegation, error) {
	ds, err := g.delegationStore()
	if err != nil {
		return nil, err
	}
	if creator.Agent == "" {
		return nil, &DeniedError{Action: "delegate", Reason: "no_principal"}
	}
	child, err := policy.ParseGrant("grant", grantDoc)
	if err != nil {
		return nil, err
	}
	list, err := g.delegations(ctx)
	if err != nil {
		return nil, fmt.Errorf("latch: delegate: %w", err)
	}
	now := g.cfg.Now()
	by := creator.Agent
	if creator.User != "" {
		by += "/" + creator.User
	}
	id := newID("dlg_")
	if err := authority.CheckDelegation(g.current().Authority, list, parent, child, authority.Request{Agent: creator.Agent, User: creator.User, Now: now}); err != nil {
		var ae *authority.Error
		if !errors.As(err, &ae) {
			return nil, fmt.Errorf("latch: delegate: %w", err)
		}
		ev := store.NewEvent(store.EventDelegationRejected, now, "", "", "", map[string]any{
			"parent": parent, "by": by, "reason": ae.Reason, "dimension": ae.Dimension, "detail": ae.Error()})
		evs := []store.Event{ev}
		if lerr := ds.LogEvents(ctx, evs); lerr != nil {
			g.log.Warn("latch: delegation_rejected event not written", "err", lerr)
		} else {
			g.emit(ctx, nil, evs) // as written, with its id
		}
		return nil, &AuthorityError{Reason: ae.Reason, Dimension: ae.Dimension, Detail: ae.Error()}
	}
	d := &store.Delegation{ID: id, Parent: parent, Grant: grantDoc, CreatedBy: by, CreatedAt: now}
	evs := []store.Event{store.NewEvent(store.EventDelegationCreated, now, "", "", "", map[string]any{"delegation_id": id, "parent": parent, "by": by})}
	if err := ds.CreateDelegation(ctx, d, evs); err != nil {
		return nil, wrapOp("", err)
	}
	g.emit(ctx, nil, evs) // as written, with its id
	return d, nil
}

// Revoke revokes a delegation, cutting it and every delegation beneath it, with one write.
func (g *Guard) Revoke(ctx context.Context, id, by string) (*store.Delegation, error) {
	ds, err := g.delegationStore()
	if err != nil {
		return nil, err
	}
	now := g.cfg.Now()
	events := []store.Event{store.NewEvent(store.EventDelegationRevoked, now, "", "", "", map[string]any{"delegation_id": id, "by": by})}
	d, err := ds.RevokeDelegation(ctx, &store.RevokeRequest{Now: now, ID: id, By: by, Events: events})
	if err != nil {
		return nil, wrapOp("", err)
	}
	g.emit(ctx, nil, events)
	return d, nil
}
