package authority

import (
	"testing"

	"github.com/latchkit/latch/policy"
)

func cond(t *testing.T, key string, operand any) policy.Condition {
	t.Helper()
	c, err := policy.ParseCondition(key, operand)
	if err != nil {
		t.Fatalf("ParseCondition(%q, %v) = %v", key, operand, err)
	}
	return c
}

func TestImplies(t *testing.T) {
	t.Parallel()
	l := func(v ...any) []any { return v }
	tests := []struct {
		child, parent string
		co, po        any
		want          bool
	}{
		// eq: the same operand.
		{"x_eq", "x_eq", "a", "a", true},
		{"x_eq", "x_eq", "a", "b", false},
		{"x_eq", "x_eq", int64(5), "5", false},
		{"x_eq", "x_eq", l("a", int64(1)), l("a", int64(1)), true},
		{"x_in", "x_eq", l("a"), "a", true},
		{"x_in", "x_eq", l("a", "b"), "a", false},
		{"x_lte", "x_eq", int64(5), int64(5), false},
		// in: a subset, or eq with a member.
		{"x_in", "x_in", l("a"), l("a", "b"), true},
		{"x_in", "x_in", l("a", "b"), l("a", "b"), true},
		{"x_in", "x_in", l("a", "c"), l("a", "b"), false},
		{"x_eq", "x_in", "b", l("a", "b"), true},
		{"x_eq", "x_in", "c", l("a", "b"), false},
		{"x_in", "x_in", l(int64(1)), l("1"), false},
		{"x_prefix", "x_in", "a", l("a", "ab"), false},
		// Upper bounds, lt against lte on integers.
		{"x_lte", "x_lte", int64(10), int64(10), true},
		{"x_lte", "x_lte", int64(9), int64(10), true},
		{"x_lte", "x_lte", int64(11), int64(10), false},
		{"x_lt", "x_lte", int64(11), int64(10), true},
		{"x_lt", "x_lte", int64(12), int64(10), false},
		{"x_lte", "x_lt", int64(10), int64(10), false},
		{"x_lte", "x_lt", int64(9), int64(10), true},
		{"x_lt", "x_lt", int64(10), int64(10), true},
		{"x_eq", "x_lte", int64(10), int64(10), true},
		{"x_eq", "x_lte", int64(11), int64(10), false},
		{"x_eq", "x_lte", "5", int64(10), false},
		{"x_in", "x_lt", l(int64(1), int64(9)), int64(10), true},
		{"x_in", "x_lt", l(int64(1), int64(10)), int64(10), false},
		{"x_gte", "x_lte", int64(0), int64(10), false},
		// Lower bounds.
		{"x_gte", "x_gte", int64(5), int64(5), true},
		{"x_gte", "x_gte", int64(4), int64(5), false},
		{"x_gt", "x_gte", int64(4), int64(5), true},
		{"x_gt", "x_gte", int64(3), int64(5), false},
		{"x_gte", "x_gt", int64(5), int64(5), false},
		{"x_gte", "x_gt", int64(6), int64(5), true},
		{"x_lte", "x_gte", int64(9), int64(0), false},
		// Bounds against exclusions.
		{"x_lte", "x_neq", int64(10), int64(11), true},
		{"x_lte", "x_neq", int64(10), int64(10), false},
		{"x_gt", "x_not_in", int64(10), l(int64(3), "a"), true},
		{"x_gt", "x_not_in", int64(10), l(int64(30)), false},
		{"x_gt", "x_not_in", int64(10), l("a"), false},
		// prefix and suffix.
		{"x_prefix", "x_prefix", "ab", "a", true},
		{"x_prefix", "x_prefix", "a", "ab", false},
		{"x_prefix", "x_prefix", "a", "a", true},
		{"x_eq", "x_prefix", "abc", "ab", true},
		{"x_eq", "x_prefix", "b", "ab", false},
		{"x_suffix", "x_suffix", "-eu", "eu", true},
		{"x_suffix", "x_suffix", "eu", "-eu", false},
		{"x_suffix", "x_prefix", "a", "a", false},
		{"x_suffix", "x_prefix", "a", "", true},
		{"x_prefix", "x_neq", "a", "b", true},
		{"x_prefix", "x_neq", "a", "ab", false},
		{"x_prefix", "x_not_in", "inv-", l("x", "inw-1"), true},
		{"x_prefix", "x_not_in", "inv-", l("inv-1"), false},
		// neq and not_in: exclude at least what the parent excludes.
		{"x_neq", "x_neq", "a", "a", true},
		{"x_neq", "x_neq", "a", "b", false},
		{"x_not_in", "x_neq", l("a", "b"), "a", true},
		{"x_not_in", "x_neq", l("a", int64(1)), "a", false},
		{"x_neq", "x_not_in", "a", l("a"), true},
		{"x_neq", "x_not_in", "a", l("a", "b"), false},
		{"x_neq", "x_not_in", "a", l("a", int64(1)), true},
		{"x_not_in", "x_not_in", l("a", "b"), l("a"), true},
		{"x_not_in", "x_not_in", l("a"), l("a", "b"), false},
		{"x_not_in", "x_not_in", l("a", int64(1)), l("a"), false},
		{"x_eq", "x_neq", "b", "a", true},
		{"x_eq", "x_neq", "a", "a", false},
		{"x_eq", "x_neq", int64(1), "a", false},
		{"x_eq", "x_not_in", "c", l("a", "b"), true},
		{"x_neq", "x_lte", int64(1), int64(10), false},
		{"x_neq", "x_prefix", "a", "", true},
		// Booleans and null have finitely many values.
		{"x_neq", "x_eq", true, false, true},
		{"x_neq", "x_eq", true, true, false},
		{"x_not_in", "x_eq", l(true), false, true},
		{"x_not_in", "x_in", l(nil, true), l(false, "a"), true},
		{"x_not_in", "x_eq", l(nil), nil, true}, // never holds: implies anything
		// Different arguments never imply each other.
		{"x_eq", "y_eq", "a", "a", false},
	}
	for _, tt := range tests {
		c, p := cond(t, tt.child, tt.co), cond(t, tt.parent, tt.po)
		if got := implies(&c, &p); got != tt.want {
			t.Errorf("implies(%s: %v, %s: %v) = %v, want %v", tt.child, tt.co, tt.parent, tt.po, got, tt.want)
		}
	}
}

// TestImpliesSound checks implies against policy's own evaluation: over a universe of
// conditions and argument values, whenever implies(c, p), every value for which c holds makes p
// hold. It also checks that holds agrees with Conditions.Eval on every pair.
func TestImpliesSound(t *testing.T) {
	t.Parallel()
	l := func(v ...any) []any { return v }
	operands := []any{
		nil, true, false, "", "a", "ab", "b", "ba", int64(-1), int64(0), int64(1), int64(5), int64(6), int64(10),
		l("a"), l("a", "b"), l(int64(1), int64(5)), l("a", int64(1)), l(true), l(nil, false), l(l("a")),
		map[string]any{"k": "a"},
	}
	values := append([]any{
		"abc", "c", int64(-5), int64(2), int64(4), int64(7), int64(11), int64(100),
		5, 1.5, l(), map[string]any{}, // Go values outside canon's model
	}, operands...)
	ops := []policy.Op{policy.OpEq, policy.OpNeq, policy.OpIn, policy.OpNotIn, policy.OpLt, policy.OpLte,
		policy.OpGt, policy.OpGte, policy.OpPrefix, policy.OpSuffix}
	var conds []policy.Condition
	for _, op := range ops {
		for _, o := range operands {
			if c, err := policy.ParseCondition("x_"+string(op), o); err == nil {
				conds = append(conds, c)
			}
		}
	}
	eval := func(c policy.Condition, v any) bool {
		ok, _ := policy.Conditions{c}.Eval(map[string]any{"x": v})
		return ok
	}
	implied := 0
	for _, c := range conds {
		for _, v := range values {
			if got, want := holds(&c, v), eval(c, v); got != want {
				t.Errorf("holds(%s: %v, %#v) = %v, Eval says %v", c.Key, c.Operand, v, got, want)
			}
		}
		for _, p := range conds {
			if !implies(&c, &p) {
				continue
			}
			implied++
			for _, v := range values {
				if eval(c, v) && !eval(p, v) {
					t.Errorf("implies(%s: %#v, %s: %#v) = true, but %#v satisfies the child and not the parent", c.Key, c.Operand, p.Key, p.Operand, v)
				}
			}
		}
	}
	if implied < len(conds) {
		t.Errorf("only %d implications among %d conditions (every condition implies itself)", implied, len(conds))
	}
	for _, c := range conds {
		if !implies(&c, &c) {
			t.Errorf("implies(%s: %#v, itself) = false", c.Key, c.Operand)
		}
	}
}
