package authority

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/policy"
)

// mustAuthority parses a policy whose authority section is grants (a YAML list, indented by
// four spaces) and returns that section.
func mustAuthority(t testing.TB, depth int, grants string) *policy.Authority {
	t.Helper()
	src := "schema: latch.policy/v1\nactions: {}\nauthority:\n  max_delegation_depth: " + strconv.Itoa(depth) + "\n  grants:\n" + grants
	p, err := policy.Parse("latch.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	return p.Authority
}

// mustGrant parses a grant file.
func mustGrant(t testing.TB, src string) *policy.Grant {
	t.Helper()
	g, err := policy.ParseGrant("grant.yaml", []byte(src))
	if err != nil {
		t.Fatalf("ParseGrant = %v", err)
	}
	return g
}

// clone returns a deep enough copy of g to mutate its lists and constraints.
func clone(g *policy.Grant) *policy.Grant {
	c := *g
	c.Actions = slices.Clone(g.Actions)
	c.Resources = slices.Clone(g.Resources)
	c.Environments = slices.Clone(g.Environments)
	c.Tasks = slices.Clone(g.Tasks)
	c.Constraints = slices.Clone(g.Constraints)
	return &c
}

// cloneAuthority copies a so that its grants can be changed.
func cloneAuthority(a *policy.Authority) *policy.Authority {
	c := *a
	c.Grants = make([]*policy.Grant, len(a.Grants))
	for i, g := range a.Grants {
		c.Grants[i] = clone(g)
	}
	return &c
}

func grantByID(a *policy.Authority, id string) *policy.Grant {
	for _, g := range a.Grants {
		if g.ID == id {
			return g
		}
	}
	return nil
}

// setConstraint replaces (or, with operand nil and drop, removes) the constraint with key, or
// adds it.
func setConstraint(t testing.TB, g *policy.Grant, key string, operand any, drop bool) {
	t.Helper()
	g.Constraints = slices.DeleteFunc(g.Constraints, func(c policy.Condition) bool { return c.Key == key })
	if drop {
		return
	}
	c, err := policy.ParseCondition(key, operand)
	if err != nil {
		t.Fatalf("ParseCondition(%q) = %v", key, err)
	}
	g.Constraints = append(g.Constraints, c)
}

// dropConstraintsOn removes every constraint on arg.
func dropConstraintsOn(g *policy.Grant, arg string) {
	g.Constraints = slices.DeleteFunc(g.Constraints, func(c policy.Condition) bool { return c.Arg == arg })
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// asError returns err as an *Error, failing the test when it is not one.
func asError(t testing.TB, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *authority.Error", err, err)
	}
	if e.Msg == "" || strings.ToLower(e.Msg[:1]) != e.Msg[:1] {
		t.Errorf("message %q is empty or not lowercase", e.Msg)
	}
	return e
}

// outcome is the part of a Decision most tests compare.
type outcome struct {
	Allowed               bool
	Reason, Dimension     string
	GrantID, DelegationID string
}

func outcomeOf(d Decision) outcome {
	return outcome{d.Allowed, d.Reason, d.Dimension, d.GrantID, d.DelegationID}
}
