package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// holdsUniverse is a set of conditions, well-formed and hand-built malformed ones, and argument
// values to try them on.
func holdsUniverse() (Conditions, []any) {
	long := make([]any, 0, 20) // long enough for Eval's hash-set path
	for i := range 10 {
		long = append(long, string(rune('a'+i)), int64(i))
	}
	operands := []any{
		nil, true, false, "", "a", "ab", "b", int64(-1), int64(0), int64(5), int64(6),
		[]any{"a"}, []any{"a", int64(5)}, []any{true, nil}, []any{[]any{"a"}}, long,
		map[string]any{"k": "a"},
	}
	var cs Conditions
	for _, op := range ops {
		for _, o := range operands {
			if c, err := ParseCondition("x_"+string(op), o); err == nil {
				cs = append(cs, c)
			}
		}
	}
	cs = append(cs,
		Condition{Arg: "x", Op: OpGt, Operand: int64(1)},                    // hand-built, no key
		Condition{Key: "x_gte", Operand: int64(1)},                          // key only
		Condition{Key: "x_bogus", Operand: int64(1)},                        // unknown operator
		Condition{Arg: "x", Op: OpLt, Operand: "x"},                         // wrong operand type
		Condition{Arg: "agent", Op: OpEq, Operand: "x"},                     // reserved subject
		Condition{Arg: "x", Op: OpIn, Operand: []any{}},                     // empty list
		Condition{Arg: "x", Op: OpEq, Operand: 5},                           // not a latch value
		Condition{Arg: "x", Op: "like", Operand: "x"},                       // unknown operator
		Condition{Arg: "", Op: OpEq, Operand: "x"},                          // no argument
		Condition{Key: "x_lt", Arg: "x", Op: OpLt, Operand: int64(1 << 60)}, // out of range
	)
	values := append([]any{"abc", "c", int64(2), int64(100), []any{}, map[string]any{}, 5, 1.5}, operands...)
	return cs, values
}

// TestHoldsAgreesWithEval checks that Holds gives Eval's verdict, condition by condition and
// for conditions combined, including malformed and absent ones.
func TestHoldsAgreesWithEval(t *testing.T) {
	t.Parallel()
	cs, values := holdsUniverse()
	for _, c := range cs {
		for _, v := range values {
			args := map[string]any{"x": v}
			want, _ := Conditions{c}.Eval(args)
			if got := (Conditions{c}).Holds(args); got != want {
				t.Errorf("Holds(%+v, x=%#v) = %v, Eval says %v", c, v, got, want)
			}
		}
		if got := (Conditions{c}).Holds(map[string]any{}); got {
			t.Errorf("Holds(%+v) with x absent = true, want false", c)
		}
	}
	for i := 0; i+2 < len(cs); i++ {
		pair := Conditions{cs[i], cs[i+2]}
		for _, v := range values {
			args := map[string]any{"x": v}
			want, _ := pair.Eval(args)
			if got := pair.Holds(args); got != want {
				t.Errorf("Holds(%+v, x=%#v) = %v, Eval says %v", pair, v, got, want)
			}
		}
	}
	if !(Conditions)(nil).Holds(nil) {
		t.Errorf("nil Conditions.Holds = false, want true")
	}
}

func TestHoldsDoesNotAllocate(t *testing.T) {
	cs := Conditions{
		mustCondition(t, "amount_lte", int64(100)),
		mustCondition(t, "currency_in", []any{"EUR", "USD", "GBP", "CHF", "SEK", "NOK", "DKK", "PLN", "CZK"}),
		mustCondition(t, "memo_prefix", "inv-"),
		mustCondition(t, "account_not_in", []any{"frozen"}),
	}
	args := map[string]any{"amount": int64(5), "currency": "CHF", "memo": "inv-1", "account": "a"}
	if !cs.Holds(args) {
		t.Fatalf("Holds = false, want true")
	}
	if n := testing.AllocsPerRun(100, func() { cs.Holds(args) }); n != 0 {
		t.Errorf("Holds allocates %v times per run, want 0", n)
	}
}

// TestResolve checks that Resolve refuses exactly the conditions Eval treats as malformed, and
// resolves the rest the way Eval reads them.
func TestResolve(t *testing.T) {
	t.Parallel()
	cs, _ := holdsUniverse()
	for _, c := range cs {
		_, res := Conditions{c}.Eval(map[string]any{})
		malformed := strings.HasPrefix(res[0].Why, "invalid condition")
		r, err := c.Resolve()
		if (err != nil) != malformed {
			t.Errorf("Resolve(%+v) = %v, but Eval says %q", c, err, res[0].Why)
			continue
		}
		if err != nil {
			if err.Error() != res[0].Why {
				t.Errorf("Resolve(%+v) = %q, want Eval's reason %q", c, err, res[0].Why)
			}
			continue
		}
		if r.Key != res[0].Key || r.Arg == "" || r.Op == "" || !cmp.Equal(r.Operand, c.Operand) {
			t.Errorf("Resolve(%+v) = %+v, want key %q and the argument and operator filled in", c, r, res[0].Key)
		}
	}
	got, err := Condition{Key: "amount_not_in", Operand: []any{int64(1)}}.Resolve()
	want := Condition{Key: "amount_not_in", Arg: "amount", Op: OpNotIn, Operand: []any{int64(1)}}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("Resolve(key only) = %+v, %v; want %+v", got, err, want)
	}
	got, err = Condition{Arg: "x_not", Op: OpIn, Operand: []any{int64(1)}}.Resolve()
	want = Condition{Key: "x_not_in", Arg: "x_not", Op: OpIn, Operand: []any{int64(1)}}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("Resolve(arg and op set) = %+v, %v; want %+v (the fields win over the key)", got, err, want)
	}
}
