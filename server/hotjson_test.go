package server

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/latchkit/latch/receipt"
)

// hotBodies are request bodies of both hot routes: the plain ones the fast reader takes, and
// every kind it must leave to decodeRaw (escapes, duplicates at depth, case variants, nulls,
// numbers of other forms, trailing data, wrong types, malformed JSON).
var hotBodies = []string{
	`{"action":"bench.charge","arguments":{"invoice_id":"x_1","amount":24900,"currency":"EUR","customer":"cus_1","capture":true}}`,
	` {"action" : "billing.charge" , "arguments" : { "a" : [ 1 , 2.5 , -3e2 , true , false , null , "s\"\\\/\b\f\n\r\t\u00e9" ] } } `,
	`{"action":"a","arguments":{},"resource":"r","approval_id":"apr_1","wait_seconds":5,"task":"t","hop":"h"}`,
	`{"action":"a","arguments":[],"wait_seconds":-1}`,
	`{"action":"a","arguments":"s","wait_seconds":0}`,
	`{"action":"a","arguments":0}`,
	`{"action":"a","arguments":-0.0e+0}`,
	`{"action":"é","arguments":{"ü":"ß"}}`,
	`{}`,
	`{"action":"a"}`,
	`{"arguments":{"a":{"b":{"c":[{"d":1},{"d":2}]}}}}`,
	`{"action":"a","arguments":{"a":1,"a":2}}`,
	`{"action":"a","arguments":{"m":{"lines":[{"sku":"a"},{"sku":"a","sku":"b"}]}}}`,
	`{"action":"a","action":"b"}`,
	`{"action":"a","ACTION":"b"}`,
	`{"Action":"a"}`,
	`{"action":"a","Wait_Seconds":5}`,
	`{"action":"a\u0062"}`,
	`{"act\u0069on":"a"}`,
	`{"action":"a","arguments":{"\u0061":1,"a":2}}`,
	`{"action":null}`,
	`{"action":"a","arguments":null}`,
	`{"action":"a","wait_seconds":5.0}`,
	`{"action":"a","wait_seconds":5e0}`,
	`{"action":"a","wait_seconds":05}`,
	`{"action":"a","wait_seconds":99999999999999999999}`,
	`{"action":"a","wait_seconds":"5"}`,
	`{"action":5}`,
	`{"action":"a"} {"action":"b"}`,
	`{"action":"a"}x`,
	`{"action":"a",}`,
	`{"action":"a" "arguments":{}}`,
	`{"action":"a","arguments":{"a":01}}`,
	`{"action":"a","arguments":{"a":1.}}`,
	`{"action":"a","arguments":{"a":"\x"}}`,
	`{"action":"a","arguments":{"a":"` + "\x01" + `"}}`,
	`{"action":"a` + "\xff" + `"}`,
	`{"action":"a","arguments":{"a":"` + "\xff" + `"}}`,
	`[]`,
	`"action"`,
	`null`,
	``,
	`{"action":"a","arguments":{"a":[1,2,]}}`,
	`{"action":"a","arguments":{"a":tru}}`,
	`{"action":"a","arguments":{"a":1}`,
	`{"outcome":"committed"}`,
	`{"outcome":"committed","result":{"charge":"ch_1","n":[1,{"x":null}]},"error":""}`,
	`{"outcome":"not_executed","error":"card declined"}`,
	`{"outcome":"committed","result":null}`,
	`{"outcome":"committed","result":{"charge":"ch_1","charge":"ch_2"}}`,
	`{"outcome":"committed","OUTCOME":"failed"}`,
	`{"outcome":"failed","outcome":"committed"}`,
	`{"outcome":"unknown","error":"timeout \"x\""}`,
	`{"outcome":"committed","extra":1}`,
}

// TestHotDecodeAgreesWithDecode: every body the fast readers take is one decodeRaw accepts,
// read to the same value; every other body is left to decodeRaw. Besides the bodies above, it
// tries many random mutations of them (bytes changed, inserted, removed).
func TestHotDecodeAgreesWithDecode(t *testing.T) {
	t.Parallel()
	check := func(body []byte) (hotA, hotO bool) {
		t.Helper()
		var ha, sa actionRequest
		hotA = ha.decodeHot(body)
		if p := decodeRaw(body, &sa, false); hotA && p != nil {
			t.Errorf("actionRequest: fast reader took %q, decodeRaw refuses it: %s %s", body, p.Type, p.Detail)
		} else if hotA && !reflect.DeepEqual(ha, sa) {
			t.Errorf("actionRequest %q: fast reader read %+v, decodeRaw %+v", body, ha, sa)
		}
		var ho, so outcomeRequest
		hotO = ho.decodeHot(body)
		if p := decodeRaw(body, &so, false); hotO && p != nil {
			t.Errorf("outcomeRequest: fast reader took %q, decodeRaw refuses it: %s %s", body, p.Type, p.Detail)
		} else if hotO && !reflect.DeepEqual(ho, so) {
			t.Errorf("outcomeRequest %q: fast reader read %+v, decodeRaw %+v", body, ho, so)
		}
		return hotA, hotO
	}
	took := 0
	for _, b := range hotBodies {
		a, o := check([]byte(b))
		if a || o {
			took++
		}
	}
	// The plain bodies are the ones the fast readers exist for: they must take them.
	for _, b := range []string{hotBodies[0], hotBodies[1], hotBodies[2], `{"outcome":"committed"}`, hotBodies[46]} {
		var a actionRequest
		var o outcomeRequest
		if !a.decodeHot([]byte(b)) && !o.decodeHot([]byte(b)) {
			t.Errorf("no fast reader took the plain body %s", b)
		}
	}
	if took < 12 {
		t.Errorf("the fast readers took %d of the bodies, want the plain ones (at least 12)", took)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "{}[]\":,\\ -+.0123456789eEtrufalsn\x00\x1f\x7f\xc3\xa9\xffabu"
	for range 200000 {
		b := []byte(hotBodies[rng.IntN(len(hotBodies))])
		for range 1 + rng.IntN(3) {
			switch i := rng.IntN(len(b) + 1); rng.IntN(3) {
			case 0: // change a byte
				if i < len(b) {
					b[i] = alphabet[rng.IntN(len(alphabet))]
				}
			case 1: // insert one
				b = append(b[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
			case 2: // remove one
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			}
		}
		check(b)
	}
}

// FuzzHotDecode holds the fast readers to decodeRaw on any body.
func FuzzHotDecode(f *testing.F) {
	for _, b := range hotBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var ha, sa actionRequest
		if ha.decodeHot(body) {
			if p := decodeRaw(body, &sa, false); p != nil || !reflect.DeepEqual(ha, sa) {
				t.Errorf("actionRequest %q: fast %+v, decodeRaw %+v (%v)", body, ha, sa, p)
			}
		}
		var ho, so outcomeRequest
		if ho.decodeHot(body) {
			if p := decodeRaw(body, &so, false); p != nil || !reflect.DeepEqual(ho, so) {
				t.Errorf("outcomeRequest %q: fast %+v, decodeRaw %+v (%v)", body, ho, so, p)
			}
		}
	})
}

// encodeStd is v as writeJSON writes it with encoding/json.
func encodeStd(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hotStrings are strings that need every kind of escape encoding/json writes.
var hotStrings = []string{
	"", "plain", `quote " and backslash \`, "<html> & 'x'", "ctl \x00\x01\x1f\b\f\n\r\t end", "é ü ß 日本",
	"bad \xff utf8 \xc3", "line \u2028 para \u2029", "\x7f del", "emoji 😀",
}

// TestHotEncodeAgreesWithJSON: the answers of the hot routes are written byte for byte as
// encoding/json writes them, for every field set or null and every kind of string.
func TestHotEncodeAgreesWithJSON(t *testing.T) {
	t.Parallel()
	ptr := func(s string) *string { return &s }
	n := 3
	var cases []any
	for _, s := range hotStrings {
		cases = append(cases,
			&actionJSON{Status: "reserved", ActionID: "act_" + s, Action: s, ActionHash: "sha256:" + s,
				Arguments: json.RawMessage(`{"a":"` + "x" + `","b":[1,2,{"c":null}]}`), Resource: ptr(s),
				Principal: principalJSON{Agent: ptr(s), User: ptr(s)}, EffectKey: ptr(s), Attempt: &n,
				IdempotencyToken: ptr(s), EffectToken: ptr(s), LeaseExpiresAt: ptr(s), ApprovalID: ptr(s),
				Decision: s, Reason: s, Receipt: json.RawMessage(`{"r":"` + "\\u00e9 <&>" + `"}`), ReceiptHash: s},
			&actionJSON{Status: s, Arguments: json.RawMessage(" { \"a\" : [ 1 , \"x y\" ] } ")},
			&actionJSON{Status: "allowed", Arguments: nil, Decision: "allow"},
			&recorded{Status: "recorded", ActionID: s, Result: s, Error: ptr(s), Receipt: json.RawMessage(`{"doc":"` + "a\\\"b" + `"}`), ReceiptHash: s},
			&recorded{Status: "recorded", Receipt: json.RawMessage("{\n\t\"a\": 1\n}")},
			&recorded{Status: "recorded"},
		)
	}
	for _, v := range cases {
		want := encodeStd(t, v)
		got, ok := v.(hotEncoder).appendJSON(nil)
		if !ok {
			t.Errorf("appendJSON(%+v) declined", v)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("appendJSON(%+v)\n got %s\nwant %s", v, got, want)
		}
	}
	// A would_have, and a raw value that is not JSON, are left to encoding/json.
	if _, ok := (&actionJSON{WouldHave: &receipt.WouldHave{}}).appendJSON(nil); ok {
		t.Error("appendJSON wrote an answer with would_have")
	}
	if _, ok := (&recorded{Receipt: json.RawMessage(`{"a": }`)}).appendJSON(nil); ok {
		t.Error("appendJSON wrote a receipt that is not JSON")
	}
	// Every string of one byte, and random ones, escape as encoding/json escapes them.
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20000 {
		var s []byte
		if i < 256 {
			s = []byte{byte(i)}
		} else {
			for range rng.IntN(12) {
				s = append(s, byte(rng.IntN(256)))
			}
		}
		want := encodeStd(t, string(s))
		got := append(appendString(nil, string(s)), '\n')
		if !bytes.Equal(got, want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

// fillAll sets every field of the struct v points to, recursively, to a value that is not its
// zero value — except a pointer to a struct (a would_have), which the hand-written encoders
// hand to encoding/json — and fails on a field of a kind it does not know, so that a field
// added to a hot route's answer is encoded here before the encoders can drop it.
func fillAll(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	for i := range v.NumField() {
		f, name := v.Field(i), path+"."+v.Type().Field(i).Name
		switch {
		case f.Type() == reflect.TypeFor[json.RawMessage]():
			f.SetBytes([]byte(`{"set":"` + name + `"}`))
		case f.Kind() == reflect.String:
			f.SetString("set " + name)
		case f.Kind() == reflect.Struct:
			fillAll(t, f, name)
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct:
			// left nil: the encoders decline an answer that has one
		case f.Kind() == reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			switch p.Elem().Kind() {
			case reflect.String:
				p.Elem().SetString("set " + name)
			case reflect.Int:
				p.Elem().SetInt(7)
			default:
				t.Fatalf("%s: a field of type %s: teach fillAll and the hand-written encoder", name, f.Type())
			}
			f.Set(p)
		default:
			t.Fatalf("%s: a field of type %s: teach fillAll and the hand-written encoder", name, f.Type())
		}
	}
}

// TestHotEncodeWritesEveryField: every field of the hot routes' answers, set, is written as
// encoding/json writes it — a field added to actionJSON or recorded and not to appendJSON fails
// here, whether or not another test sets it.
func TestHotEncodeWritesEveryField(t *testing.T) {
	t.Parallel()
	for _, v := range []hotEncoder{&actionJSON{}, &recorded{}} {
		fillAll(t, reflect.ValueOf(v).Elem(), reflect.TypeOf(v).Elem().Name())
		got, ok := v.appendJSON(nil)
		if want := encodeStd(t, v); !ok || !bytes.Equal(got, want) {
			t.Errorf("appendJSON(%T) = %s (%v)\nwant %s", v, got, ok, want)
		}
	}
}
