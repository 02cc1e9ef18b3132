package authority

import (
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
)

// refusal is why a check failed: the dimension and a lowercase message. The zero value is
// "passed"; building one is the only place the checks allocate.
type refusal struct {
	dim, msg string
}

func (f refusal) failed() bool { return f.dim != "" }

// validGrant checks that g is a well-formed grant, as [policy.ParseGrant] would have produced:
// a subject, at least one action, every pattern valid, declared lists non-empty, every
// constraint well-formed, and an expiry on a delegable grant. It does not allocate when g is
// well-formed.
func validGrant(g *policy.Grant) refusal {
	s := g.Subject
	switch {
	case s.Agent == "" && s.User == "":
		return refusal{DimSubject, "empty subject (expected an agent, a user or both)"}
	case s.Agent != "" && !validPattern(s.Agent, ':'):
		return refusal{DimSubject, "bad agent pattern " + strconv.Quote(s.Agent)}
	case s.User != "" && !validPattern(s.User, ':'):
		return refusal{DimSubject, "bad user pattern " + strconv.Quote(s.User)}
	case len(g.Actions) == 0:
		return refusal{DimActions, "no actions (expected at least one action pattern)"}
	case g.Resources != nil && len(g.Resources) == 0:
		return refusal{DimResources, "empty resources (expected at least one pattern, or none declared)"}
	case g.Environments != nil && len(g.Environments) == 0:
		return refusal{DimEnvironments, "empty environments (expected at least one name, or none declared)"}
	case g.Tasks != nil && len(g.Tasks) == 0:
		return refusal{DimTasks, "empty tasks (expected at least one pattern, or none declared)"}
	case g.Delegable && g.ExpiresAt.IsZero():
		return refusal{DimExpiresAt, "delegable grant without expires_at (a grant that can be delegated must expire)"}
	}
	for _, p := range g.Actions {
		if !validPattern(p, '.') {
			return refusal{DimActions, "bad action pattern " + strconv.Quote(p)}
		}
	}
	for _, p := range g.Resources {
		if !validPattern(p, ':') {
			return refusal{DimResources, "bad resource pattern " + strconv.Quote(p)}
		}
	}
	for _, e := range g.Environments {
		if e == "" {
			return refusal{DimEnvironments, "empty environment name"}
		}
	}
	for _, p := range g.Tasks {
		if !validPattern(p, ':') {
			return refusal{DimTasks, "bad task pattern " + strconv.Quote(p)}
		}
	}
	for i := range g.Constraints {
		if _, err := g.Constraints[i].Resolve(); err != nil {
			return refusal{constraintDim(&g.Constraints[i]), err.Error()}
		}
	}
	return refusal{}
}

// conditionKey is the key a condition is named by in messages and dimensions.
func conditionKey(c *policy.Condition) string {
	if c.Key != "" {
		return c.Key
	}
	return c.Arg + "_" + string(c.Op)
}

// contained checks that child is a provable subset of parent on every dimension (docs/authority.md),
// in the order subject, actions, resources, constraints, environments, tasks, expires_at, and returns
// the first dimension on which it is not. Leaving out a dimension the parent constrains is
// widening. child must be well-formed (validGrant). It does not allocate when child is
// contained.
func contained(parent, child *policy.Grant) refusal {
	if f := containedSubject(parent.Subject, child.Subject); f.failed() {
		return f
	}
	if i := uncontained(parent.Actions, child.Actions, '.'); i >= 0 || len(child.Actions) == 0 {
		return refusal{DimActions, notContained("action", child.Actions, i, parent.Actions)}
	}
	if parent.Resources != nil {
		if child.Resources == nil {
			return refusal{DimResources, "the parent is limited to resources " + list(parent.Resources) + " and the child declares none, which would allow every resource"}
		}
		if i := uncontained(parent.Resources, child.Resources, ':'); i >= 0 {
			return refusal{DimResources, notContained("resource", child.Resources, i, parent.Resources)}
		}
	}
	if f := containedConstraints(parent.Constraints, child.Constraints); f.failed() {
		return f
	}
	if parent.Environments != nil {
		if child.Environments == nil {
			return refusal{DimEnvironments, "the parent is limited to environments " + list(parent.Environments) + " and the child declares none, which would allow every environment"}
		}
		for _, e := range child.Environments {
			if !has(parent.Environments, e) {
				return refusal{DimEnvironments, "environment " + strconv.Quote(e) + " is not one of the parent's " + list(parent.Environments)}
			}
		}
	}
	if parent.Tasks != nil {
		// As for actions, every child pattern within some parent pattern; and, as for resources,
		// a child that names no tasks would admit every task (and calls with none).
		if child.Tasks == nil {
			return refusal{DimTasks, "the parent is limited to tasks " + list(parent.Tasks) + " and the child declares none, which would allow every task"}
		}
		if i := uncontained(parent.Tasks, child.Tasks, ':'); i >= 0 {
			return refusal{DimTasks, notContained("task", child.Tasks, i, parent.Tasks)}
		}
	}
	if !parent.ExpiresAt.IsZero() {
		if child.ExpiresAt.IsZero() {
			return refusal{DimExpiresAt, "the parent expires at " + timeText(parent.ExpiresAt) + " and the child has no expires_at, which would outlive it"}
		}
		if child.ExpiresAt.After(parent.ExpiresAt) {
			return refusal{DimExpiresAt, "the child expires at " + timeText(child.ExpiresAt) + ", after the parent's " + timeText(parent.ExpiresAt)}
		}
	}
	return refusal{}
}

// containedSubject checks the subject, the one dimension that is replaced rather than
// narrowed: a delegation hands authority to a new holder. The child must name one concrete agent
// (no wildcard), the delegatee; the parent's agent pattern need not match it, since that
// pattern says who may delegate. What the parent restricts beyond its holder stays restricted:
// when the parent is an agent's grant limited to users (agent and user both set), the user
// says on whose behalf the agent acts, and the child must name a user pattern contained in it.
// When the parent is a user's grant (user only), the user is the holder, replaced like an agent.
func containedSubject(parent, child policy.Subject) refusal {
	switch {
	case child.Agent == "":
		return refusal{DimSubject, "the child names no agent (a delegation is to one concrete agent)"}
	case !concrete(child.Agent, ':'):
		return refusal{DimSubject, "agent " + strconv.Quote(child.Agent) + " is a pattern (a delegation is to one concrete agent)"}
	case parent.Agent == "" || parent.User == "":
		return refusal{}
	case child.User == "":
		return refusal{DimSubject, "the parent acts only for user " + strconv.Quote(parent.User) + " and the child names no user, which would allow every user"}
	case !Contains(parent.User, child.User, ':'):
		return refusal{DimSubject, "user " + strconv.Quote(child.User) + " is not contained in the parent's user pattern " + strconv.Quote(parent.User)}
	}
	return refusal{}
}

// containedConstraints requires, for every constraint of the parent, a constraint of the child
// on the same argument that implies it. A malformed constraint of the child implies nothing.
func containedConstraints(parent, child policy.Conditions) refusal {
	if len(parent) == 0 {
		return refusal{}
	}
	// Resolve the child's constraints once; a grant has a handful, held on the stack.
	var buf [8]policy.Condition
	resolved := buf[:0]
	for j := range child {
		if cc, err := child[j].Resolve(); err == nil {
			resolved = append(resolved, cc)
		}
	}
	for i := range parent {
		pc, err := parent[i].Resolve()
		if err != nil {
			return refusal{constraintDim(&parent[i]), "the parent's constraint is malformed (" + err.Error() + "), so nothing can be shown to be within it"}
		}
		sameArg, ok := false, false
		for j := range resolved {
			if resolved[j].Arg != pc.Arg {
				continue
			}
			sameArg = true
			if implies(&resolved[j], &pc) {
				ok = true
				break
			}
		}
		switch {
		case ok:
		case !sameArg:
			return refusal{constraintDim(&pc), "the parent requires " + conditionText(&pc) + " and the child has no constraint on " + strconv.Quote(pc.Arg) + ", which would allow any value"}
		default:
			return refusal{constraintDim(&pc), "no constraint of the child on " + strconv.Quote(pc.Arg) + " is at least as strict as the parent's " + conditionText(&pc)}
		}
	}
	return refusal{}
}

func constraintDim(c *policy.Condition) string { return DimConstraints + "." + conditionKey(c) }

func notContained(what string, child []string, i int, parent []string) string {
	if i < 0 {
		return "the child declares no " + what + "s"
	}
	return what + " pattern " + strconv.Quote(child[i]) + " is not contained in any of the parent's " + list(parent)
}

func conditionText(c *policy.Condition) string {
	b, err := canon.Marshal(c.Operand)
	if err != nil {
		return c.Key
	}
	return c.Key + ": " + string(b)
}

func list(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func has(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

func timeText(t time.Time) string { return t.Format(time.RFC3339Nano) }
