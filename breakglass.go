package latch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// BreakGlassRequest opens a break-glass grant (Guard.BreakGlass): a recorded, expiring,
// revocable grant inside one of the policy's break-glass envelopes, for an emergency.
type BreakGlassRequest struct {
	// Envelope is the id of the envelope in the policy's authority.break_glass.
	Envelope string
	// Grant, optional, is a narrower grant to open (YAML with the keys of a grant, no id and no
	// expires_at). Without it the envelope's own shape is opened.
	Grant []byte
	// For, optional, is whom the grant is for: it replaces the subject of the envelope (or of
	// Grant). It must name one concrete agent, which the envelope's agent pattern matches.
	For Principal
	// TTL is how long the grant lasts, at most the envelope's max_ttl; 0 is max_ttl.
	TTL time.Duration
	// Reason is why: kept with the grant, its event, its record and every alert.
	Reason string
	// By is the person opening it and how latch authenticated them. Only a verified person
	// opens one (a console session, a person's token or JWT, a trusted proxy, a local
	// account's password): a name merely asserted is refused, and an agent never opens one.
	By store.Approver
}

// BreakGlass opens a break-glass grant (docs/authority.md#break-glass): a delegation whose
// parent is the envelope req.Envelope, with via break-glass, the opener (req.By) as its creator
// and req.Reason, expiring req.TTL from now. Calls it allows carry the envelope in their
// receipt (authority.break_glass) beside the delegation id; `latch revoke` (Guard.Revoke) ends
// it early. It is never delegable, and nothing is delegated beneath an envelope.
//
// A refusal is an *AuthorityError naming the reason and the dimension: no_authority on parent
// (no such envelope) or on opener (not verified, or not a member of the envelope's openers);
// invalid_grant on reason, ttl or a dimension of a malformed grant; authority_escalation on
// expires_at (a TTL beyond max_ttl), delegable, or the first dimension on which the grant is
// wider than the envelope. A refused verified person leaves a delegation_rejected event and
// nothing else; a refused unverified one leaves nothing. A Grant that does not parse is a
// *policy.Error and writes nothing. What the opening commits reaches the guard's sinks: a
// `latch serve --notify` alerts on it.
func (g *Guard) BreakGlass(ctx context.Context, req *BreakGlassRequest) (*store.Delegation, error) {
	ds, err := g.delegationStore()
	if err != nil {
		return nil, err
	}
	if req == nil {
		return nil, errors.New("latch: break-glass: no request")
	}
	now := g.cfg.Now()
	opener, verified := openerOf(req.By)
	env := g.current().Authority.Envelope(req.Envelope)
	ttl := req.TTL
	var child *policy.Grant
	var doc []byte
	if env != nil {
		if ttl == 0 {
			ttl = env.MaxTTL
		}
		base := req.Grant
		if len(base) == 0 {
			base = env.Doc
		}
		doc, child, err = policy.BreakGlassGrant("grant", base, policy.Subject{Agent: req.For.Agent, User: req.For.User}, now.Add(ttl))
		if err != nil {
			return nil, err // file:line: what is wrong; nothing written
		}
	}
	list, err := g.delegations(ctx)
	if err != nil {
		return nil, fmt.Errorf("latch: break-glass: %w", err)
	}
	roles, err := g.personRoles(ctx, opener)
	if err != nil {
		return nil, fmt.Errorf("latch: break-glass: %w", err)
	}
	check := authority.BreakGlassRequest{Envelope: req.Envelope, Grant: child, TTL: ttl, Reason: req.Reason, Now: now,
		Opener: authority.Opener{Name: opener, Verified: verified, Roles: roles}}
	by := req.By.String()
	if err := authority.CheckBreakGlass(g.current().Authority, list, check); err != nil {
		var ae *authority.Error
		if !errors.As(err, &ae) {
			return nil, fmt.Errorf("latch: break-glass: %w", err)
		}
		if verified {
			// A person latch knows was refused: worth a line in the log. Anyone else leaves no
			// trace, so the log cannot be filled by whoever can reach the endpoint.
			evs := []store.Event{store.NewEvent(store.EventDelegationRejected, now, "", "", "", map[string]any{
				"parent": req.Envelope, "by": by, "via": store.ViaBreakGlass, "reason": ae.Reason,
				"dimension": ae.Dimension, "detail": ae.Error()})}
			if lerr := ds.LogEvents(ctx, evs); lerr != nil {
				g.log.Warn("latch: delegation_rejected event not written", "err", lerr)
			} else {
				g.emit(ctx, nil, evs)
			}
		}
		return nil, &AuthorityError{Reason: ae.Reason, Dimension: ae.Dimension, Detail: ae.Error()}
	}
	reason := strings.TrimSpace(req.Reason)
	d := &store.Delegation{ID: newID("dlg_"), Parent: env.ID, Grant: doc, CreatedBy: by, CreatedAt: now,
		Via: store.ViaBreakGlass, Reason: reason}
	evs := []store.Event{store.NewEvent(store.EventDelegationCreated, now, "", "", "", map[string]any{
		"delegation_id": d.ID, "parent": env.ID, "by": by, "via": store.ViaBreakGlass, "reason": reason,
		"agent": child.Subject.Agent, "user": child.Subject.User, "expires_at": child.ExpiresAt.UTC().Format(time.RFC3339Nano)})}
	if err := ds.CreateDelegation(ctx, d, evs); err != nil {
		return nil, wrapOp("", err)
	}
	g.emit(ctx, nil, evs) // as written, with its id
	return d, nil
}

// openerOf is the person of by, normalized as approvers are, and whether latch verified them:
// a name given on the command line (store.MethodCLI) never is.
func openerOf(by store.Approver) (name string, verified bool) {
	name, err := store.NormalizeApprover(by.Name)
	if err != nil {
		return strings.TrimSpace(by.Name), false
	}
	return name, by.Verified && by.Method != "" && by.Method != store.MethodCLI
}

// personRoles returns the roles of the policy's approvers section the person named name is a
// member of: listed there, or given by their local approver account (Config.ApproverRoles, else
// the store's accounts). A role the policy does not define counts for nothing.
func (g *Guard) personRoles(ctx context.Context, name string) ([]string, error) {
	var out []string
	if ap := g.current().Approvers; ap != nil && name != "" {
		key := policy.NameKey(name)
		for rn, r := range ap.Roles {
			for _, m := range r.Members {
				if policy.NameKey(m) == key {
					out = append(out, rn)
					break
				}
			}
		}
	}
	rl := g.cfg.ApproverRoles
	if rl == nil {
		rl, _ = g.store.(store.RoleLookup)
	}
	if rl != nil && name != "" {
		extra, err := rl.ApproverRoles(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("roles of %s: %w", name, err)
		}
		for _, r := range extra {
			if g.current().HasRole(r) {
				out = append(out, r)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
