package canon

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestMarshal(t *testing.T) {
	t.Parallel()
	s, i64, n, i32, u32, b := "x", int64(-7), 42, int32(-2147483648), uint32(4294967295), true
	var anyV any = map[string]any{"k": "v"}
	strs := []string{"b", "a"}
	strMap := map[string]string{"b": "2", "a": "1"}
	anys := []any{int64(1)}
	anyMap := map[string]any{"z": nil}
	raw := json.RawMessage(`{ "b" : [1, "\u00e9"], "a" : null }`)
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, `null`},
		{"true", true, `true`},
		{"false", false, `false`},
		{"string", "a\"b\\c\n\x01\x7f\u2028é😀/", "\"a\\\"b\\\\c\\n\\u0001\x7f\u2028é😀/\""},
		{"empty string", "", `""`},
		{"int64", int64(-12), `-12`},
		{"int64 max", int64(MaxSafeInt), `9007199254740991`},
		{"int64 min", int64(-MaxSafeInt), `-9007199254740991`},
		{"int", 24900, `24900`},
		{"int32", int32(-5), `-5`},
		{"int32 min", int32(-2147483648), `-2147483648`},
		{"uint32 max", uint32(4294967295), `4294967295`},
		{"slice", []any{int64(3), "a", nil, []any{}, map[string]any{}}, `[3,"a",null,[],{}]`},
		{"map sorted", map[string]any{"b": int64(1), "a": []any{true}, "\ue000": 1, "\U0001F600": 2, "": 3}, "{\"\":3,\"a\":[true],\"b\":1,\"\U0001F600\":2,\"\ue000\":1}"},
		{"map escaped key", map[string]any{"\"q\"\n": 1}, `{"\"q\"\n":1}`},
		{"nested", map[string]any{"o": map[string]any{"y": 1, "x": []any{map[string]any{"d": 1, "c": 2}}}}, `{"o":{"x":[{"c":2,"d":1}],"y":1}}`},
		{"strings", []string{"b", "a"}, `["b","a"]`},
		{"string map", map[string]string{"b": "2", "a": "1", "\t": "t"}, `{"\t":"t","a":"1","b":"2"}`},
		{"raw", raw, `{"a":null,"b":[1,"é"]}`},
		{"raw in map", map[string]any{"r": json.RawMessage(` [2, 1] `), "a": 0}, `{"a":0,"r":[2,1]}`},
		{"nil raw", json.RawMessage(nil), `null`},
		{"nil slice", []any(nil), `null`},
		{"nil strings", []string(nil), `null`},
		{"nil map", map[string]any(nil), `null`},
		{"nil string map", map[string]string(nil), `null`},
		{"ptr string", &s, `"x"`},
		{"ptr int64", &i64, `-7`},
		{"ptr int", &n, `42`},
		{"ptr int32", &i32, `-2147483648`},
		{"ptr uint32", &u32, `4294967295`},
		{"ptr bool", &b, `true`},
		{"ptr any", &anyV, `{"k":"v"}`},
		{"ptr strings", &strs, `["b","a"]`},
		{"ptr string map", &strMap, `{"a":"1","b":"2"}`},
		{"ptr slice", &anys, `[1]`},
		{"ptr map", &anyMap, `{"z":null}`},
		{"ptr raw", &raw, `{"a":null,"b":[1,"é"]}`},
		{"nil ptr string", (*string)(nil), `null`},
		{"nil ptr int64", (*int64)(nil), `null`},
		{"nil ptr any", (*any)(nil), `null`},
		{"nil ptr map", (*map[string]any)(nil), `null`},
		{"nil ptr raw", (*json.RawMessage)(nil), `null`},
		{"ptr in slice", []any{&s, (*int)(nil)}, `["x",null]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Marshal(tt.in)
			if err != nil {
				t.Fatalf("Marshal(%#v) error = %v, want %q", tt.in, err, tt.want)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal(%#v) = %q, want %q", tt.in, got, tt.want)
			}
			if again, err := Canonicalize(got); err != nil || string(again) != string(got) {
				t.Errorf("Canonicalize(%q) = %q, %v, want it unchanged", got, again, err)
			}
		})
	}
}

func TestMarshalRefused(t *testing.T) {
	t.Parallel()
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	deep := "[" + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + "]"
	f := 1.0
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"float64", 1.0, `at (root): unsupported type float64 (numbers must be integers)`},
		{"float32 in map", map[string]any{"amount": float32(2)}, `at /amount: unsupported type float32 (numbers must be integers)`},
		{"float ptr", []any{&f}, `at /0: unsupported type *float64`},
		{"uint64", uint64(1), `at (root): unsupported type uint64`},
		{"int8", int8(1), `at (root): unsupported type int8`},
		{"struct", struct{}{}, `at (root): unsupported type struct {}`},
		{"typed map", map[string]int{"a": 1}, `at (root): unsupported type map[string]int`},
		{"int64 above", int64(MaxSafeInt + 1), `at (root): integer out of safe range 9007199254740992`},
		{"int64 below", []any{int64(-MaxSafeInt - 1)}, `at /0: integer out of safe range -9007199254740992`},
		{"int above", map[string]any{"n": 1 << 60}, `at /n: integer out of safe range 1152921504606846976`},
		{"invalid UTF-8", map[string]any{"a/b": []any{"ok", "\xff"}}, `at /a~1b/1: invalid UTF-8`},
		{"invalid UTF-8 strings", []string{"\xc3"}, `at /0: invalid UTF-8`},
		{"invalid UTF-8 key", map[string]any{"x": map[string]any{"\xff": 1}}, `at /x: invalid UTF-8 in key "\xff"`},
		{"invalid UTF-8 string map", map[string]string{"~": "\xed\xa0\x80"}, `at /~0: invalid UTF-8`},
		{"raw fraction", map[string]any{"r": json.RawMessage(`{"b":[0.5]}`)}, `at /r/b/0: non-integer number 0.5`},
		{"raw syntax", []any{json.RawMessage(`{"b":}`)}, `at /0/b: syntax error at offset 5: invalid character '}' looking for beginning of value`},
		{"raw empty", json.RawMessage{}, `at (root): syntax error at offset 0: unexpected end of input looking for beginning of value`},
		{"raw duplicate", json.RawMessage(`{"a":1,"a":1}`), `at /a: duplicate key "a"`},
		{"raw trailing", json.RawMessage(`1 2`), `at (root): syntax error at offset 2: invalid character '2' after top-level value`},
		{"cycle", cyclic, `at ` + strings.Repeat("/self", maxDepth) + `: nesting deeper than 1000`},
		{"deep raw", []any{json.RawMessage(deep)}, `at /0` + strings.Repeat("/0", maxDepth-1) + `: nesting deeper than 1000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Marshal(tt.in)
			if err == nil {
				t.Fatalf("Marshal(%T) = %q, want error %q", tt.in, got, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Marshal(%T) error = %q, want %q", tt.in, err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) {
				t.Errorf("Marshal(%T) error %T does not match *Error and ErrInvalid", tt.in, err)
			}
			if got != nil {
				t.Errorf("Marshal(%T) bytes = %q, want nil with an error", tt.in, got)
			}
		})
	}
}

// AppendInt writes what Marshal writes for an integer, and refuses what Marshal refuses with the
// same reason.
func TestAppendInt(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 42, -9000, MaxSafeInt, -MaxSafeInt, MaxSafeInt + 1, -MaxSafeInt - 1} {
		got, err := AppendInt([]byte("x"), n)
		want, werr := Marshal(n)
		if (err == nil) != (werr == nil) {
			t.Fatalf("AppendInt(%d) error %v, Marshal error %v", n, err, werr)
		}
		if err != nil {
			var ce, we *Error
			if !errors.As(err, &ce) || !errors.As(werr, &we) || ce.Reason != we.Reason || string(got) != "x" {
				t.Errorf("AppendInt(%d) = %q, %v; want \"x\" and Marshal's reason %v", n, got, err, werr)
			}
			continue
		}
		if string(got) != "x"+string(want) {
			t.Errorf("AppendInt(%d) = %q, want %q", n, got, "x"+string(want))
		}
	}
}
