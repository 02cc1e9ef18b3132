package verify

import (
	"fmt"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
)

// With an authority section every call needs a grant (docs/authority.md), so the scenarios propose as a
// principal a grant names, with arguments that satisfy the grant's constraints as well as the
// rule's conditions. Grants are tried in the order the policy lists them; the first one under
// which an action can decide what a scenario needs, for every variant, is used. The principal is
// the grant's subject made concrete: each wildcard segment is filled with "verify" ("ops-*" →
// "ops-verify", "*" → "latch-verify" when the pattern matches that name), and a grant for a user
// only is proposed as the verify agent acting for that user.

// fillWord is what a wildcard segment is filled with when a pattern is made concrete.
const fillWord = "verify"

// delegateAgent is the agent G9's delegations are created for.
const delegateAgent = "latch-verify-delegate"

// grantFit is one grant a pick may be chosen under: the principal that proposes, the resource
// given explicitly ("" when the action's own template renders one the grant matches), the task
// the calls name ("" when the grant names none), and the check every variant must pass on the
// authority axis.
type grantFit struct {
	grant     *policy.Grant
	principal latch.Principal
	resource  string
	task      string
	check     func(authority.Request) bool
}

// allows reports whether the fit's check passes for one call.
func (f *grantFit) allows(action string, args map[string]any, resource string) bool {
	return f.check(f.request(action, args, resource))
}

// request is the authority request of one call under the fit.
func (f *grantFit) request(action string, args map[string]any, resource string) authority.Request {
	return authority.Request{
		Agent: f.principal.Agent, User: f.principal.User, Action: action, Resource: resource, Task: f.task, Args: args,
	}
}

// concrete returns a string pattern matches, with every wildcard segment filled with fill.
func concrete(pattern string, sep byte, fill string) string {
	segs := strings.Split(pattern, string(sep))
	for i, s := range segs {
		switch {
		case s == "**":
			segs[i] = fill
		case strings.HasSuffix(s, "*"):
			segs[i] = strings.TrimSuffix(s, "*") + fill
		}
	}
	return strings.Join(segs, string(sep))
}

// grantPrincipal is the principal the scenarios propose as under g.
func grantPrincipal(g *policy.Grant) latch.Principal {
	p := latch.Principal{Agent: verifyAgent}
	if g.Subject.Agent != "" && !authority.Match(g.Subject.Agent, verifyAgent, ':') {
		p.Agent = concrete(g.Subject.Agent, ':', fillWord)
	}
	if g.Subject.User != "" {
		p.User = concrete(g.Subject.User, ':', fillWord)
	}
	return p
}

// grantResource is the resource given explicitly under g, when it declares resources.
func grantResource(g *policy.Grant) string {
	if len(g.Resources) == 0 {
		return ""
	}
	return concrete(g.Resources[0], ':', fillWord)
}

// grantTask is the task the calls under g name: its first task pattern made concrete, "" when
// g names no tasks (a grant without tasks allows a call whatever its task, and one without).
func grantTask(g *policy.Grant) string {
	if len(g.Tasks) == 0 {
		return ""
	}
	return concrete(g.Tasks[0], ':', fillWord)
}

// coversAction reports whether some action pattern of g matches name.
func coversAction(g *policy.Grant, name string) bool {
	for _, ap := range g.Actions {
		if authority.Match(ap, name, '.') {
			return true
		}
	}
	return false
}

// fitsFor returns, for an action name, the fits to try under the grants keep selects (nil: all),
// each twice when the grant declares resources: first with the resource the action's template
// renders, then with the grant's own resource given explicitly. check completes a request with
// the environment and the clock and decides it.
func fitsFor(a *policy.Authority, keep func(*policy.Grant) bool, check func(authority.Request) bool) func(string) []*grantFit {
	return func(name string) []*grantFit {
		var out []*grantFit
		for _, g := range a.Grants {
			if g == nil || keep != nil && !keep(g) || !coversAction(g, name) {
				continue
			}
			p, task := grantPrincipal(g), grantTask(g)
			out = append(out, &grantFit{grant: g, principal: p, task: task, check: check})
			if r := grantResource(g); r != "" {
				out = append(out, &grantFit{grant: g, principal: p, resource: r, task: task, check: check})
			}
		}
		return out
	}
}

// authorityMargin is how long after the scenario clock's start a grant must stay valid for the
// scenarios to use it: the clock moves during a scenario (past a lease in L1, through an approval's
// lifetime), and a grant that expired midway would refuse a call for a reason the scenario does
// not test.
func authorityMargin(p *policy.Policy) time.Duration {
	lease, ttl := latch.DefaultLease, latch.DefaultApprovalTTL
	for _, a := range p.Actions {
		lease, ttl = max(lease, a.Lease), max(ttl, a.ApprovalTTL)
	}
	return 24*time.Hour + lease + ttl
}

// allowedThroughout is the check of the ordinary scenarios: the whole authority section (policy
// grants; the scratch store holds no delegations) allows the call at the start of the scenario
// clock and still at start+margin.
func (r *runner) allowedThroughout(req authority.Request) bool {
	a := r.cfg.Policy.Authority
	req.Environment = r.env
	for _, at := range []time.Time{r.start, r.start.Add(authorityMargin(r.cfg.Policy))} {
		req.Now = at
		if !authority.Evaluate(a, nil, req).Allowed {
			return false
		}
	}
	return true
}

// opts completes o for the runner's policy: with an authority section, picks are chosen
// under its grants.
func (r *runner) opts(o chooseOpts) chooseOpts {
	if a := r.cfg.Policy.Authority; a != nil && o.fits == nil {
		o.fits = fitsFor(a, nil, r.allowedThroughout)
	}
	return o
}

// pickFor is choose for the runner's policy, returning the N/A reason when there is no pick:
// naBase and the search's note, or, when the authority section is what leaves nothing to pick,
// a reason that says so rather than blaming the actions.
func (r *runner) pickFor(want policy.Decision, o chooseOpts, naBase string) (*pick, string) {
	pk, why := choose(r.pol(), want, r.opts(o))
	if pk != nil {
		return pk, ""
	}
	if r.cfg.Policy.Authority != nil {
		if free, _ := choose(r.pol(), want, o); free != nil {
			return nil, fmt.Sprintf("%s: %s can decide %s, but no grant allows it to a principal the grant names, with arguments that satisfy both the rule and the grant's constraints, from now until %s later",
				noGrant, free.Action, want, authorityMargin(r.cfg.Policy))
		}
	}
	return nil, naBase + why
}

// noGrant begins the N/A reasons the authority section causes.
const noGrant = "no grant allows what the scenario needs"

// unlisted is the unlisted call of G6 and G11: a name the policy does not list, with arguments,
// resource and principal.
type unlisted struct {
	name      string
	args      map[string]any
	resource  string
	task      string
	principal latch.Principal
	// covered says a grant allows the call, so that its refusal is the policy's: unknown_action.
	covered bool
}

func (u unlisted) call() *latch.Call {
	v := variant{Args: u.args, Resource: u.resource, Task: u.task}
	return v.call(u.name)
}

// unlistedCall returns an action name the policy does not list. With an authority section it is
// one a grant covers (under a wildcard: "billing.*" → "billing.verify-unlisted-0"), with
// arguments that satisfy the grant's constraints, so that the authority axis allows it and the
// refusal observed is the policy's own; covered is false when no grant can cover an unlisted
// name.
func (r *runner) unlistedCall() unlisted {
	p := r.pol()
	fallback := unlisted{name: unlistedName(p), args: map[string]any{"verify": "unlisted"}, principal: latch.Principal{Agent: verifyAgent}}
	a := r.cfg.Policy.Authority
	if a == nil {
		fallback.covered = true // nothing but the policy decides
		return fallback
	}
	for _, g := range a.Grants {
		if g == nil {
			continue
		}
		args, ok := constraintArgs(g.Constraints)
		if !ok {
			continue
		}
		pr := grantPrincipal(g)
		for _, ap := range g.Actions {
			for i := range 16 {
				name := concrete(ap, '.', fmt.Sprintf("verify-unlisted-%d", i))
				if _, listed := p.Actions[name]; listed {
					if name == ap {
						break // a literal: nothing else to try
					}
					continue
				}
				u := unlisted{name: name, args: args, resource: grantResource(g), task: grantTask(g), principal: pr, covered: true}
				if r.allowedThroughout(authority.Request{Agent: pr.Agent, User: pr.User, Action: name, Resource: u.resource, Task: u.task, Args: args}) {
					return u
				}
				break
			}
		}
	}
	return fallback
}

// constraintArgs returns arguments that satisfy conds (each argument searched on its own, then
// all checked together), or false when the bounded search finds none.
func constraintArgs(conds policy.Conditions) (map[string]any, bool) {
	args := map[string]any{}
	byArg := map[string]policy.Conditions{}
	for _, c := range conds {
		byArg[c.Arg] = append(byArg[c.Arg], c)
	}
	hints := map[string][]any{}
	addHints(hints, conds)
	for arg, own := range byArg {
		c := candidates(arg, own, hints[arg], false, 1, nil)
		if len(c) == 0 {
			return nil, false
		}
		args[arg] = c[0]
	}
	if len(args) == 0 {
		args["verify"] = "unlisted"
	}
	ok, _ := conds.Eval(args)
	return args, ok
}

// principalText renders a principal as agent or agent/user.
func principalText(p latch.Principal) string {
	if p.User == "" {
		return p.Agent
	}
	return p.Agent + "/" + p.User
}
