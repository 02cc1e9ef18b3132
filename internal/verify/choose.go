package verify

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

// Bounds of the argument search.
const (
	maxCombos     = 4096 // policy evaluations per rule
	maxCandidates = 32   // values tried per argument
	maxSafe       = 1<<53 - 1
)

// resourceArg stands, among the synthesized arguments, for an explicit resource: needed when an
// effect template uses {resource} and the action has no resource template to render one.
const resourceArg = "\x00resource"

// pick is an action chosen for a scenario, with arguments that make the policy decide what the
// scenario needs.
type pick struct {
	Action   string
	act      *policy.Action
	Decision policy.Decision
	Reason   string // the evaluation reason that fires: rule[i] or decision
	rule     int    // the index of that rule, -1 for the bare decision
	variants []variant
	args     []string         // the synthesized argument names, in search order
	cands    map[string][]any // the candidate values of each
	// fit is the grant the pick was chosen under, when the policy has an authority section:
	// every variant is allowed on the authority axis too. nil without one.
	fit *grantFit
}

// principal is who proposes the pick's calls: the principal chosen for its grant, else the
// verify agent.
func (pk *pick) principal() latch.Principal {
	if pk.fit != nil {
		return pk.fit.principal
	}
	return latch.Principal{Agent: verifyAgent}
}

// variant is one call of a pick. Variants of an action with an effect template have distinct
// effect keys.
type variant struct {
	Args     map[string]any
	Resource string // an explicit resource ("" when the policy's template renders it)
	Effect   string // an effect template overriding the policy's ("" when none)
	Key      string // the effect key the call will use ("" when none)
	Task     string // the task the call names ("" when none): the pick's grant names tasks
	approval string // the approval a G4 racer presents ("" when none)
	// precondition is the call's precondition provider (Options.Precondition; nil when none):
	// G16's, which overrides any the policy's action declares.
	precondition latch.PreconditionFunc
	hop          string // the hop the call presents (Options.Hop; "" when none): G25's and G26's
}

// call builds the pipeline call of a variant.
func (v variant) call(action string) *latch.Call {
	raw, _ := json.Marshal(v.Args) // canon's value model always encodes
	c := &latch.Call{Action: action, Arguments: raw, Resource: v.Resource}
	if v.Effect != "" || v.Task != "" || v.precondition != nil || v.hop != "" {
		c.Options = &latch.Options{Effect: v.Effect, Task: v.Task, Precondition: v.precondition, Hop: v.hop}
	}
	return c
}

// describe renders a variant for a result's detail.
func (v variant) describe() string {
	raw, _ := json.Marshal(v.Args)
	s := string(raw)
	if v.Key != "" {
		s += " key " + v.Key
	}
	if v.Task != "" {
		s += " task " + v.Task
	}
	return s
}

// chooseOpts says what a scenario needs of its action.
type chooseOpts struct {
	needEffect bool                      // an effect template
	n          int                       // distinct variants wanted (distinct keys with an effect template)
	accept     func(*policy.Action) bool // further conditions on the action (nil: any)
	// fits, when set, lists the grants a pick may be chosen under, in order (see grantFits):
	// the first action and rule for which one of them allows every variant wins. nil: the
	// authority axis is not considered.
	fits func(action string) []*grantFit
}

// choose returns the first action, in name order, and its first rule, in rule order, that
// decides want for synthesized arguments. When there is none it returns nil and, if some rule
// could have decided want but the bounded search found no arguments for it, a note saying so.
func choose(p *policy.Policy, want policy.Decision, o chooseOpts) (*pick, string) {
	if o.n < 1 {
		o.n = 1
	}
	var missed []string
	for _, name := range slices.Sorted(maps.Keys(p.Actions)) {
		a := p.Actions[name]
		if o.needEffect && a.Effect == nil || o.accept != nil && !o.accept(a) {
			continue
		}
		try := func(rule int) *pick {
			if o.fits == nil {
				return synthesize(p, name, rule, o.n)
			}
			for _, f := range o.fits(name) {
				if pk := synthesizeFor(p, name, rule, o.n, f); pk != nil {
					return pk
				}
			}
			return nil
		}
		if len(a.Rules) == 0 {
			if a.Decision == want {
				if pk := try(-1); pk != nil {
					return pk, ""
				}
				missed = append(missed, name)
			}
			continue
		}
		for i, r := range a.Rules {
			if r.Decision != want {
				continue
			}
			if pk := try(i); pk != nil {
				return pk, ""
			}
			missed = append(missed, fmt.Sprintf("%s rule[%d]", name, i))
		}
	}
	if len(missed) == 0 {
		return nil, ""
	}
	return nil, fmt.Sprintf(" (no arguments found within the search bound that make %s decide %s)", strings.Join(missed, ", "), want)
}

// synthesize finds arguments for which rule (-1: the bare decision) of action name is the one
// that decides, and that render the action's templates; up to n variants, with distinct effect
// keys when the action has an effect template. It returns nil when the bounded search finds none.
func synthesize(p *policy.Policy, name string, rule, n int) *pick {
	return synthesizeFor(p, name, rule, n, nil)
}

// synthesizeFor is synthesize under a grant (nil: none): the grant's constraints are searched
// for too, its resource (when it must be given explicitly) is used, and every variant must be
// allowed by the fit's check.
func synthesizeFor(p *policy.Policy, name string, rule, n int, fit *grantFit) *pick {
	a := p.Actions[name]
	pk := &pick{Action: name, act: a, Decision: a.Decision, Reason: policy.ReasonDecision, rule: rule, cands: map[string][]any{}, fit: fit}
	var own policy.Conditions
	if rule >= 0 {
		own = a.Rules[rule].When
		pk.Decision = a.Rules[rule].Decision
		pk.Reason = fmt.Sprintf("rule[%d]", rule)
	}

	// The arguments to synthesize: those the rule tests, then those the templates need.
	placeholders := map[string]bool{}
	needResource := false
	for _, t := range []*policy.Template{a.Effect, a.Resource} {
		for _, ph := range t.Placeholders() {
			if ph == policy.ResourcePlaceholder {
				needResource = a.Resource == nil
				continue
			}
			placeholders[ph] = true
		}
	}
	if fit != nil && fit.resource != "" {
		needResource = false // the grant's resource is given explicitly
	}
	byArg := map[string]policy.Conditions{}
	for _, c := range own {
		byArg[c.Arg] = append(byArg[c.Arg], c)
	}
	if fit != nil {
		// The grant's constraints must hold as well as the rule's conditions.
		for _, c := range fit.grant.Constraints {
			byArg[c.Arg] = append(byArg[c.Arg], c)
		}
	}
	// Every argument the action requires (named by another rule, or declared) must be passed
	// too, else the call is denied missing_argument before any rule; so must every argument a
	// budget meters, else it is refused budget_metric_missing.
	for _, r := range a.Requirements() {
		if _, ok := byArg[r.Argument]; !ok && !placeholders[r.Argument] {
			byArg[r.Argument] = nil
		}
	}
	metered := meteredArgs(p, name)
	for m := range metered {
		if _, ok := byArg[m]; !ok && !placeholders[m] {
			byArg[m] = nil
		}
	}
	pk.args = slices.Sorted(maps.Keys(byArg))
	for _, ph := range slices.Sorted(maps.Keys(placeholders)) {
		if byArg[ph] == nil {
			pk.args = append(pk.args, ph)
		}
	}
	if needResource {
		pk.args = append(pk.args, resourceArg)
	}
	hints := actionHints(a)
	if fit != nil {
		addHints(hints, fit.grant.Constraints)
	}
	for _, arg := range pk.args {
		var c []any
		if arg == resourceArg {
			for k := range n + 2 {
				c = append(c, fmt.Sprintf("verify:resource-%d", k))
			}
		} else {
			var keep func(any) bool
			if metered[arg] {
				keep = isCount
			}
			c = candidatesKeeping(arg, byArg[arg], hints[arg], placeholders[arg], n, a.Argument(arg), keep)
		}
		if len(c) == 0 {
			return nil
		}
		pk.cands[arg] = c
	}

	seen := map[string]bool{}
	add := func(idx []int) bool {
		v, ok := pk.build(p, idx)
		if !ok {
			return false
		}
		id := v.Key
		if a.Effect == nil {
			raw, _ := json.Marshal(v.Args)
			id = string(raw) + "\x00" + v.Resource
		}
		if seen[id] {
			return true
		}
		seen[id] = true
		pk.variants = append(pk.variants, v)
		return true
	}

	// Phase 1: the first combination, in mixed-radix order with the tested arguments varying
	// fastest, that fires the rule.
	total := 1
	for _, arg := range pk.args {
		total *= len(pk.cands[arg])
		if total > maxCombos {
			total = maxCombos
		}
	}
	var base []int
	k := 0
	for ; k < total && base == nil; k++ {
		idx := radix(k, pk.args, pk.cands)
		if add(idx) {
			base = idx
		}
	}
	if base == nil {
		return nil
	}
	// Phase 2: vary one argument at a time from there, for distinct keys.
	for i, arg := range pk.args {
		for j := range pk.cands[arg] {
			if len(pk.variants) >= n {
				break
			}
			if j != base[i] {
				idx := slices.Clone(base)
				idx[i] = j
				add(idx)
			}
		}
	}
	// Phase 3: the rest of the combinations, within the bound.
	for ; k < total && len(pk.variants) < n; k++ {
		add(radix(k, pk.args, pk.cands))
	}
	// An effect key the policy cannot vary (a constant template, pinned arguments) gets
	// distinct keys from an explicit effect template: the base key with a suffix.
	if a.Effect != nil {
		b := pk.variants[0]
		for i := len(pk.variants); i < n; i++ {
			v := b
			v.Key = fmt.Sprintf("%s:verify-%d", b.Key, i)
			v.Effect = escapeTemplate(v.Key)
			pk.variants = append(pk.variants, v)
		}
	}
	return pk
}

// radix returns the k-th combination of candidate indexes, the first argument varying fastest.
func radix(k int, args []string, cands map[string][]any) []int {
	idx := make([]int, len(args))
	for i, arg := range args {
		n := len(cands[arg])
		idx[i] = k % n
		k /= n
	}
	return idx
}

// build makes the variant of a combination, if the policy decides it by the pick's rule and the
// templates render.
func (pk *pick) build(p *policy.Policy, idx []int) (variant, bool) {
	args := map[string]any{}
	res := ""
	for i, arg := range pk.args {
		v := pk.cands[arg][idx[i]]
		if arg == resourceArg {
			res = v.(string)
			continue
		}
		args[arg] = v
	}
	return pk.finish(p, args, res, pk.Decision, pk.Reason)
}

// finish checks that args decide want (for reason, unless reason is "") and renders the
// templates.
func (pk *pick) finish(p *policy.Policy, args map[string]any, res string, want policy.Decision, reason string) (variant, bool) {
	ev := p.Evaluate(pk.Action, args)
	if ev.Decision != want || reason != "" && ev.Reason != reason {
		return variant{}, false
	}
	if pk.fit != nil && pk.fit.resource != "" {
		res = pk.fit.resource
	}
	resource := res
	if pk.act.Resource != nil && res == "" {
		r, err := pk.act.Resource.Render(args, "")
		if err != nil {
			return variant{}, false
		}
		resource = r
	}
	key, effect := "", ""
	if pk.act.Effect != nil {
		// An effect the caller names with its request key is rendered with verify's own key,
		// and the call is made with that key written out as its effect.
		k, err := pk.act.Effect.RenderKeyed(args, resource, verifyRequestKey)
		if err != nil {
			return variant{}, false
		}
		key = k
		if pk.act.Effect.UsesRequestKey() {
			effect = escapeTemplate(k)
		}
	}
	task := ""
	if pk.fit != nil {
		if !pk.fit.allows(pk.Action, args, resource) {
			return variant{}, false
		}
		task = pk.fit.task
	}
	return variant{Args: args, Resource: res, Key: key, Effect: effect, Task: task}, true
}

// verifyRequestKey is the request key verify's calls render {$request_key} with.
const verifyRequestKey = "verify-request-key"

// mutate returns a variant of base with one argument changed that the policy still decides the
// same way — the approval for one is then presented for the other (G1). It prefers changing an
// argument the rule tests (an amount), then any other, and as a last resort adds an argument no
// condition reads; desc says what changed.
func (pk *pick) mutate(p *policy.Policy, base variant) (variant, string, bool) {
	return pk.vary(p, base, "verify_mutation", "mutated", func(m variant, _ map[string]any, added bool) (variant, bool) {
		m.Effect = base.Effect
		if m.Effect != "" || added {
			m.Key = base.Key
		}
		return m, true
	})
}

// vary returns a variant of base with other arguments, still decided as pk is, that keep
// accepts (keep may adjust it; added says the variant adds an argument): one argument changed,
// the arguments the rules test first, else an argument named name (or name_1, name_2… when base
// has it) added with value. desc says what changed.
func (pk *pick) vary(p *policy.Policy, base variant, name string, value any,
	keep func(m variant, args map[string]any, added bool) (variant, bool)) (variant, string, bool) {
	for _, arg := range pk.args {
		if arg == resourceArg {
			continue
		}
		for _, v := range pk.cands[arg] {
			if sameValue(v, base.Args[arg]) {
				continue
			}
			args := maps.Clone(base.Args)
			args[arg] = v
			if m, ok := pk.finish(p, args, base.Resource, pk.Decision, ""); ok {
				if m, ok := keep(m, args, false); ok {
					return m, fmt.Sprintf("%s %s → %s", arg, valueString(base.Args[arg]), valueString(v)), true
				}
			}
		}
	}
	arg := name
	for i := 1; ; i++ {
		if _, used := base.Args[arg]; !used {
			break
		}
		arg = fmt.Sprintf("%s_%d", name, i)
	}
	args := maps.Clone(base.Args)
	args[arg] = value
	if m, ok := pk.finish(p, args, base.Resource, pk.Decision, ""); ok {
		if m, ok := keep(m, args, true); ok {
			return m, "added argument " + arg, true
		}
	}
	return variant{}, "", false
}

// actionHints collects, per argument, every operand any rule of a tests it against (lists
// flattened): values near them are where the decision of an action changes.
func actionHints(a *policy.Action) map[string][]any {
	h := map[string][]any{}
	for _, r := range a.Rules {
		addHints(h, r.When)
	}
	return h
}

// addHints adds the operands of conds to h.
func addHints(h map[string][]any, conds policy.Conditions) {
	for _, c := range conds {
		if l, ok := c.Operand.([]any); ok && (c.Op == policy.OpIn || c.Op == policy.OpNotIn) {
			h[c.Arg] = append(h[c.Arg], l...)
			continue
		}
		h[c.Arg] = append(h[c.Arg], c.Operand)
	}
}

// candidates returns values of arg that satisfy every condition in own (conditions on arg) and,
// for a template placeholder, render (a non-empty string or an integer). Values named outright
// (eq, in) come first, then constructed strings, integers around the operands and the bounds,
// booleans and containers; the policy's own evaluator is the filter, so a candidate is never
// assumed to satisfy a condition.
//
// decl, when the action declares arg, filters the candidates too, and its enum and bounds are
// seeds.
func candidates(arg string, own policy.Conditions, hints []any, placeholder bool, n int, decl *policy.Argument) []any {
	return candidatesKeeping(arg, own, hints, placeholder, n, decl, nil)
}

// candidatesKeeping is candidates keeping only the values keep accepts (nil: all), before the
// bound is applied: an argument a budget meters takes non-negative integers only, which the
// strings tried first must not crowd out.
func candidatesKeeping(arg string, own policy.Conditions, hints []any, placeholder bool, n int, decl *policy.Argument, keep func(any) bool) []any {
	var seeds []any
	if decl != nil {
		for _, e := range decl.Enum {
			seeds = append(seeds, e)
		}
		for _, b := range []*int64{decl.Min, decl.Max} {
			if b != nil {
				hints = append(hints, *b)
			}
		}
	}
	lo, hi := int64(-maxSafe), int64(maxSafe)
	var pre, suf string
	for _, c := range own {
		switch c.Op {
		case policy.OpEq:
			seeds = append(seeds, c.Operand)
		case policy.OpIn:
			seeds = append(seeds, c.Operand.([]any)...)
		case policy.OpGte:
			lo = max(lo, c.Operand.(int64))
		case policy.OpGt:
			lo = max(lo, c.Operand.(int64)+1)
		case policy.OpLte:
			hi = min(hi, c.Operand.(int64))
		case policy.OpLt:
			hi = min(hi, c.Operand.(int64)-1)
		case policy.OpPrefix:
			if s := c.Operand.(string); len(s) > len(pre) {
				pre = s
			}
		case policy.OpSuffix:
			if s := c.Operand.(string); len(s) > len(suf) {
				suf = s
			}
		}
	}
	for k := range n + 2 {
		seeds = append(seeds, fmt.Sprintf("%sverify-%d%s", pre, k, suf))
	}
	if pre != "" || suf != "" {
		seeds = append(seeds, pre+suf)
	}
	var near []int64
	for _, h := range hints {
		if v, ok := h.(int64); ok {
			near = append(near, v-1, v, v+1)
		}
	}
	slices.Sort(near)
	for _, v := range near {
		seeds = append(seeds, v)
	}
	for k := range int64(n + 2) {
		if lo > -maxSafe {
			seeds = append(seeds, lo+k)
		}
		if hi < maxSafe {
			seeds = append(seeds, hi-k)
		}
	}
	for k := range int64(n + 2) {
		seeds = append(seeds, k, lo+k, hi-k)
	}
	for _, h := range hints {
		if s, ok := h.(string); ok {
			seeds = append(seeds, s, s+"-verify", "verify-"+s)
		}
	}
	seeds = append(seeds, true, false, []any{}, map[string]any{}, []any{"verify"}, map[string]any{"verify": "verify"})
	for _, h := range hints {
		switch h.(type) {
		case nil, []any, map[string]any:
			seeds = append(seeds, h)
		}
	}

	var out []any
	seen := map[string]bool{}
	for _, v := range seeds {
		if i, ok := v.(int64); ok && (i < -maxSafe || i > maxSafe) {
			continue
		}
		if placeholder && !renderable(v) || keep != nil && !keep(v) {
			continue
		}
		if ok, _ := own.Eval(map[string]any{arg: v}); !ok {
			continue
		}
		if decl != nil && !decl.Check(v).OK() {
			continue
		}
		id := valueString(v)
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, v)
		if len(out) == maxCandidates {
			break
		}
	}
	return out
}

// renderable reports whether a template placeholder can render v.
func renderable(v any) bool {
	switch v := v.(type) {
	case string:
		return v != ""
	case int64:
		return true
	}
	return false
}

// valueString renders a value as JSON, which tells apart 1 and "1".
func valueString(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(raw)
}

func sameValue(a, b any) bool { return valueString(a) == valueString(b) }

// escapeTemplate writes s as a template with no placeholders.
func escapeTemplate(s string) string {
	return strings.NewReplacer("{", "{{", "}", "}}").Replace(s)
}

// unlistedName returns an action name the policy does not list: verify.unlisted.<n>.
func unlistedName(p *policy.Policy) string {
	for i := 0; ; i++ {
		name := fmt.Sprintf("verify.unlisted.%d", i)
		if _, listed := p.Actions[name]; !listed {
			return name
		}
	}
}

// sortedActions returns the policy's action names in order.
func sortedActions(p *policy.Policy) []string {
	names := make([]string, 0, len(p.Actions))
	for name := range p.Actions {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
