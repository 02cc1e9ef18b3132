package latch

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"go.yaml.in/yaml/v3"
)

// WithHop returns a context presenting the hop hopID (Guard.Hop): the calls made with it are
// decided on the authority axis by that hop's chain alone (docs/agents.md).
func WithHop(ctx context.Context, hopID string) context.Context {
	return context.WithValue(ctx, hopKey, hopID)
}

// HopFrom returns the hop id ctx presents (WithHop), "" when none.
func HopFrom(ctx context.Context) string {
	h, _ := ctx.Value(hopKey).(string)
	return h
}

// callHop is the hop a call presents (HopOf).
func callHop(ctx context.Context, call *Call) (string, error) {
	if call == nil {
		return HopOf(ctx, nil)
	}
	return HopOf(ctx, call.Options)
}

// HopOf is the hop a call made with ctx and opts (nil allowed) presents: opts.Hop or ctx's
// (WithHop), which must be equal when both are set (else an *AuthorityError, authority_hop);
// "" when neither names one. A client of
// another process's guard (package client) sends it.
func HopOf(ctx context.Context, opts *Options) (string, error) {
	var opt string
	if opts != nil {
		opt = opts.Hop
	}
	fromCtx := HopFrom(ctx)
	switch {
	case opt == "":
		return fromCtx, nil
	case fromCtx != "" && fromCtx != opt:
		return "", &AuthorityError{Reason: authority.ReasonHop, Dimension: authority.DimHop,
			Detail: fmt.Sprintf("the call presents hop %q in its options and hop %q in its context", opt, fromCtx)}
	}
	return opt, nil
}

// Hop creates a hop (docs/agents.md): a delegation beneath parent (a policy grant id or a
// delegation id) that sender (by) hands to one receiving agent (to), with via "hop". grantDoc is
// the grant as YAML, with the keys of a delegation's grant; its subject may be left out (it is
// then to) and otherwise must be exactly to. The sender must be a subject of the parent, and
// the grant a provable subset of it on every dimension, as for Guard.Delegate: a refusal is an
// *AuthorityError naming the reason and the dimension (authority_escalation on the first
// dimension the hop would widen), recorded as a delegation_rejected event. A hop is never
// delegable, and is used only by a call that presents its id (Options.Hop, WithHop): such a call
// is decided by the hop's chain alone, and its receipt names the hop as authority.delegation_id.
// The hop's creation is recorded as a delegation_created event naming its id, with via "hop".
func (g *Guard) Hop(ctx context.Context, parent string, grantDoc []byte, to, by Principal) (*store.Delegation, error) {
	ds, err := g.delegationStore()
	if err != nil {
		return nil, err
	}
	if by.Agent == "" {
		return nil, &DeniedError{Action: "hop", Reason: "no_principal"}
	}
	if to.Agent == "" {
		return nil, &AuthorityError{Reason: authority.ReasonInvalidGrant, Dimension: authority.DimSubject, Detail: "a hop names no receiving agent"}
	}
	if !authority.Concrete(to.Agent) || (to.User != "" && !authority.Concrete(to.User)) {
		return nil, &AuthorityError{Reason: authority.ReasonInvalidGrant, Dimension: authority.DimSubject,
			Detail: fmt.Sprintf("the receiver %q is a pattern (a hop is addressed to one concrete agent)", principalName(to))}
	}
	doc, err := hopGrant(grantDoc, to)
	if err != nil {
		return nil, err
	}
	child, err := policy.ParseGrant("grant", doc)
	if err != nil {
		return nil, err
	}
	list, err := g.delegations(ctx)
	if err != nil {
		return nil, fmt.Errorf("latch: hop: %w", err)
	}
	now := g.cfg.Now()
	sender := principalName(by)
	check := authority.CheckDelegation(g.current().Authority, list, parent, child, authority.Request{Agent: by.Agent, User: by.User, Now: now})
	if check == nil && child.Delegable {
		check = &authority.Error{Reason: authority.ReasonEscalation, Dimension: authority.DimDelegable, Msg: "a hop is never delegable (hop again from the hop's parent instead)"}
	}
	if check != nil {
		var ae *authority.Error
		if !errors.As(check, &ae) {
			return nil, fmt.Errorf("latch: hop: %w", check)
		}
		evs := []store.Event{store.NewEvent(store.EventDelegationRejected, now, "", "", "", map[string]any{
			"parent": parent, "by": sender, "via": store.ViaHop, "to": principalName(to),
			"reason": ae.Reason, "dimension": ae.Dimension, "detail": ae.Error()})}
		if lerr := ds.LogEvents(ctx, evs); lerr != nil {
			g.log.Warn("latch: delegation_rejected event not written", "err", lerr)
		} else {
			g.emit(ctx, nil, evs)
		}
		return nil, &AuthorityError{Reason: ae.Reason, Dimension: ae.Dimension, Detail: ae.Error()}
	}
	d := &store.Delegation{ID: newID("dlg_"), Parent: parent, Grant: doc, CreatedBy: sender, CreatedAt: now, Via: store.ViaHop}
	evs := []store.Event{store.NewEvent(store.EventDelegationCreated, now, "", "", "", map[string]any{
		"delegation_id": d.ID, "hop": d.ID, "parent": parent, "by": sender, "via": store.ViaHop,
		"agent": to.Agent, "user": to.User})}
	if err := ds.CreateDelegation(ctx, d, evs); err != nil {
		return nil, wrapOp("", err)
	}
	g.emit(ctx, nil, evs) // as written, with its id
	return d, nil
}

// principalName is p as a delegation's creator is written: agent, or agent/user.
func principalName(p Principal) string {
	if p.User == "" {
		return p.Agent
	}
	return p.Agent + "/" + p.User
}

// hopGrant returns grantDoc addressed to: a grant without a subject gets to's; one with a
// subject must name exactly to, so what the sender wrote is what the receiver gets.
func hopGrant(grantDoc []byte, to Principal) ([]byte, error) {
	g, err := policy.ParseGrant("grant", grantDoc)
	if err == nil {
		if g.Subject.Agent != to.Agent || g.Subject.User != to.User {
			return nil, &AuthorityError{Reason: authority.ReasonInvalidGrant, Dimension: authority.DimSubject,
				Detail: fmt.Sprintf("the grant's subject %q is not the receiver %q (leave subject out: a hop's subject is its receiver)",
					principalName(Principal{Agent: g.Subject.Agent, User: g.Subject.User}), principalName(to))}
		}
		return grantDoc, nil
	}
	var root yaml.Node
	if yerr := yaml.Unmarshal(grantDoc, &root); yerr != nil || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, err // not a mapping: ParseGrant's own error says where
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "subject" {
			return nil, err // a subject that does not parse: ParseGrant says why
		}
	}
	str := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
	}
	sn := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle, Content: []*yaml.Node{str("agent"), str(to.Agent)}}
	if to.User != "" {
		sn.Content = append(sn.Content, str("user"), str(to.User))
	}
	m.Content = append([]*yaml.Node{str("subject"), sn}, m.Content...)
	m.Style = 0
	out, merr := yaml.Marshal(m)
	if merr != nil {
		return nil, fmt.Errorf("latch: hop: %w", merr)
	}
	return out, nil
}
