package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// Budgets (docs/budgets.md) are charged when a call reserves its effect key, against the
// deciding grant's budgets, every grant above it, and the action's own budgets per principal.
// G22 exhausts one of them as the policy writes it; every other scenario runs with the limits
// lifted out of reach (liftBudgets), so that a budget smaller than a scenario's calls does not
// refuse the calls another guarantee needs — the charges are still made and checked.

// G22's N/A reason, bound and fault.
const (
	naNoBudgets = "no grant and no action declares a budget"
	// maxBudgetCalls bounds the calls G22 makes to exhaust a budget.
	maxBudgetCalls = 64
	// faultBudgetUnchecked drops the charges of every reservation, as a store that never read
	// them would: nothing is ever refused on a budget. G22 fails.
	faultBudgetUnchecked = "budget_unchecked"
)

// liftedLimit is the limit of every budget in the scenarios but G22's.
const liftedLimit = maxSafe

// liftBudgets returns p with the limit of every budget, a grant's or an action's own, lifted to
// liftedLimit; p itself when it declares none.
func liftBudgets(p *policy.Policy) *policy.Policy {
	if !hasBudgets(p) {
		return p
	}
	lift := func(bs []policy.Budget) []policy.Budget {
		if bs == nil {
			return nil
		}
		out := slices.Clone(bs)
		for i := range out {
			out[i].Limit = liftedLimit
		}
		return out
	}
	c := *p
	c.Actions = make(map[string]*policy.Action, len(p.Actions))
	for name, a := range p.Actions {
		if a.Budgets != nil {
			aa := *a
			aa.Budgets = lift(a.Budgets)
			a = &aa
		}
		c.Actions[name] = a
	}
	if p.Authority != nil {
		au := *p.Authority
		au.Grants = make([]*policy.Grant, len(p.Authority.Grants))
		for i, g := range p.Authority.Grants {
			if g != nil && g.Budgets != nil {
				gg := *g
				gg.Budgets = lift(g.Budgets)
				g = &gg
			}
			au.Grants[i] = g
		}
		c.Authority = &au
	}
	return &c
}

func hasBudgets(p *policy.Policy) bool {
	for _, a := range p.Actions {
		if len(a.Budgets) > 0 {
			return true
		}
	}
	if p.Authority != nil {
		for _, g := range p.Authority.Grants {
			if g != nil && len(g.Budgets) > 0 {
				return true
			}
		}
	}
	return false
}

// meteredArgs returns the arguments a budget on a call of action name meters: its own budgets'
// and those of every grant that covers it. A call must pass each as a non-negative integer, or
// it is refused budget_metric_missing or budget_metric_invalid.
func meteredArgs(p *policy.Policy, name string) map[string]bool {
	out := map[string]bool{}
	add := func(bs []policy.Budget) {
		for _, b := range bs {
			if b.Metric != policy.BudgetCount {
				out[b.Metric] = true
			}
		}
	}
	if a := p.Actions[name]; a != nil {
		add(a.Budgets)
	}
	if p.Authority != nil {
		for _, g := range p.Authority.Grants {
			if g != nil && coversAction(g, name) {
				add(g.Budgets)
			}
		}
	}
	return out
}

// isCount reports whether v is a non-negative integer: what a metered argument may be.
func isCount(v any) bool {
	n, ok := v.(int64)
	return ok && n >= 0
}

// budgetTarget is one budget of the policy, as written: a grant's, or an action's own.
type budgetTarget struct {
	grant  *policy.Grant // the grant whose budget it is; nil for an action's own
	action string        // the action whose own budget it is
	b      policy.Budget
}

func (t budgetTarget) String() string {
	what := fmt.Sprintf("%s ≤ %d per %s", t.b.Metric, t.b.Limit, policy.FormatISODuration(t.b.Window))
	if t.grant != nil {
		return fmt.Sprintf("grant %s's budget %s", t.grant.ID, what)
	}
	return fmt.Sprintf("action %s's own budget %s per %s", t.action, what, t.b.Per)
}

// budgetTargets lists the policy's budgets: the grants' in policy order, then the actions' own
// in name order.
func budgetTargets(p *policy.Policy) (grants, actions []budgetTarget) {
	if p.Authority != nil {
		for _, g := range p.Authority.Grants {
			if g == nil {
				continue
			}
			for _, b := range g.Budgets {
				grants = append(grants, budgetTarget{grant: g, b: b})
			}
		}
	}
	for _, name := range sortedActions(p) {
		for _, b := range p.Actions[name].Budgets {
			actions = append(actions, budgetTarget{action: name, b: b})
		}
	}
	return grants, actions
}

// charged is one budget a call of a budget plan is charged against, with what each call spends
// of it.
type charged struct {
	id     string // the budget's id, as a refusal names it
	b      policy.Budget
	amount int64
}

func (c charged) String() string {
	return fmt.Sprintf("%s %s ≤ %d per %s (%d a call)", c.id, c.b.Metric, c.b.Limit, policy.FormatISODuration(c.b.Window), c.amount)
}

// budgetPlan is how G22 exhausts a budget: k calls fit in it, the k-th made ambiguous by its
// executor, and variant k is the next call, which must not fit while the k-th holds its charge.
type budgetPlan struct {
	target  budgetTarget
	pk      *pick
	vs      []variant // k+1 calls with distinct effect keys and equal amounts
	k       int
	charges []charged // every budget the calls are charged against
	binding []string  // the ids of those that k calls fill: the next call must be refused by one
}

// g22: a budget is filled by k calls (k = ⌊limit / amount⌋, the amount as large as the rule and
// the grant's constraints permit), the k-th made ambiguous by its executor; the next call, from
// another OS process, must be refused budget_exhausted without executing, since an ambiguous
// effect holds its charge; once that effect is resolved failed, the same call, from another
// process again, must be admitted. Control: the k calls before it were admitted.
//
// A grant's budget and an action's own budget are each exercised when the policy has one: the
// first of each kind (grants in policy order, actions in name order) that a call the policy can
// run (allow, else approve) with an effect template is charged against and that k ≤ 64 calls
// fill.
func (r *runner) g22(ctx context.Context) (outcome, error) {
	grants, actions := budgetTargets(r.cfg.Policy)
	if len(grants)+len(actions) == 0 {
		return notApplicable(naNoBudgets), nil
	}
	var plans []*budgetPlan
	var skipped []string
	for _, kind := range [][]budgetTarget{grants, actions} {
		var whys []string
		found := false
		for _, t := range kind {
			p, why := r.planBudget(t)
			if p != nil {
				plans = append(plans, p)
				found = true
				break
			}
			whys = append(whys, t.String()+": "+why)
		}
		if !found {
			skipped = append(skipped, whys...)
		}
	}
	if len(plans) == 0 {
		return notApplicable("no budget can be exhausted by calls the policy can run: " + strings.Join(skipped, "; ")), nil
	}
	written, err := newScenarioPolicy(r.cfg.Policy, nil, true)
	if err != nil {
		return outcome{}, err
	}
	var details []string
	for i, p := range plans {
		o, err := r.heldBudget(ctx, written, p, fmt.Sprintf("g22-%d", i))
		if err != nil {
			return outcome{}, err
		}
		if o.status != Pass {
			return o, nil
		}
		details = append(details, o.detail)
	}
	if len(skipped) > 0 {
		details = append(details, "not exercised: "+strings.Join(skipped, "; "))
	}
	return pass(plans[0].pk.Action, strings.Join(details, "; then ")), nil
}

// planBudget finds how to exhaust t, or says why it cannot be.
func (r *runner) planBudget(t budgetTarget) (*budgetPlan, string) {
	if t.b.Limit == 0 {
		return nil, "its limit is 0: no call fits, so the control (calls that fit) cannot run"
	}
	pk := r.budgetPick(t)
	if pk == nil {
		if t.grant != nil {
			return nil, "no action with an effect template that the grant covers can run (allow or approve) with the grant deciding the call, to a principal it names, with arguments that satisfy both the rule and the grant's constraints"
		}
		return nil, "the action cannot run (allow or approve) to a principal a grant names, with arguments that satisfy its rule and the grant's constraints"
	}
	base, ok := r.maxAmount(pk, t)
	if !ok {
		return nil, fmt.Sprintf("no value of %s in 1…%d that %s lets decide %s", t.b.Metric, t.b.Limit, pk.Action, pk.Decision)
	}
	charges, ok := r.chargesOf(pk, base)
	if !ok {
		return nil, "the call's budgets could not be read from its grant"
	}
	k, binding := -1, []string(nil)
	for _, c := range charges {
		if c.amount == 0 {
			continue
		}
		n := int(min(c.b.Limit/c.amount, maxBudgetCalls+1))
		switch {
		case k < 0 || n < k:
			k, binding = n, []string{c.id}
		case n == k:
			binding = append(binding, c.id)
		}
	}
	switch {
	case k < 0:
		return nil, "every budget of the call is charged 0 by it"
	case k == 0:
		return nil, "a budget of the call has no room for one call (" + strings.Join(binding, ", ") + ")"
	case k > maxBudgetCalls:
		return nil, fmt.Sprintf("filling it takes more than %d calls of %s (at most %d a call that the rule and grant permit)", maxBudgetCalls, pk.Action, amountOf(t.b, base.Args))
	}
	return &budgetPlan{target: t, pk: pk, vs: r.budgetVariants(pk, base, k+1), k: k, charges: charges, binding: binding}, ""
}

// budgetPick picks a call charged against t: under t's grant, with that grant deciding the
// call, or of t's action; with an effect template, allow before approve.
func (r *runner) budgetPick(t budgetTarget) *pick {
	a := r.cfg.Policy.Authority
	for _, want := range []policy.Decision{policy.Allow, policy.Approve} {
		o := chooseOpts{needEffect: true, n: maxBudgetCalls + 1}
		if t.grant != nil {
			g := t.grant
			check := func(req authority.Request) bool {
				if !r.allowedThroughout(req) {
					return false
				}
				req.Environment, req.Now = r.env, r.start
				return authority.Evaluate(a, nil, req).GrantID == g.ID
			}
			o.fits = fitsFor(a, func(x *policy.Grant) bool { return x == g }, check)
			if pk, _ := choose(r.pol(), want, o); pk != nil {
				return pk
			}
			continue
		}
		o.accept = func(x *policy.Action) bool { return x.Name == t.action }
		if pk, _ := r.pickFor(want, o, ""); pk != nil {
			return pk
		}
	}
	return nil
}

// amountOf is what one call with args spends of b: 1 for count, else the metered argument
// (-1 when it is not a non-negative integer).
func amountOf(b policy.Budget, args map[string]any) int64 {
	if b.Metric == policy.BudgetCount {
		return 1
	}
	if n, ok := args[b.Metric].(int64); ok && n >= 0 {
		return n
	}
	return -1
}

// maxAmount returns pk's first variant with t's metered argument set to the largest value in
// 1…limit that the rule and the grant's constraints permit (for count, the variant as it is).
func (r *runner) maxAmount(pk *pick, t budgetTarget) (variant, bool) {
	base := pk.variants[0]
	m := t.b.Metric
	if m == policy.BudgetCount {
		return base, true
	}
	var conds policy.Conditions
	if pk.rule >= 0 {
		conds = append(conds, pk.act.Rules[pk.rule].When...)
	}
	if pk.fit != nil {
		conds = append(conds, pk.fit.grant.Constraints...)
	}
	var own policy.Conditions
	for _, c := range conds {
		if c.Arg == m {
			own = append(own, c)
		}
	}
	hints := actionHints(pk.act)
	if pk.fit != nil {
		addHints(hints, pk.fit.grant.Constraints)
	}
	amounts := []int64{t.b.Limit}
	for _, c := range candidatesKeeping(m, own, hints[m], false, 1, pk.act.Argument(m), isCount) {
		if n := c.(int64); n > 0 && n < t.b.Limit {
			amounts = append(amounts, n)
		}
	}
	slices.Sort(amounts)
	slices.Reverse(amounts)
	for _, n := range amounts {
		args := maps.Clone(base.Args)
		args[m] = n
		if v, ok := pk.finish(r.pol(), args, base.Resource, pk.Decision, pk.Reason); ok {
			return v, true
		}
	}
	return variant{}, false
}

// chargesOf lists the budgets a call v of pk is charged against, with what it spends of each:
// the deciding grant's (no delegations in a scratch store: the chain is that grant) and the
// action's own, per principal.
func (r *runner) chargesOf(pk *pick, v variant) ([]charged, bool) {
	var out []charged
	if a := r.cfg.Policy.Authority; a != nil && pk.fit != nil {
		req := pk.fit.request(pk.Action, v.Args, pk.resourceOf(v))
		req.Environment, req.Now = r.env, r.start
		d := authority.Evaluate(a, nil, req)
		if !d.Allowed {
			return nil, false
		}
		for _, l := range d.Chain {
			for _, b := range l.Budgets {
				out = append(out, charged{id: l.ID, b: b, amount: amountOf(b, v.Args)})
			}
		}
	}
	p := pk.principal()
	for _, b := range r.cfg.Policy.Actions[pk.Action].Budgets { // as written: pk.act's are lifted
		who := p.Agent
		switch b.Per {
		case policy.BudgetPerUser:
			who = p.User
		case policy.BudgetPerPrincipal:
			if p.User != "" {
				who = p.Agent + "/" + p.User
			}
		}
		out = append(out, charged{id: store.ActionBudget(pk.Action, b.Per, who), b: b, amount: amountOf(b, v.Args)})
	}
	for _, c := range out {
		if c.amount < 0 {
			return nil, false
		}
	}
	return out, true
}

// budgetVariants returns n calls with base's amounts and distinct effect keys: pk's own
// variants with base's metered arguments, where the policy still decides them so, then base
// with an explicit effect key (the base key and a suffix).
func (r *runner) budgetVariants(pk *pick, base variant, n int) []variant {
	metered := meteredArgs(r.pol(), pk.Action)
	out := []variant{base}
	seen := map[string]bool{base.Key: true}
	for _, v := range pk.variants[1:] {
		if len(out) == n {
			break
		}
		if v.Effect != "" {
			continue // pk's own explicit keys: base's are made below
		}
		args := maps.Clone(v.Args)
		for m := range metered {
			if x, ok := base.Args[m]; ok {
				args[m] = x
			}
		}
		w, ok := pk.finish(r.pol(), args, v.Resource, pk.Decision, pk.Reason)
		if ok && !seen[w.Key] {
			seen[w.Key] = true
			out = append(out, w)
		}
	}
	for i := len(out); len(out) < n; i++ {
		v := base
		v.Key = fmt.Sprintf("%s:verify-budget-%d", base.Key, i)
		v.Effect = escapeTemplate(v.Key)
		if !seen[v.Key] {
			seen[v.Key] = true
			out = append(out, v)
		}
	}
	return out
}

// heldBudget plays G22 for p in a scratch store of the policy as written.
func (r *runner) heldBudget(ctx context.Context, written *scenarioPolicy, p *budgetPlan, name string) (outcome, error) {
	pk, k := p.pk, p.k
	e, err := r.newEnv(ctx, name, written)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	// The next call's approval, when it needs one, is granted while the budget has room: a
	// request for it is refused too once the budget is full.
	next, err := e.withApproval(ctx, pk, p.vs[k])
	if err != nil {
		return controlFailed(pk.Action, fmt.Sprintf("approval for call %d: %v", k+1, err)), nil
	}

	// The calls that fit: k-1 commit, the k-th acts and then errors.
	var admitted []string
	ctlOK := true
	for i := range k - 1 {
		var c counter
		err := e.run(ctx, pk, p.vs[i], c.commit)
		if err != nil || c.count() != 1 {
			ctlOK = false
			admitted = append(admitted, fmt.Sprintf("call %d of %d (%s): %s, executions: %d", i+1, k, p.vs[i].Key, outcomeOf(err), c.count()))
			break
		}
	}
	switch {
	case !ctlOK || k == 1:
	case k == 2:
		admitted = append(admitted, "call 1 committed")
	default:
		admitted = append(admitted, fmt.Sprintf("calls 1–%d committed", k-1))
	}
	last := p.vs[k-1]
	var lc counter
	lerr := errors.New("not made")
	if ctlOK {
		lerr = e.run(ctx, pk, last, lc.actThenFail(errRemote))
	}
	lst, err := e.effectState(ctx, last.Key)
	if err != nil {
		return outcome{}, err
	}
	ctlOK = ctlOK && errors.Is(lerr, latch.ErrAmbiguous) && lc.count() == 1 && lst == store.Ambiguous
	admitted = append(admitted, fmt.Sprintf("call %d (%s): executor acted then errored: %s (record %s), executions: %d", k, last.Key, outcomeOf(lerr), lst, lc.count()))
	heldText := e.heldText(ctx, p)

	// The next call, from another process, while the k-th's charge is held.
	held := &raceResult{}
	if ctlOK {
		if held, err = r.race(ctx, e, pk, []variant{next}, filepath.Join(r.tmp, name+"-held")); err != nil {
			return outcome{}, err
		}
	}
	// Resolved failed, the charge is released: the same call again, from another process.
	_, rerr := e.g.Resolve(ctx, last.Key, store.Failed, "cli:"+verifyApprover)
	released := &raceResult{}
	if ctlOK && rerr == nil {
		// The refused call spent nothing: its approval, when it has one, is presented again.
		if released, err = r.race(ctx, e, pk, []variant{next}, filepath.Join(r.tmp, name+"-released")); err != nil {
			return outcome{}, err
		}
	}
	ledger := e.heldText(ctx, p)

	detail := fmt.Sprintf("%s as %s, charged against %s: k = %d; %s; %s; the next call (%s) from another process: %s; %s resolved failed: %s; %s; the same call from another process: %s",
		p.target, principalText(pk.principal()), chargedText(p.charges), k, strings.Join(admitted, "; "), heldText,
		p.vs[k].Key, held, last.Key, errText(rerr), ledger, released)
	refused := len(held.outcomes) == 1 && held.outcomes[0].Outcome == "refused" && held.outcomes[0].State == string(latch.ReasonBudgetExhausted)
	switch {
	case !ctlOK || rerr != nil:
		return controlFailed(pk.Action, detail), nil
	case held.total != 0:
		return fail(pk.Action, "the call past the held budget executed", detail), nil
	case !refused:
		return fail(pk.Action, "the call past the held budget was not refused budget_exhausted", detail), nil
	case !slices.Contains(p.binding, held.outcomes[0].Budget):
		return fail(pk.Action, "the refusal named budget "+held.outcomes[0].Budget+", not the one the calls filled", detail), nil
	case released.total != 1 || released.committed() != 1:
		return fail(pk.Action, "the budget was not released when the ambiguous effect was resolved failed", detail), nil
	}
	return pass(pk.Action, detail), nil
}

func chargedText(cs []charged) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	return strings.Join(parts, ", ")
}

// withApproval returns v carrying a granted approval for it when pk needs one (a G4 racer
// presents it).
func (e *env) withApproval(ctx context.Context, pk *pick, v variant) (variant, error) {
	if pk.Decision != policy.Approve {
		return v, nil
	}
	id, err := e.requestApproval(ctx, pk, v)
	if err != nil {
		return v, err
	}
	v.approval = id
	return v, nil
}

// heldText says how much of each binding budget the ledger holds, as latch budgets would.
func (e *env) heldText(ctx context.Context, p *budgetPlan) string {
	bs, ok := e.st.(store.BudgetStore)
	if !ok {
		return "the store keeps no ledger"
	}
	var parts []string
	for _, id := range p.binding {
		rows, err := bs.Charges(ctx, store.ChargeFilter{Budget: id})
		if err != nil {
			return "ledger: " + err.Error()
		}
		var held, released int64
		for _, c := range rows {
			if c.ReleasedAt.IsZero() {
				held += c.Amount
			} else {
				released += c.Amount
			}
		}
		parts = append(parts, fmt.Sprintf("ledger of %s: %d held, %d released", id, held, released))
	}
	return strings.Join(parts, ", ")
}
