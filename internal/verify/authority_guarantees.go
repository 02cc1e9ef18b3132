package verify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// g8: under a grant with an expires_at, a call at exactly expires_at runs (the control) and the
// same call 1µs later is denied authority_expired without executing.
//
// The grant is the first of the policy with an expires_at under which an action that can run
// (allow, else approve) is allowed at expires_at, to a principal the grant names, and — by the
// whole authority section — to nobody 1µs later with another reason than authority_expired (a
// grant without expiry covering the same call would make the scenario unobservable). The clock
// is moved to the grant's expires_at whatever the wall clock says: a grant that has already
// expired is exercised as well.
func (r *runner) g8(ctx context.Context) (outcome, error) {
	a := r.cfg.Policy.Authority
	if a == nil {
		return notApplicable(naNoAuthority), nil
	}
	expiring := 0
	for _, g := range a.Grants {
		if g == nil || g.ExpiresAt.IsZero() {
			continue
		}
		expiring++
		if pk := r.expiryPick(g); pk != nil {
			return r.expiry(ctx, g, pk)
		}
	}
	if expiring == 0 {
		return notApplicable(naNoExpiry), nil
	}
	return notApplicable("no grant with an expires_at allows an action the policy can run (allow or approve) at its expires_at to a principal it names, with arguments that satisfy both the rule and the grant's constraints, such that 1µs later the call is refused authority_expired"), nil
}

// expiryPick picks, under g alone, an action that can run with two variants, allowed at g's
// expires_at and denied authority_expired 1µs later.
func (r *runner) expiryPick(g *policy.Grant) *pick {
	a := r.cfg.Policy.Authority
	at := g.ExpiresAt
	check := func(req authority.Request) bool {
		req.Environment = r.env
		req.Now = at
		if !authority.Evaluate(a, nil, req).Allowed {
			return false
		}
		req.Now = at.Add(time.Microsecond)
		d := authority.Evaluate(a, nil, req)
		return !d.Allowed && d.Reason == authority.ReasonExpired
	}
	o := chooseOpts{n: 2, fits: fitsFor(a, func(x *policy.Grant) bool { return x == g }, check)}
	for _, want := range []policy.Decision{policy.Allow, policy.Approve} {
		if pk, _ := choose(r.pol(), want, o); pk != nil {
			return pk
		}
	}
	return nil
}

// expiry plays G8 under g.
func (r *runner) expiry(ctx context.Context, g *policy.Grant, pk *pick) (outcome, error) {
	e, err := r.newEnv(ctx, "g8", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	at := g.ExpiresAt
	e.clock.set(at)
	var c counter
	_, cerr := e.runReceipt(ctx, pk, pk.variants[0], c.commit)

	e.clock.set(at.Add(time.Microsecond))
	var lc counter
	_, lerr := e.exec(ctx, pk, pk.variant(1), lc.commit)
	_, result, err := e.lastReceipt(ctx)
	if err != nil {
		return outcome{}, err
	}

	detail := fmt.Sprintf("grant %s, expires_at %s, as %s: %s at expires_at: %s, executions: %d; %s 1µs later: %s, executions: %d, receipt %s",
		g.ID, at.UTC().Format(time.RFC3339Nano), principalText(pk.principal()), pk.variants[0].describe(), outcomeOf(cerr), c.count(),
		pk.variant(1).describe(), outcomeOf(lerr), lc.count(), result)
	var ae *latch.AuthorityError
	switch {
	case cerr != nil || c.count() != 1:
		return controlFailed(pk.Action, detail), nil
	case lc.count() != 0:
		return fail(pk.Action, "the call 1µs after expires_at executed", detail), nil
	case !errors.As(lerr, &ae) || ae.Reason != authority.ReasonExpired:
		return fail(pk.Action, "the call 1µs after expires_at was not denied authority_expired", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// g9: beneath a delegable grant, for every dimension it constrains, a child that widens it and
// a child that leaves it out are refused authority_escalation naming that dimension, and store
// nothing; control: a narrowed child is created and a call through it runs.
//
// The grant is the first delegable one under which an action that can run is allowed to a
// principal the grant names (the creator); the narrowed child names one agent
// (latch-verify-delegate) and is narrower than the grant on every dimension (that one action,
// the resource of the call, the grant's constraints, environments, and an expiry a day from the
// clock, which is moved back when the grant expires within two days: G9 is about containment,
// G8 about expiry). Each probe is that child with one dimension changed. Actions cannot be left
// out (a grant without actions is not a grant), so they are probed by widening only.
func (r *runner) g9(ctx context.Context) (outcome, error) {
	g, pk, t0, why := r.delegablePick(1)
	if pk == nil {
		return notApplicable(why), nil
	}
	return r.escalation(ctx, g, pk, t0)
}

// delegablePick finds, as G9 and L6 need, the first delegable grant under which an action the
// policy can run (allow, else approve) is allowed to a principal it names, with the clock it
// is allowed at (moved back to two days before the grant's expiry when that is sooner), or
// says why there is none.
func (r *runner) delegablePick(n int) (*policy.Grant, *pick, time.Time, string) {
	a := r.cfg.Policy.Authority
	if a == nil {
		return nil, nil, time.Time{}, naNoAuthority
	}
	delegable := 0
	for _, g := range a.Grants {
		if g == nil || !g.Delegable {
			continue
		}
		delegable++
		if a.MaxDelegationDepth == 0 {
			return nil, nil, time.Time{}, "max_delegation_depth is 0: nothing can be delegated"
		}
		t0 := r.start
		if limit := g.ExpiresAt.Add(-48 * time.Hour); t0.After(limit) {
			t0 = limit
		}
		only := &policy.Authority{MaxDelegationDepth: a.MaxDelegationDepth, Grants: []*policy.Grant{g}}
		check := func(req authority.Request) bool {
			req.Environment, req.Now = r.env, t0
			return authority.Evaluate(only, nil, req).Allowed
		}
		o := chooseOpts{n: n, fits: fitsFor(a, func(x *policy.Grant) bool { return x == g }, check)}
		for _, want := range []policy.Decision{policy.Allow, policy.Approve} {
			if pk, _ := choose(r.pol(), want, o); pk != nil {
				return g, pk, t0, ""
			}
		}
	}
	if delegable == 0 {
		return nil, nil, time.Time{}, naNoDelegable
	}
	return nil, nil, time.Time{}, "no delegable grant allows an action the policy can run (allow or approve) to a principal it names, with arguments that satisfy both the rule and the grant's constraints: the control, a narrowed child that works, cannot be made"
}

// narrowed is the child G9 and L6 create beneath g for pk's call v: for one agent
// (latch-verify-delegate), that one action, the call's resource when g declares resources, the
// call's task when g names tasks, g's constraints and environments, and an expiry a day after
// t0.
func narrowed(g *policy.Grant, pk *pick, v variant, creator latch.Principal, t0 time.Time) policy.Grant {
	base := policy.Grant{
		Subject:      policy.Subject{Agent: delegateAgent},
		Actions:      []string{pk.Action},
		Constraints:  slices.Clone(g.Constraints),
		Environments: slices.Clone(g.Environments),
		ExpiresAt:    t0.Add(24 * time.Hour),
	}
	if g.Subject.Agent != "" && g.Subject.User != "" {
		base.Subject.User = creator.User // on whose behalf: the child must keep it
	}
	if g.Resources != nil {
		base.Resources = []string{pk.resourceOf(v)}
	}
	if g.Tasks != nil {
		base.Tasks = []string{v.Task} // the call's own task, a literal pattern
	}
	base.Budgets = slices.Clone(g.Budgets) // as tight as the parent's: no tighter is needed
	return base
}

// scenarioGrant is g as the scenario policy has it (its budgets lifted, liftBudgets): the parent
// of the children G9 and L6 create in a scratch store of that policy.
func (r *runner) scenarioGrant(g *policy.Grant) *policy.Grant {
	if a := r.pol().Authority; a != nil {
		for _, sg := range a.Grants {
			if sg != nil && sg.ID == g.ID {
				return sg
			}
		}
	}
	return g
}

// asDelegate is pk proposed as the delegate of a narrowed child.
func asDelegate(pk *pick, base policy.Grant) *pick {
	dpk := *pk
	if pk.fit != nil {
		fit := *pk.fit
		fit.principal = latch.Principal{Agent: delegateAgent, User: base.Subject.User}
		dpk.fit = &fit
	}
	return &dpk
}

// probe is one child grant G9 tries to create.
type probe struct {
	kind  string // "widened" or "omitting"
	dim   string // the dimension changed, as authority names it
	grant policy.Grant
}

// escalation plays G9 beneath g, with pk allowed under g at t0.
func (r *runner) escalation(ctx context.Context, g *policy.Grant, pk *pick, t0 time.Time) (outcome, error) {
	creator := pk.principal()
	v := pk.variants[0]
	sg := r.scenarioGrant(g)
	base := narrowed(sg, pk, v, creator, t0)
	probes, skipped := probesFor(sg, base)

	e, err := r.newEnv(ctx, "g9", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	e.clock.set(t0)

	var seen, bad []string
	for _, pb := range probes {
		before, err := e.delegationCount(ctx)
		if err != nil {
			return outcome{}, err
		}
		d, derr := r.delegate(ctx, e, g.ID, pb.grant, creator)
		after, err := e.delegationCount(ctx)
		if err != nil {
			return outcome{}, err
		}
		var ae *latch.AuthorityError
		got := "accepted"
		switch {
		case errors.As(derr, &ae):
			got = "refused " + ae.Reason + " on " + ae.Dimension
		case derr != nil:
			return outcome{}, fmt.Errorf("delegate the %s child on %s: %w", pb.kind, pb.dim, derr)
		}
		seen = append(seen, fmt.Sprintf("%s %s: %s", pb.kind, pb.dim, got))
		if d != nil || after != before || ae == nil || ae.Reason != authority.ReasonEscalation || ae.Dimension != pb.dim {
			bad = append(bad, fmt.Sprintf("the %s child on %s was %s", pb.kind, pb.dim, got))
		}
	}

	// The control: the narrowed child is created, and a call through it runs.
	d, cerr := r.delegate(ctx, e, g.ID, base, creator)
	ctl := "narrowed child: " + outcomeOf(cerr)
	ctlOK := false
	if cerr == nil {
		delegate := latch.Principal{Agent: delegateAgent, User: base.Subject.User}
		var c counter
		rc, err := e.runReceipt(ctx, asDelegate(pk, base), v, c.commit)
		via := "no receipt"
		if rc != nil && rc.Authority != nil {
			via = "via " + rc.Authority.DelegationID
		}
		ctl = fmt.Sprintf("narrowed child %s created; %s as %s through it: %s (%s), executions: %d",
			d.ID, v.describe(), principalText(delegate), outcomeOf(err), via, c.count())
		ctlOK = err == nil && c.count() == 1 && rc != nil && rc.Authority != nil && rc.Authority.DelegationID == d.ID
	}

	detail := fmt.Sprintf("beneath %s, created by %s: %s; control, %s", g.ID, principalText(creator), strings.Join(seen, "; "), ctl)
	if len(skipped) > 0 {
		detail += "; not probed: " + strings.Join(skipped, "; ")
	}
	switch {
	case !ctlOK:
		return controlFailed(pk.Action, detail), nil
	case len(bad) > 0:
		return fail(pk.Action, bad[0], detail), nil
	}
	return pass(pk.Action, detail), nil
}

// resourceOf is the resource a call of variant v carries ("" when none).
func (pk *pick) resourceOf(v variant) string {
	if v.Resource != "" {
		return v.Resource
	}
	if pk.act.Resource != nil {
		if res, err := pk.act.Resource.Render(v.Args, ""); err == nil {
			return res
		}
	}
	return ""
}

// probesFor returns, for every dimension parent constrains, base widened on it and base without
// it (where a grant may leave it out), and what could not be probed, with why.
func probesFor(parent *policy.Grant, base policy.Grant) ([]probe, []string) {
	var out []probe
	var skipped []string
	with := func(kind, dim string, change func(g *policy.Grant)) {
		g := base
		g.Actions = slices.Clone(base.Actions)
		g.Resources = slices.Clone(base.Resources)
		g.Constraints = slices.Clone(base.Constraints)
		g.Environments = slices.Clone(base.Environments)
		g.Tasks = slices.Clone(base.Tasks)
		g.Budgets = slices.Clone(base.Budgets)
		change(&g)
		out = append(out, probe{kind: kind, dim: dim, grant: g})
	}

	if parent.Subject.Agent != "" && parent.Subject.User != "" {
		if wide, ok := widerPattern([]string{parent.Subject.User}, ':', []string{"*", "verify-widened:**", "verify-widened"}); ok {
			with("widened", authority.DimSubject, func(g *policy.Grant) { g.Subject.User = wide })
		} else {
			skipped = append(skipped, "widened subject (no user pattern is wider than "+parent.Subject.User+")")
		}
		with("omitting", authority.DimSubject, func(g *policy.Grant) { g.Subject.User = "" })
	}
	if wide, ok := widerPattern(parent.Actions, '.', []string{"verify-widened.**", "verify-widened"}); ok {
		with("widened", authority.DimActions, func(g *policy.Grant) { g.Actions = append(g.Actions, wide) })
	} else {
		skipped = append(skipped, "widened actions (the parent's patterns contain every pattern tried)")
	}
	if parent.Resources != nil {
		if wide, ok := widerPattern(parent.Resources, ':', []string{"verify-widened:**", "verify-widened"}); ok {
			with("widened", authority.DimResources, func(g *policy.Grant) { g.Resources = append(g.Resources, wide) })
		} else {
			skipped = append(skipped, "widened resources (the parent's patterns contain every pattern tried)")
		}
		with("omitting", authority.DimResources, func(g *policy.Grant) { g.Resources = nil })
	}
	for i, c := range parent.Constraints {
		dim := authority.DimConstraints + "." + c.Key
		if wide, ok := widerOperand(c); ok {
			with("widened", dim, func(g *policy.Grant) { g.Constraints[i] = wide })
		} else {
			skipped = append(skipped, "widened "+dim+" (no operand is wider)")
		}
		with("omitting", dim, func(g *policy.Grant) { g.Constraints = slices.Delete(g.Constraints, i, i+1) })
	}
	if parent.Environments != nil {
		env := "verify-widened"
		for slices.Contains(parent.Environments, env) {
			env += "-x"
		}
		with("widened", authority.DimEnvironments, func(g *policy.Grant) { g.Environments = append(g.Environments, env) })
		with("omitting", authority.DimEnvironments, func(g *policy.Grant) { g.Environments = nil })
	}
	if parent.Tasks != nil {
		if wide, ok := widerPattern(parent.Tasks, ':', []string{"verify-widened:**", "verify-widened"}); ok {
			with("widened", authority.DimTasks, func(g *policy.Grant) { g.Tasks = append(g.Tasks, wide) })
		} else {
			skipped = append(skipped, "widened tasks (the parent's patterns contain every pattern tried)")
		}
		with("omitting", authority.DimTasks, func(g *policy.Grant) { g.Tasks = nil })
	}
	for i, b := range parent.Budgets {
		what := fmt.Sprintf("budget on %s", b.Metric)
		switch {
		case b.Limit < maxSafe:
			with("widened", authority.DimBudgets, func(g *policy.Grant) { g.Budgets[i].Limit = b.Limit + 1 })
		case b.Window > policy.MinBudgetWindow:
			// A shorter window is a higher rate.
			with("widened", authority.DimBudgets, func(g *policy.Grant) { g.Budgets[i].Window = max(b.Window-time.Hour, policy.MinBudgetWindow) })
		default:
			skipped = append(skipped, "widened "+authority.DimBudgets+" ("+what+": no higher limit or shorter window)")
		}
		with("omitting", authority.DimBudgets, func(g *policy.Grant) { g.Budgets = slices.Delete(g.Budgets, i, i+1) })
	}
	if !parent.ExpiresAt.IsZero() {
		with("widened", authority.DimExpiresAt, func(g *policy.Grant) { g.ExpiresAt = parent.ExpiresAt.Add(time.Hour) })
		with("omitting", authority.DimExpiresAt, func(g *policy.Grant) { g.ExpiresAt = time.Time{} })
	}
	return out, skipped
}

// widerPattern returns the first candidate that is a valid pattern contained in none of
// parents: a child listing it allows something the parent does not.
func widerPattern(parents []string, sep byte, candidates []string) (string, bool) {
	for _, c := range candidates {
		if policy.CheckPattern(c, sep) != nil {
			continue
		}
		contained := false
		for _, p := range parents {
			contained = contained || authority.Contains(p, c, sep)
		}
		if !contained {
			return c, true
		}
	}
	return "", false
}

// widerOperand returns c with an operand that is not at least as strict: a bound moved out, a
// list member added (in) or taken away (not_in), a prefix or suffix shortened, another value for
// eq and neq. false when there is none (prefix "").
func widerOperand(c policy.Condition) (policy.Condition, bool) {
	var tries []any
	switch v := c.Operand.(type) {
	case int64:
		switch c.Op {
		case policy.OpLte, policy.OpLt, policy.OpEq, policy.OpNeq:
			if v < maxSafe {
				tries = append(tries, v+1)
			}
		case policy.OpGte, policy.OpGt:
			if v > -maxSafe {
				tries = append(tries, v-1)
			}
		}
	case string:
		switch c.Op {
		case policy.OpPrefix:
			if v != "" {
				_, n := utf8.DecodeLastRuneInString(v)
				tries = append(tries, v[:len(v)-n])
			}
		case policy.OpSuffix:
			if v != "" {
				_, n := utf8.DecodeRuneInString(v)
				tries = append(tries, v[n:])
			}
		default:
			tries = append(tries, v+"-verify-widened")
		}
	case bool:
		tries = append(tries, !v)
	case []any:
		switch c.Op {
		case policy.OpIn:
			for _, fresh := range freshMembers(v) {
				tries = append(tries, append(slices.Clone(v), fresh))
			}
		case policy.OpNotIn:
			if len(v) > 1 {
				tries = append(tries, slices.Clone(v[1:]))
			}
			tries = append(tries, []any{})
			for _, fresh := range freshMembers(v) {
				tries = append(tries, []any{fresh})
			}
		}
	}
	if c.Op == policy.OpEq {
		tries = append(tries, "verify-widened")
	}
	for _, t := range tries {
		if w, err := policy.ParseCondition(c.Key, t); err == nil {
			return w, true
		}
	}
	return policy.Condition{}, false
}

// freshMembers returns values not in list, of the types its members have.
func freshMembers(list []any) []any {
	has := func(x any) bool {
		for _, m := range list {
			if sameValue(m, x) {
				return true
			}
		}
		return false
	}
	var out []any
	for _, x := range []any{"verify-widened", int64(maxSafe), true, false} {
		if !has(x) {
			out = append(out, x)
		}
	}
	return out
}

// delegate creates a delegation beneath parent as creator: through the guard (which checks that
// it is contained in its parent), or, with faultDelegationUnchecked, straight into the store.
func (r *runner) delegate(ctx context.Context, e *env, parent string, g policy.Grant, creator latch.Principal) (*store.Delegation, error) {
	doc, err := json.Marshal(encodeGrant(&g))
	if err != nil {
		return nil, fmt.Errorf("encode a child grant: %w", err)
	}
	if !r.faults[faultDelegationUnchecked] {
		return e.g.Delegate(ctx, parent, doc, creator)
	}
	ds, ok := e.st.(store.DelegationStore)
	if !ok {
		return nil, fmt.Errorf("store %T keeps no delegations", e.st)
	}
	d := &store.Delegation{ID: newDelegationID(), Parent: parent, Grant: doc, CreatedBy: principalText(creator), CreatedAt: e.clock.Now()}
	if err := ds.CreateDelegation(ctx, d, nil); err != nil {
		return nil, err
	}
	return d, nil
}

// delegationCount is how many delegations the scratch store holds.
func (e *env) delegationCount(ctx context.Context) (int, error) {
	ds, ok := e.st.(store.DelegationStore)
	if !ok {
		return 0, fmt.Errorf("store %T keeps no delegations", e.st)
	}
	all, err := ds.Delegations(ctx)
	if err != nil {
		return 0, fmt.Errorf("read delegations: %w", err)
	}
	return len(all), nil
}

func newDelegationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "dlg_" + hex.EncodeToString(b[:])
}

// l6: beneath the first delegable grant (as G9 finds it), a narrowed child is created for
// latch-verify-delegate and a call through it runs; the creator revokes it; a day before its
// expiry, a call through it must be refused authority_revoked without executing. Control: the
// child is created, the call through it runs (its receipt names the delegation), and the
// revocation is recorded.
func (r *runner) l6(ctx context.Context) (outcome, error) {
	g, pk, t0, why := r.delegablePick(2)
	if pk == nil {
		return notApplicable(why), nil
	}
	creator := pk.principal()
	v, after := pk.variants[0], pk.variant(1)
	if pk.resourceOf(after) != pk.resourceOf(v) {
		after = v // the child names v's resource: the later call must be within it
	}
	base := narrowed(r.scenarioGrant(g), pk, v, creator, t0)
	e, err := r.newEnv(ctx, "l6", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	e.clock.set(t0)

	d, derr := r.delegate(ctx, e, g.ID, base, creator)
	if derr != nil {
		return controlFailed(pk.Action, "the narrowed child: "+outcomeOf(derr)), nil
	}
	dpk := asDelegate(pk, base)
	var c counter
	rc, err1 := e.runReceipt(ctx, dpk, v, c.commit)
	via := ""
	if rc != nil && rc.Authority != nil {
		via = rc.Authority.DelegationID
	}
	revoked, rerr := e.g.Revoke(ctx, d.ID, principalText(creator))
	e.clock.setAfter(t0)
	var c2 counter
	_, err2 := e.runReceipt(ctx, dpk, after, c2.commit)
	refused := outcomeOf(err2)
	var ae *latch.AuthorityError
	isRevoked := errors.As(err2, &ae) && ae.Reason == authority.ReasonRevoked

	detail := fmt.Sprintf("beneath %s, created by %s: child %s for %s until %s; %s through it: %s (via %q), executions: %d; revoked by %s: %s; %s later, %s before its expiry, %s through it: %s, executions: %d",
		g.ID, principalText(creator), d.ID, delegateAgent, base.ExpiresAt.UTC().Format(time.RFC3339), v.describe(), outcomeOf(err1), via, c.count(),
		principalText(creator), errText(rerr), time.Millisecond, base.ExpiresAt.Sub(e.clock.Now()).Round(time.Minute), after.describe(), refused, c2.count())
	switch {
	case err1 != nil || c.count() != 1 || via != d.ID || rerr != nil || revoked == nil || revoked.RevokedAt.IsZero():
		return controlFailed(pk.Action, detail), nil
	case c2.count() != 0:
		return fail(pk.Action, "the call through the revoked delegation executed", detail), nil
	case !isRevoked:
		return fail(pk.Action, "the call through the revoked delegation was not refused authority_revoked", detail), nil
	}
	return pass(pk.Action, detail), nil
}
