package gateway

import (
	"context"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway's tools/list leaves out the tools the policy denies to the session's principal
// whatever the arguments, so an agent is not invited to call what will be refused
// (docs/gateway.md#what-an-agent-is-shown). Hiding is not enforcement: every call, of a listed
// tool or not, is decided as before. A tool is hidden when, for every call of it, the answer is
// certainly deny:
//
//   - the policy does not list its action (unknown_action);
//   - its action is decision: deny, or every rule of it denies;
//   - the policy has an authority section and no policy grant, and no stored delegation, hop or
//     break-glass grant that is not revoked, names both the principal and the action;
//   - the reserved hop tool, when no such grant naming the principal is delegable (there is
//     nothing it could hand on).
//
// Everything else is shown: a tool whose rules depend on the arguments, one that asks for
// approval, one whose grant depends on its resource or constraints. In observe mode nothing is
// hidden, since every call runs. Config.ListDenied lists every tool.

// listMiddleware filters the tools/list answers of the gateway's server.
func (g *Gateway) listMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "tools/list" || g.cfg.ListDenied {
			return res, err
		}
		lr, ok := res.(*mcp.ListToolsResult)
		lreq, ok2 := req.(*mcp.ListToolsRequest)
		if !ok || !ok2 {
			return res, err
		}
		p, known := g.principalOf(lreq.Extra)
		hidden := g.hiddenTools(ctx, p, known)
		if len(hidden) == 0 {
			return res, nil
		}
		out := *lr
		out.Tools = make([]*mcp.Tool, 0, len(lr.Tools))
		for _, t := range lr.Tools {
			if !hidden[t.Name] {
				out.Tools = append(out.Tools, t)
			}
		}
		return &out, nil
	}
}

// hiddenTools returns the names (as agents see them) of the tools denied to p whatever the
// arguments; known says whether the session has a principal at all (without one, only what the
// policy denies to everyone is hidden, and every call is refused unauthenticated anyway).
func (g *Gateway) hiddenTools(ctx context.Context, p latch.Principal, known bool) map[string]bool {
	pol := g.cfg.Guard.Policy()
	if pol.Mode == policy.ModeObserve {
		return nil
	}
	var grants []*policy.Grant
	checkAuthority := pol.Authority != nil && known
	if checkAuthority {
		var err error
		if grants, err = g.liveGrants(ctx, pol.Authority); err != nil {
			// Listing is not enforcement: a listing that cannot read the delegations shows the
			// tools the policy alone does not deny, and their calls are decided as always.
			g.cfg.Logger.Warn("latch gateway: tools/list: the delegations could not be read: tools are listed without the authority filter", "err", err)
			checkAuthority = false
		}
	}
	hidden := map[string]bool{}
	for _, t := range g.tools {
		a := pol.Actions[t.Action]
		switch {
		case a == nil || deniesAlways(a):
			hidden[t.Name] = true
		case checkAuthority && !mayBeGranted(grants, p, t.Action, g.cfg.Now()):
			hidden[t.Name] = true
		}
	}
	if checkAuthority && !hidden[g.hopToolName()] && !mayDelegate(grants, p, g.cfg.Now()) && !g.upstreamNamed(g.hopToolName()) {
		hidden[g.hopToolName()] = true // the reserved hop tool: p holds nothing it could hand on
	}
	return hidden
}

// mayDelegate reports whether some unexpired delegable grant names p: only then can p create a
// hop (with the reserved hop tool) beneath it.
func mayDelegate(grants []*policy.Grant, p latch.Principal, now time.Time) bool {
	for _, gr := range grants {
		if gr.Delegable && (gr.ExpiresAt.IsZero() || !now.After(gr.ExpiresAt)) && subjectMatches(gr.Subject, p) {
			return true
		}
	}
	return false
}

// upstreamNamed reports whether an upstream tool is listed under name.
func (g *Gateway) upstreamNamed(name string) bool {
	for _, t := range g.tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// deniesAlways reports whether the action denies every call: a bare deny, or rules that all
// deny (a call no rule matches is denied no_matching_rule).
func deniesAlways(a *policy.Action) bool {
	if len(a.Rules) == 0 {
		return a.Decision == policy.Deny
	}
	for _, r := range a.Rules {
		if r.Decision != policy.Deny {
			return false
		}
	}
	return true
}

// liveGrants returns the policy's grants and those of every stored delegation (hops and
// break-glass grants included) that is not revoked itself. A delegation cut by the revocation of
// an ancestor, or one unreadable, still counts: hiding errs towards showing.
func (g *Gateway) liveGrants(ctx context.Context, a *policy.Authority) ([]*policy.Grant, error) {
	grants := append([]*policy.Grant(nil), a.Grants...)
	ds, ok := g.cfg.Guard.Store().(store.DelegationStore)
	if !ok {
		return grants, nil
	}
	rows, err := ds.Delegations(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if !r.RevokedAt.IsZero() {
			continue
		}
		gr, err := policy.ParseGrant(r.ID, r.Grant)
		if err != nil {
			return nil, err
		}
		grants = append(grants, gr)
	}
	return grants, nil
}

// mayBeGranted reports whether some grant names p and action and has not expired: only then can
// a call of the action by p be allowed on the authority axis.
func mayBeGranted(grants []*policy.Grant, p latch.Principal, action string, now time.Time) bool {
	for _, gr := range grants {
		if !gr.ExpiresAt.IsZero() && now.After(gr.ExpiresAt) {
			continue
		}
		if !subjectMatches(gr.Subject, p) {
			continue
		}
		for _, pat := range gr.Actions {
			if authority.Match(pat, action, '.') {
				return true
			}
		}
	}
	return false
}

// subjectMatches is the authority axis's subject match: both sides that a grant constrains.
func subjectMatches(s policy.Subject, p latch.Principal) bool {
	if s.Agent == "" && s.User == "" {
		return false
	}
	return (s.Agent == "" || authority.Match(s.Agent, p.Agent, ':')) && (s.User == "" || authority.Match(s.User, p.User, ':'))
}
