package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseConditionSplitsOnLongestOperator(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key     string
		operand any
		arg     string
		op      Op
	}{
		{"amount_not_in", []any{int64(1)}, "amount", OpNotIn},
		{"amount_in", []any{int64(1)}, "amount", OpIn},
		{"not_in", []any{int64(1)}, "not", OpIn},
		{"x_not_in_in", []any{int64(1)}, "x_not_in", OpIn},
		{"amount_lte", int64(1), "amount", OpLte},
		{"amount_lt", int64(1), "amount", OpLt},
		{"a_gte_gt", int64(1), "a_gte", OpGt},
		{"ref_neq", "x", "ref", OpNeq},
		{"ref_eq", "x", "ref", OpEq},
		{"ref__eq", "x", "ref_", OpEq},
		{"ref_prefix", "x", "ref", OpPrefix},
		{"ref_suffix", "x", "ref", OpSuffix},
		{"user_name_eq", "x", "user_name", OpEq}, // only the exact subject (or subject.…) is reserved
		{"Agent_eq", "x", "Agent", OpEq},
		{"agents_eq", "x", "agents", OpEq},
	}
	for _, tt := range tests {
		got, err := ParseCondition(tt.key, tt.operand)
		want := Condition{Key: tt.key, Arg: tt.arg, Op: tt.op, Operand: tt.operand}
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("ParseCondition(%q, %v) = %+v, %v; want %+v", tt.key, tt.operand, got, err, want)
		}
	}
}

func TestParseConditionRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key     string
		operand any
		msg     string
	}{
		{"amount", int64(1), "unknown operator"},
		{"amount_between", int64(1), "unknown operator"},
		{"_eq", int64(1), "empty argument name"},
		{"agent_eq", "a", `reserved subject "agent"`},
		{"claims[0]_eq", "a", `reserved subject "claims"`},
		{"environment/x_eq", "a", `reserved subject "environment"`},
		{"amount_lt", "5", "expected an integer"},
		{"amount_lt", true, "expected an integer"},
		{"amount_lt", 5, "not a latch value"}, // an int, not an int64
		{"amount_lt", int64(1 << 53), "outside ±(2^53-1)"},
		{"amount_in", "x", "expected a non-empty list"},
		{"amount_in", []any{}, "expected a non-empty list"},
		{"amount_in", []string{"x"}, "not a latch value"},
		{"ref_prefix", nil, "expected a string"},
		{"ref_neq", nil, "neq null can never hold"},
		{"ref_eq", 1.5, "not a latch value"},
		{"ref_eq", "\xff", "invalid UTF-8"},
		{"ref_eq", cyclic(), "nesting deeper than 64 levels"},
	}
	for _, tt := range tests {
		if _, err := ParseCondition(tt.key, tt.operand); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseCondition(%q, %#v) = %v, want an error containing %q", tt.key, tt.operand, err, tt.msg)
		}
	}
}

// cyclic returns a list that contains itself.
func cyclic() []any {
	l := []any{nil}
	l[0] = l
	return l
}

func mustCondition(t *testing.T, key string, operand any) Condition {
	t.Helper()
	c, err := ParseCondition(key, operand)
	if err != nil {
		t.Fatalf("ParseCondition(%q, %v) = %v", key, operand, err)
	}
	return c
}

func TestConditionsEval(t *testing.T) {
	t.Parallel()
	list := []any{"EUR", "USD", int64(5), true, nil, []any{int64(1)}, map[string]any{"a": "b"}}
	long := make([]any, 0, 20) // long enough for the hash-set path
	for i := range 10 {
		long = append(long, string(rune('a'+i)), int64(i))
	}
	args := map[string]any{
		"amount": int64(500),
		"text":   "refs/heads/main",
		"five":   "5",
		"flag":   true,
		"one":    int64(1),
		"null":   nil,
		"list":   []any{int64(1), "a", []any{}},
		"obj":    map[string]any{"k": []any{int64(1), map[string]any{"x": nil}}},
		"letter": "c",
		"digit":  int64(7),
		"float":  1.5,
		"int":    5,
	}
	tests := []struct {
		key     string
		operand any
		held    bool
		why     string
	}{
		// eq / neq: type-strict, recursive.
		{"amount_eq", int64(500), true, "500 == 500"},
		{"amount_eq", int64(501), false, "500 != 501"},
		{"amount_eq", "500", false, `argument "amount" is an integer, want a string`},
		{"five_eq", int64(5), false, `argument "five" is a string, want an integer`},
		{"five_eq", "5", true, `"5" == "5"`},
		{"flag_eq", int64(1), false, `argument "flag" is a boolean, want an integer`},
		{"one_eq", true, false, `argument "one" is an integer, want a boolean`},
		{"flag_eq", true, true, "true == true"},
		{"null_eq", nil, true, "null == null"},
		{"amount_eq", nil, false, `argument "amount" is an integer, want null`},
		{"list_eq", []any{int64(1), "a", []any{}}, true, `[1,"a",[]] == [1,"a",[]]`},
		{"list_eq", []any{"1", "a", []any{}}, false, `[1,"a",[]] != ["1","a",[]]`},
		{"list_eq", []any{int64(1), "a"}, false, `[1,"a",[]] != [1,"a"]`},
		{"obj_eq", map[string]any{"k": []any{int64(1), map[string]any{"x": nil}}}, true, `{"k":[1,{"x":null}]} == {"k":[1,{"x":null}]}`},
		{"obj_eq", map[string]any{"k": []any{int64(1), map[string]any{"x": false}}}, false, `{"k":[1,{"x":null}]} != {"k":[1,{"x":false}]}`},
		{"obj_eq", map[string]any{"j": []any{int64(1), map[string]any{"x": nil}}}, false, `{"k":[1,{"x":null}]} != {"j":[1,{"x":null}]}`},
		{"amount_neq", int64(1), true, "500 != 1"},
		{"amount_neq", int64(500), false, "500 == 500"},
		{"amount_neq", "x", false, `argument "amount" is an integer, want a string`},
		{"missing_neq", "x", false, `argument "missing" is absent`},
		{"missing_eq", nil, false, `argument "missing" is absent`},

		// in / not_in: type-strict membership.
		{"text_in", []any{"a", "refs/heads/main"}, true, `"refs/heads/main" in ["a","refs/heads/main"]`},
		{"five_in", list, false, `"5" not in ["EUR","USD",5,true,null,[1],{"a":"b"}]`},
		{"amount_in", list, false, `500 not in ["EUR","USD",5,true,null,[1],{"a":"b"}]`},
		{"flag_in", list, true, `true in ["EUR","USD",5,true,null,[1],{"a":"b"}]`},
		{"null_in", list, true, `null in ["EUR","USD",5,true,null,[1],{"a":"b"}]`},
		{"one_in", []any{[]any{int64(1)}}, false, `argument "one" is an integer, want a list`},
		{"list_in", []any{[]any{int64(1), "a", []any{}}}, true, `[1,"a",[]] in [[1,"a",[]]]`},
		{"obj_in", []any{map[string]any{"k": []any{int64(1), map[string]any{"x": nil}}}}, true, `{"k":[1,{"x":null}]} in [{"k":[1,{"x":null}]}]`},
		{"five_in", []any{int64(5)}, false, `argument "five" is a string, want an integer`},
		{"one_in", []any{true}, false, `argument "one" is an integer, want a boolean`},
		{"flag_in", []any{int64(1)}, false, `argument "flag" is a boolean, want an integer`},
		{"letter_in", long, true, `"c" in ["a",0,"b",1,"c",2,"d",3,"e",4,"f",5,"g",6,"h",7,"i",8,"j",9]`},
		{"digit_in", long, true, `7 in ["a",0,"b",1,"c",2,"d",3,"e",4,"f",5,"g",6,"h",7,"i",8,"j",9]`},
		{"text_in", long, false, `"refs/heads/main" not in ["a",0,"b",1,"c",2,"d",3,"e",4,"f",5,"g",6,"h",7,"i",8,"j",9]`},
		{"text_not_in", []any{"a"}, true, `"refs/heads/main" not in ["a"]`},
		{"text_not_in", []any{"refs/heads/main"}, false, `"refs/heads/main" in ["refs/heads/main"]`},
		{"amount_not_in", []any{"a"}, false, `argument "amount" is an integer, want a string`},
		{"missing_not_in", []any{"a"}, false, `argument "missing" is absent`},

		// Comparisons: integers only.
		{"amount_lt", int64(501), true, "500 < 501"},
		{"amount_lt", int64(500), false, "500 >= 500"},
		{"amount_lte", int64(500), true, "500 <= 500"},
		{"amount_lte", int64(499), false, "500 > 499"},
		{"amount_gt", int64(499), true, "500 > 499"},
		{"amount_gt", int64(500), false, "500 <= 500"},
		{"amount_gte", int64(500), true, "500 >= 500"},
		{"amount_gte", int64(501), false, "500 < 501"},
		{"five_lt", int64(10), false, `argument "five" is a string, want an integer`},
		{"flag_gte", int64(0), false, `argument "flag" is a boolean, want an integer`},
		{"null_gte", int64(0), false, `argument "null" is null, want an integer`},
		{"float_gte", int64(0), false, `argument "float" is a Go float64 (not a latch value), want an integer`},
		{"int_gte", int64(0), false, `argument "int" is a Go int (not a latch value), want an integer`},
		{"missing_lt", int64(0), false, `argument "missing" is absent`},

		// prefix / suffix: strings only.
		{"text_prefix", "refs/heads/", true, `"refs/heads/main" has prefix "refs/heads/"`},
		{"text_prefix", "refs/tags/", false, `"refs/heads/main" does not have prefix "refs/tags/"`},
		{"text_suffix", "/main", true, `"refs/heads/main" has suffix "/main"`},
		{"text_suffix", "/dev", false, `"refs/heads/main" does not have suffix "/dev"`},
		{"amount_prefix", "5", false, `argument "amount" is an integer, want a string`},
		{"list_suffix", "]", false, `argument "list" is a list, want a string`},
		{"missing_prefix", "", false, `argument "missing" is absent`},
	}
	for _, tt := range tests {
		c := Conditions{mustCondition(t, tt.key, tt.operand)}
		held, res := c.Eval(args)
		want := []CondResult{{Key: tt.key, Held: tt.held, Why: tt.why}}
		if held != tt.held || !cmp.Equal(res, want) {
			t.Errorf("Eval(%s: %v) = %v, %+v; want %v, %+v", tt.key, tt.operand, held, res, tt.held, want)
		}
	}
}

func TestConditionsEvalAll(t *testing.T) {
	t.Parallel()
	cs := Conditions{mustCondition(t, "a_gte", int64(0)), mustCondition(t, "b_eq", "x"), mustCondition(t, "a_lte", int64(10))}
	held, res := cs.Eval(map[string]any{"a": int64(5), "b": "y"})
	want := []CondResult{
		{Key: "a_gte", Held: true, Why: "5 >= 0"},
		{Key: "b_eq", Held: false, Why: `"y" != "x"`},
		{Key: "a_lte", Held: true, Why: "5 <= 10"}, // evaluated even after a failure: the trace is complete
	}
	if held || !cmp.Equal(res, want) {
		t.Errorf("Eval = %v, %+v; want false, %+v", held, res, want)
	}
	if held, res := (Conditions)(nil).Eval(nil); !held || res != nil {
		t.Errorf("nil Conditions.Eval = %v, %v; want true, nil", held, res)
	}
	// Hand-built conditions: Key is derived, a malformed one never holds.
	hand := Conditions{
		{Arg: "a", Op: OpGt, Operand: int64(1)},
		{Key: "a_bogus", Operand: int64(1)},
		{Arg: "a", Op: OpLt, Operand: "x"},
		{Arg: "agent", Op: OpEq, Operand: "bot"},
		{Arg: "a", Op: "like", Operand: "x"},
	}
	held, res = hand.Eval(map[string]any{"a": int64(5), "agent": "bot"})
	if held || !res[0].Held || res[0].Key != "a_gt" {
		t.Errorf("hand-built Eval = %v, %+v; want only the first to hold", held, res)
	}
	for _, r := range res[1:] {
		if r.Held || !strings.HasPrefix(r.Why, "invalid condition") {
			t.Errorf("hand-built Eval result %+v, want not held, invalid condition", r)
		}
	}
}

func TestValueTextIsCapped(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 100)
	c := Conditions{mustCondition(t, "s_eq", "x")}
	_, res := c.Eval(map[string]any{"s": long})
	if len(res[0].Why) > 6*textLimit+20 || !strings.Contains(res[0].Why, "…") {
		t.Errorf("Eval why = %q, want it capped", res[0].Why)
	}
	big := make([]any, 100)
	for i := range big {
		big[i] = int64(i)
	}
	if s := valueText(big); len(s) > textLimit+20 || !strings.HasSuffix(s, "…") {
		t.Errorf("valueText(100 ints) = %q, want it capped", s)
	}
}

func TestStricter(t *testing.T) {
	t.Parallel()
	tests := []struct{ a, b, want Decision }{
		{Allow, Allow, Allow},
		{Allow, Approve, Approve},
		{Approve, Allow, Approve},
		{Approve, Approve, Approve},
		{Allow, Deny, Deny},
		{Deny, Allow, Deny},
		{Approve, Deny, Deny},
		{Deny, Deny, Deny},
		{"", Allow, Deny},
		{Allow, "permit", Deny},
	}
	for _, tt := range tests {
		if got := Stricter(tt.a, tt.b); got != tt.want {
			t.Errorf("Stricter(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}
