package verify

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"context"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

// Reasons for N/A of L3 and L5.
const (
	naKeyTakesAll = "every argument of the allowed actions with an effect template is part of its effect key (and no other argument may be added): no two calls with other arguments share a key"
	naNoNamedArg  = "no action that can run names an argument (in a condition, a template or an arguments: section): there is no name to misspell"
)

// sameKeyVariant returns a variant of base with other arguments and the same effect key, still
// decided as pk is: one argument the key does not render changed, else an argument added that no
// condition reads (vary). desc says what changed.
func (pk *pick) sameKeyVariant(p *policy.Policy, base variant) (variant, string, bool) {
	return pk.vary(p, base, "verify_other", "other", func(m variant, args map[string]any, _ bool) (variant, bool) {
		m.Effect = base.Effect
		k := m.Key
		if base.Effect != "" {
			t, err := policy.ParseTemplate(base.Effect)
			if err != nil {
				return variant{}, false
			}
			res := m.Resource
			if res == "" {
				res = pk.resourceOf(m)
			}
			if k, err = t.Render(args, res); err != nil {
				return variant{}, false
			}
		}
		if k == "" || k != base.Key {
			return variant{}, false
		}
		m.Key = k
		return m, true
	})
}

// l3: a call commits; the same key asked again with other arguments must be refused
// key_conflict (ErrDuplicateEffect), without executing: a consequence asked twice with different
// details is named, not taken for a duplicate. Control: the same call again (same arguments) is
// refused as the plain duplicate it is, committed.
func (r *runner) l3(ctx context.Context) (outcome, error) {
	pk, why := r.effectPick(1)
	if pk == nil {
		return notApplicable(why), nil
	}
	v := pk.variants[0]
	other, change, ok := pk.sameKeyVariant(r.pol(), v)
	if !ok {
		return notApplicable(naKeyTakesAll), nil
	}
	e, err := r.newEnv(ctx, "l3", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	var c counter
	_, ferr := e.exec(ctx, pk, v, c.commit)
	first := c.count()
	_, serr := e.exec(ctx, pk, v, c.commit)
	same := c.count()
	_, oerr := e.exec(ctx, pk, other, c.commit)
	rec, err := e.effectRecord(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}

	detail := fmt.Sprintf("%s: first call %s; the same call again %s; with other arguments (%s) on the same key: %s; executions in all: %d, record %s",
		v.describe(), outcomeOf(ferr), outcomeOf(serr), change, outcomeOf(oerr), c.count(), recordText(rec))
	switch {
	case ferr != nil || first != 1 || same != 1 || effectRefusal(serr) != "committed":
		return controlFailed(pk.Action, detail), nil
	case c.count() != 1:
		return fail(pk.Action, "the call with other arguments executed", detail), nil
	case effectRefusal(oerr) != "key_conflict" || !errors.Is(oerr, latch.ErrDuplicateEffect):
		return fail(pk.Action, "the call with other arguments was not named key_conflict", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// misspell returns name with two letters swapped (or one added), as a typing slip would, that
// is not among taken.
func misspell(name string, taken func(string) bool) string {
	rs := []rune(name)
	for i := 1; i+1 < len(rs); i++ {
		if rs[i] != rs[i+1] {
			m := append([]rune(nil), rs...)
			m[i], m[i+1] = m[i+1], m[i]
			if s := string(m); !taken(s) {
				return s
			}
		}
	}
	for s := name + "s"; ; s += "s" {
		if !taken(s) {
			return s
		}
	}
}

// l5: the first action that can run (allow, else approve) and names an argument; one of the
// arguments it names — one a rule's condition reads, when there is one — is passed under a
// misspelt name. The call must be denied (missing_argument, or invalid_arguments when undeclared
// arguments are refused, or by the authority section when a grant constrains that argument),
// execute nothing and reserve nothing. Control: the same call spelt
// right runs.
func (r *runner) l5(ctx context.Context) (outcome, error) {
	named := chooseOpts{n: 2, accept: func(a *policy.Action) bool { return len(a.Requirements()) > 0 }}
	pk, _ := r.pickFor(policy.Allow, named, "")
	if pk == nil {
		pk, _ = r.pickFor(policy.Approve, named, "")
	}
	if pk == nil {
		if other, why := r.runnable(1); other == nil {
			return notApplicable(why), nil
		}
		return notApplicable(naNoNamedArg), nil
	}
	v, cv := pk.variants[0], pk.variant(1)
	reqs := pk.act.Requirements()
	arg := ""
	for _, q := range reqs {
		if _, ok := v.Args[q.Argument]; ok && strings.HasPrefix(q.By, "rule ") {
			arg = q.Argument
			break
		}
	}
	if arg == "" {
		for _, q := range reqs {
			if _, ok := v.Args[q.Argument]; ok {
				arg = q.Argument
				break
			}
		}
	}
	if arg == "" {
		return notApplicable(naNoNamedArg), nil
	}
	miss := misspell(arg, func(s string) bool {
		_, used := v.Args[s]
		return used || pk.act.Argument(s) != nil
	})
	bad := variant{Args: maps.Clone(v.Args), Resource: v.Resource, Effect: v.Effect, Key: v.Key}
	bad.Args[miss] = bad.Args[arg]
	delete(bad.Args, arg)

	sp := r.sp
	if r.faults[faultArgumentsOptional] {
		var err error
		if sp, err = optionalArgument(r.sp, pk.Action, arg, v.Args); err != nil {
			return outcome{}, err
		}
	}
	e, err := r.newEnv(ctx, "l5", sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	var c counter
	_, berr := e.exec(ctx, pk, bad, c.commit)
	rec, err := e.effectRecord(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}
	var cc counter
	cerr := e.run(ctx, pk, cv, cc.commit)

	// With an authority section, a grant's constraint on the argument may refuse first: the
	// call fails closed all the same, on the authority axis.
	denied := "not denied"
	var de *latch.DeniedError
	var ae *latch.AuthorityError
	closed := false
	switch {
	case errors.As(berr, &ae):
		denied = "denied " + ae.Reason + " on " + ae.Dimension
		closed = strings.HasPrefix(ae.Dimension, "constraints."+arg+"_") // amount_lte: the constraint on arg
	case errors.As(berr, &de):
		denied = "denied " + de.Reason
		if de.Argument != "" {
			denied += " naming " + de.Argument
		}
		closed = de.Reason == policy.ReasonMissingArgument || de.Reason == policy.ReasonInvalidArguments
	}
	if denied == "not denied" {
		denied = outcomeOf(berr)
	}
	detail := fmt.Sprintf("%s with %s spelt %s: %s, executions: %d, record under %s: %s; control, spelt right (%s): %s, executions: %d",
		pk.Action, arg, miss, denied, c.count(), v.Key, recordText(rec), cv.describe(), outcomeOf(cerr), cc.count())
	switch {
	case cerr != nil || cc.count() != 1:
		return controlFailed(pk.Action, detail), nil
	case c.count() != 0:
		return fail(pk.Action, "the call with a misspelt argument executed", detail), nil
	case !closed:
		return fail(pk.Action, "the call with a misspelt argument was not denied missing_argument, invalid_arguments or by a grant's constraint on it", detail), nil
	case v.Key != "" && rec != nil:
		return fail(pk.Action, "the call with a misspelt argument reserved its key", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// optionalArgument is faultArgumentsOptional: sp with arg of action declared optional and
// undeclared arguments allowed, as a policy engine that skips a condition on an absent argument
// would behave. Every other argument of values is declared as it is passed, required, so that
// the section covers what the templates name.
func optionalArgument(sp *scenarioPolicy, action, arg string, values map[string]any) (*scenarioPolicy, error) {
	var doc map[string]any
	if err := json.Unmarshal(sp.doc, &doc); err != nil {
		return nil, fmt.Errorf("verify: read the scenario policy: %w", err)
	}
	actions, _ := doc["actions"].(map[string]any)
	a, _ := actions[action].(map[string]any)
	if a == nil {
		return nil, fmt.Errorf("verify: the scenario policy has no action %s", action)
	}
	typeOf := func(value any) policy.Type {
		switch value.(type) {
		case bool:
			return policy.TypeBoolean
		case json.Number, int, int64, float64:
			return policy.TypeInteger
		case map[string]any:
			return policy.TypeObject
		case []any:
			return policy.TypeArray
		case nil:
			return policy.TypeNull
		}
		return policy.TypeString
	}
	args, _ := a["arguments"].(map[string]any)
	if args == nil {
		args = map[string]any{}
	}
	for name, v := range values {
		if _, declared := args[name]; !declared && name != resourceArg {
			args[name] = map[string]any{"type": string(typeOf(v))}
		}
	}
	args["additional"] = true
	args[arg] = map[string]any{"type": string(typeOf(values[arg])), "optional": true}
	a["arguments"] = args
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("verify: write the scenario policy: %w", err)
	}
	p, err := policy.Parse("latch-verify-scenario.yaml", b)
	if err != nil {
		return nil, fmt.Errorf("verify: re-parse the scenario policy: %w", err)
	}
	return &scenarioPolicy{pol: p, doc: b}, nil
}
