package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
)

// G24's N/A reason, and its fault.
const (
	naNoTasks = "no grant names a task"
	// faultTasksIgnored runs G24's scenario with a policy whose grants lost their tasks, as an
	// authority check that never reads the task would. G24 fails.
	faultTasksIgnored = "tasks_ignored"
)

// offTaskWords are the tasks tried, in order, as one a grant does not name.
var offTaskWords = []string{"latch-verify-off-task", "latch-verify-off-task:verify", "latch-verify:off-task"}

// g24: under a grant that names tasks, the call on a task the grant does not name, and the same
// call naming no task, are each refused no_authority on the tasks dimension without executing;
// control: the call on a task the grant names (its first pattern made concrete) runs.
//
// The grant is the first, in policy order, that names tasks and under which an action that can
// run (allow, else approve) is allowed on its task, to a principal it names, while the whole
// authority section refuses that call off the task and without one — on tasks: a grant without
// tasks that allowed the call would make the refusal unobservable, so such an action is not
// picked.
func (r *runner) g24(ctx context.Context) (outcome, error) {
	a := r.cfg.Policy.Authority
	if a == nil {
		return notApplicable(naNoAuthority), nil
	}
	bound := 0
	for _, g := range a.Grants {
		if g == nil || g.Tasks == nil {
			continue
		}
		bound++
		off, ok := offTask(g)
		if pk := r.taskPick(g, off, ok); pk != nil {
			return r.offTask(ctx, g, pk, off, ok)
		}
	}
	if bound == 0 {
		return notApplicable(naNoTasks), nil
	}
	return notApplicable("no grant that names tasks allows an action the policy can run (allow or approve) on its task, to a principal it names, with arguments that satisfy both the rule and the grant's constraints, such that the authority section refuses the same call off the task and without one on tasks (a grant without tasks that allows it would make the refusal unobservable)"), nil
}

// offTask returns a task none of g's patterns match, or false when they match every task ("**"):
// then only the call with no task is off the grant's tasks.
func offTask(g *policy.Grant) (string, bool) {
	for _, t := range offTaskWords {
		if !slices.ContainsFunc(g.Tasks, func(p string) bool { return authority.Match(p, t, ':') }) {
			return t, true
		}
	}
	return "", false
}

// taskPick picks, under g alone, an action that can run with three variants, allowed on g's
// task from the clock's start through the margin, and refused on the tasks dimension by the
// whole authority section with no task and (when hasOff) on off.
func (r *runner) taskPick(g *policy.Grant, off string, hasOff bool) *pick {
	a := r.cfg.Policy.Authority
	refusedOnTasks := func(req authority.Request) bool {
		d := authority.Evaluate(a, nil, req)
		return !d.Allowed && d.Reason == authority.ReasonNoAuthority && d.Dimension == authority.DimTasks
	}
	check := func(req authority.Request) bool {
		if !r.allowedThroughout(req) {
			return false
		}
		req.Environment, req.Now = r.env, r.start
		probes := []string{""}
		if hasOff {
			probes = append(probes, off)
		}
		for _, t := range probes {
			req.Task = t
			if !refusedOnTasks(req) {
				return false
			}
		}
		return true
	}
	o := chooseOpts{n: 3, fits: fitsFor(a, func(x *policy.Grant) bool { return x == g }, check)}
	for _, want := range []policy.Decision{policy.Allow, policy.Approve} {
		if pk, _ := choose(r.pol(), want, o); pk != nil {
			return pk
		}
	}
	return nil
}

// withoutTasks is p with every grant's tasks removed: the policy of faultTasksIgnored.
func withoutTasks(p *policy.Policy) *policy.Policy {
	c := *p
	if p.Authority == nil {
		return &c
	}
	au := *p.Authority
	au.Grants = make([]*policy.Grant, len(p.Authority.Grants))
	for i, g := range p.Authority.Grants {
		if g != nil {
			gg := *g
			gg.Tasks = nil
			au.Grants[i] = &gg
		}
	}
	c.Authority = &au
	return &c
}

// offTask plays G24 under g with pk: the calls off g's tasks first, then the control.
func (r *runner) offTask(ctx context.Context, g *policy.Grant, pk *pick, off string, hasOff bool) (outcome, error) {
	sp := r.sp
	if r.faults[faultTasksIgnored] {
		var err error
		if sp, err = newScenarioPolicy(withoutTasks(r.lifted), nil, true); err != nil {
			return outcome{}, err
		}
	}
	e, err := r.newEnv(ctx, "g24", sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	type probe struct {
		what string
		v    variant
	}
	var probes []probe
	if hasOff {
		v := pk.variant(0)
		v.Task = off
		probes = append(probes, probe{"on task " + off + ", which it does not name", v})
	}
	v := pk.variant(1)
	v.Task = ""
	probes = append(probes, probe{"with no task", v})

	var seen, bad []string
	for _, pb := range probes {
		var c counter
		_, err := e.exec(ctx, pk, pb.v, c.commit)
		seen = append(seen, fmt.Sprintf("%s: %s, executions: %d", pb.what, outcomeOf(err), c.count()))
		var ae *latch.AuthorityError
		switch {
		case c.count() != 0:
			bad = append(bad, "the call "+pb.what+" executed")
		case !errors.As(err, &ae) || ae.Reason != authority.ReasonNoAuthority || ae.Dimension != authority.DimTasks:
			bad = append(bad, "the call "+pb.what+" was not refused no_authority on tasks")
		}
	}

	ctl := pk.variant(2)
	var cc counter
	rc, cerr := e.runReceipt(ctx, pk, ctl, cc.commit)
	recorded := ""
	if rc != nil {
		recorded = rc.Task
	}
	detail := fmt.Sprintf("grant %s names tasks %s; as %s, %s: %s; control on task %s, which it names: %s (receipt task %q), executions: %d",
		g.ID, strings.Join(g.Tasks, ", "), principalText(pk.principal()), pk.variant(0).describe(), strings.Join(seen, "; "),
		ctl.Task, outcomeOf(cerr), recorded, cc.count())
	if !hasOff {
		detail += "; no task is off its patterns but none at all"
	}
	switch {
	case cerr != nil || cc.count() != 1 || recorded != ctl.Task:
		return controlFailed(pk.Action, detail), nil
	case len(bad) > 0:
		return fail(pk.Action, bad[0], detail), nil
	}
	return pass(pk.Action, detail), nil
}
