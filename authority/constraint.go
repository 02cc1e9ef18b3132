package authority

import (
	"strings"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
)

// implies reports whether child condition c guarantees parent condition p: for every argument
// value for which c holds, p holds too. Both must be resolved (policy.Condition.Resolve) and
// valid. It answers true only when that can be shown from the two operands alone, mirroring
// policy's type-strict semantics:
//
//   - a child that admits finitely many values (eq, in, and neq/not_in over null and booleans)
//     implies p iff p holds for each of them;
//   - an integer bound (lt, lte, gt, gte) implies a bound on the same side that is no tighter
//     (lt vs lte compared on integers: lt 11 is lte 10), and a neq/not_in that excludes only
//     integers outside the bound;
//   - prefix implies a prefix it extends and a neq/not_in that excludes only strings without
//     that prefix; suffix likewise;
//   - neq implies neq of the same value; not_in implies not_in of a subset (over the same or
//     fewer types) and neq of one of its members when it lists only that type.
func implies(c, p *policy.Condition) bool {
	if c.Arg != p.Arg {
		return false
	}
	switch c.Op {
	case policy.OpEq:
		return holds(p, c.Operand)
	case policy.OpIn:
		for _, v := range c.Operand.([]any) {
			if !holds(p, v) {
				return false
			}
		}
		return true
	case policy.OpNeq:
		if b, ok := c.Operand.(bool); ok {
			return holds(p, !b) // the only other boolean
		}
	case policy.OpNotIn:
		if l := c.Operand.([]any); kindsOf(l)&^(canon.KindNull|canon.KindBool) == 0 {
			// Only null and booleans: the values left are finitely many.
			for _, v := range [...]any{nil, false, true} {
				if kindsOf(l)&canon.KindOf(v) != 0 && !member(v, l) && !holds(p, v) {
					return false
				}
			}
			return true
		}
	}
	switch c.Op {
	case policy.OpLt, policy.OpLte, policy.OpGt, policy.OpGte:
		return intervalImplies(bounds(c), p)
	case policy.OpPrefix, policy.OpSuffix:
		return affixImplies(c, p)
	case policy.OpNeq:
		return excludedImplies(canon.KindOf(c.Operand), 1, c.Operand, nil, p)
	case policy.OpNotIn:
		l := c.Operand.([]any)
		return excludedImplies(kindsOf(l), 0, nil, l, p)
	}
	return false
}

// holds reports whether condition p (resolved, valid) holds for argument value v, as
// policy.Conditions.Eval decides it.
func holds(p *policy.Condition, v any) bool {
	switch p.Op {
	case policy.OpEq:
		return policy.Equal(v, p.Operand)
	case policy.OpNeq:
		return canon.KindOf(v) == canon.KindOf(p.Operand) && !policy.Equal(v, p.Operand)
	case policy.OpIn:
		return member(v, p.Operand.([]any))
	case policy.OpNotIn:
		l := p.Operand.([]any)
		return canon.KindOf(v)&kindsOf(l) != 0 && !member(v, l)
	case policy.OpLt, policy.OpLte, policy.OpGt, policy.OpGte:
		n, ok := v.(int64)
		return ok && bounds(p).contains(n)
	case policy.OpPrefix:
		s, ok := v.(string)
		return ok && strings.HasPrefix(s, p.Operand.(string))
	case policy.OpSuffix:
		s, ok := v.(string)
		return ok && strings.HasSuffix(s, p.Operand.(string))
	}
	return false
}

// interval is a set of integers lo..hi, each side possibly unbounded.
type interval struct {
	lo, hi       int64
	hasLo, hasHi bool
}

// bounds returns the integers an integer comparison admits. Operands are within ±(2^53-1)
// (Resolve checks it), so ±1 cannot overflow.
func bounds(c *policy.Condition) interval {
	n := c.Operand.(int64)
	switch c.Op {
	case policy.OpLt:
		return interval{hi: n - 1, hasHi: true}
	case policy.OpLte:
		return interval{hi: n, hasHi: true}
	case policy.OpGt:
		return interval{lo: n + 1, hasLo: true}
	default: // gte
		return interval{lo: n, hasLo: true}
	}
}

func (iv interval) contains(n int64) bool {
	return (!iv.hasLo || n >= iv.lo) && (!iv.hasHi || n <= iv.hi)
}

// intervalImplies reports whether every integer of iv satisfies p.
func intervalImplies(iv interval, p *policy.Condition) bool {
	switch p.Op {
	case policy.OpLt, policy.OpLte, policy.OpGt, policy.OpGte:
		pb := bounds(p)
		if pb.hasHi {
			return iv.hasHi && iv.hi <= pb.hi
		}
		return iv.hasLo && iv.lo >= pb.lo
	case policy.OpNeq:
		n, ok := p.Operand.(int64)
		return ok && !iv.contains(n)
	case policy.OpNotIn:
		l := p.Operand.([]any)
		if kindsOf(l)&canon.KindInt == 0 {
			return false
		}
		for _, e := range l {
			if n, ok := e.(int64); ok && iv.contains(n) {
				return false
			}
		}
		return true
	}
	return false
}

// affixImplies reports whether every string with c's prefix (or suffix) satisfies p.
func affixImplies(c, p *policy.Condition) bool {
	s := c.Operand.(string)
	has := strings.HasPrefix
	if c.Op == policy.OpSuffix {
		has = strings.HasSuffix
	}
	switch p.Op {
	case policy.OpPrefix, policy.OpSuffix:
		t := p.Operand.(string)
		if t == "" {
			return true // holds for every string
		}
		return p.Op == c.Op && has(s, t)
	case policy.OpNeq:
		v, ok := p.Operand.(string)
		return ok && !has(v, s)
	case policy.OpNotIn:
		l := p.Operand.([]any)
		if kindsOf(l)&canon.KindString == 0 {
			return false
		}
		for _, e := range l {
			if v, ok := e.(string); ok && has(v, s) {
				return false
			}
		}
		return true
	}
	return false
}

// excludedImplies reports whether every value whose type is in kinds and which is not excluded
// (the one value one, when n is 1, else the members of list) satisfies p.
func excludedImplies(kinds canon.Kind, n int, one any, list []any, p *policy.Condition) bool {
	excluded := func(v any) bool {
		if n == 1 {
			return policy.Equal(v, one)
		}
		return member(v, list)
	}
	switch p.Op {
	case policy.OpNeq:
		// Every value of the child's types but the excluded ones: p must exclude one of them,
		// and the child must admit no other type.
		return kinds == canon.KindOf(p.Operand) && excluded(p.Operand)
	case policy.OpNotIn:
		pl := p.Operand.([]any)
		if kinds&^kindsOf(pl) != 0 {
			return false
		}
		for _, e := range pl {
			if canon.KindOf(e)&kinds != 0 && !excluded(e) {
				return false
			}
		}
		return true
	case policy.OpPrefix, policy.OpSuffix:
		return kinds == canon.KindString && p.Operand.(string) == ""
	}
	return false
}

// kindsOf is the set of the kinds of the elements of l.
func kindsOf(l []any) canon.Kind {
	var k canon.Kind
	for _, v := range l {
		k |= canon.KindOf(v)
	}
	return k
}

func member(v any, l []any) bool {
	for _, e := range l {
		if policy.Equal(v, e) {
			return true
		}
	}
	return false
}
