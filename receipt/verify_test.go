package receipt

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestScanLinks checks the fast reader of seq and prev_hash against json.Unmarshal: where it
// answers, it gives the same answer; where a document is odd, it leaves it to encoding/json.
func TestScanLinks(t *testing.T) {
	t.Parallel()
	h := GenesisHash
	cases := []struct {
		name string
		doc  string
		ok   bool // scanLinks answers
	}{
		{"canonical", `{"action":"a","arguments":{"n":1},"prev_hash":"` + h + `","seq":7}`, true},
		{"whitespace", " {\n\"seq\" : 7 ,\t\"prev_hash\":\"" + h + "\" }\r\n", true},
		{"nested prev_hash and seq", `{"arguments":{"prev_hash":"sha256:bad","seq":9,"x":[{"seq":3}]},"prev_hash":"` + h + `","seq":7}`, true},
		{"nested key in a string", `{"error":"\"prev_hash\":\"x\",\"seq\":9","prev_hash":"` + h + `","seq":7}`, true},
		{"escapes elsewhere", `{"a":"\u00e9\n\\\"","b":[1,-2,3.5e-3,true,false,null,{}],"prev_hash":"` + h + `","seq":0}`, true},
		{"non-ASCII elsewhere", `{"a":"été","prev_hash":"` + h + `","seq":1}`, true},
		{"duplicate seq", `{"prev_hash":"` + h + `","seq":7,"seq":8}`, false},
		{"duplicate prev_hash", `{"prev_hash":"` + h + `","prev_hash":"sha256:x","seq":7}`, false},
		{"folded key", `{"PREV_HASH":"sha256:x","prev_hash":"` + h + `","seq":7}`, false},
		{"folded seq", `{"prev_hash":"` + h + `","seq":7,"Seq":8}`, false},
		{"non-ASCII key", `{"prev_hash":"` + h + `","seq":7,"ſeq":8}`, false},
		{"escaped key", `{"prev_hash":"` + h + `","se\u0071":7}`, false},
		{"escaped prev_hash", `{"prev_hash":"sha256:\u0030","seq":7}`, false},
		{"non-ASCII prev_hash", `{"prev_hash":"sha256:é","seq":7}`, false},
		{"invalid UTF-8 prev_hash", "{\"prev_hash\":\"sha256:\xff\",\"seq\":7}", false},
		{"seq float", `{"prev_hash":"` + h + `","seq":7.0}`, false},
		{"seq exponent", `{"prev_hash":"` + h + `","seq":7e0}`, false},
		{"seq negative", `{"prev_hash":"` + h + `","seq":-7}`, false},
		{"seq string", `{"prev_hash":"` + h + `","seq":"7"}`, false},
		{"seq null", `{"prev_hash":"` + h + `","seq":null}`, false},
		{"seq leading zero", `{"prev_hash":"` + h + `","seq":07}`, false},
		{"seq overflow", `{"prev_hash":"` + h + `","seq":9223372036854775808}`, false},
		{"seq max", `{"prev_hash":"` + h + `","seq":9223372036854775807}`, true},
		{"prev_hash null", `{"prev_hash":null,"seq":7}`, false},
		{"no seq", `{"prev_hash":"` + h + `"}`, false},
		{"no prev_hash", `{"seq":7}`, false},
		{"empty", `{}`, false},
		{"array", `[1]`, false},
		{"trailing text", `{"prev_hash":"` + h + `","seq":7}x`, false},
		{"two objects", `{"prev_hash":"` + h + `","seq":7}{}`, false},
		{"trailing comma", `{"prev_hash":"` + h + `","seq":7,}`, false},
		{"bad nested number", `{"a":01,"prev_hash":"` + h + `","seq":7}`, false},
		{"bad nested literal", `{"a":nul,"prev_hash":"` + h + `","seq":7}`, false},
		{"bad nested escape", `{"a":"\x","prev_hash":"` + h + `","seq":7}`, false},
		{"control character", "{\"a\":\"\x01\",\"prev_hash\":\"" + h + "\",\"seq\":7}", false},
		{"unclosed", `{"prev_hash":"` + h + `","seq":7`, false},
		{"too deep", `{"a":` + strings.Repeat("[", maxScanDepth+2) + strings.Repeat("]", maxScanDepth+2) + `,"prev_hash":"` + h + `","seq":7}`, false},
	}
	for _, c := range cases {
		seq, prev, ok := scanLinks([]byte(c.doc))
		if ok != c.ok {
			t.Errorf("%s: scanLinks(%q) ok = %v, want %v", c.name, c.doc, ok, c.ok)
		}
		if ok {
			wantAgrees(t, []byte(c.doc), seq, prev)
		}
	}
}

// wantAgrees fails unless json.Unmarshal reads doc as seq and prev.
func wantAgrees(t *testing.T, doc []byte, seq int64, prev string) {
	t.Helper()
	var lf linkFields
	if err := json.Unmarshal(doc, &lf); err != nil {
		t.Fatalf("scanLinks(%q) = %d %q, but json.Unmarshal fails: %v", doc, seq, prev, err)
	}
	if lf.Seq != seq || lf.PrevHash != prev {
		t.Fatalf("scanLinks(%q) = %d %q, json.Unmarshal = %d %q", doc, seq, prev, lf.Seq, lf.PrevHash)
	}
}

// FuzzScanLinks: whenever the fast reader answers, encoding/json agrees.
func FuzzScanLinks(f *testing.F) {
	rc := &Receipt{ReceiptID: "rcp_1", Action: "a", Arguments: json.RawMessage(`{"prev_hash":"sha256:x","seq":2}`), Result: Committed}
	s, err := Seal(rc, 3, GenesisHash)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(s.Doc)
	f.Add([]byte(`{"seq":1,"prev_hash":"x","a":[{"b":"\u0041"}]}`))
	f.Add([]byte(`{"seq":1,"Prev_Hash":"x","prev_hash":"y"}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if seq, prev, ok := scanLinks(doc); ok {
			wantAgrees(t, doc, seq, prev)
		}
	})
}

// TestVerifyNestedLink forges a receipt whose top-level prev_hash is wrong but whose arguments
// carry the right one (and a matching seq), its stored hash recomputed: the link is broken.
func TestVerifyNestedLink(t *testing.T) {
	t.Parallel()
	first, err := Seal(&Receipt{ReceiptID: "rcp_1", Action: "a", Result: Committed}, 1, GenesisHash)
	if err != nil {
		t.Fatal(err)
	}
	args := `{"prev_hash":"` + first.Hash + `","seq":2}`
	forged, err := Seal(&Receipt{ReceiptID: "rcp_2", Action: "a", Arguments: json.RawMessage(args), Result: Committed}, 2, "sha256:"+strings.Repeat("1", 64))
	if err != nil {
		t.Fatal(err)
	}
	rows := []Sealed{first, forged}
	rep, err := Verify(func(yield func(Sealed, error) bool) {
		for _, r := range rows {
			if !yield(r, nil) {
				return
			}
		}
	}, Head{Seq: 2, Hash: forged.Hash})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Breaks) != 1 || rep.Breaks[0].Kind != BreakLinkBroken || rep.Breaks[0].Seq != 2 {
		t.Errorf("Verify = %+v, want link_broken at 2", rep)
	}
}

func BenchmarkScanLinks(b *testing.B) {
	rc := &Receipt{ReceiptID: "rcp_" + strings.Repeat("a", 32), ActionID: "act_" + strings.Repeat("b", 32), Action: "billing.charge",
		ActionHash: "sha256:" + strings.Repeat("ab", 32), Arguments: json.RawMessage(`{"amount":24900,"capture":true,"currency":"EUR","customer":"cus_1","invoice_id":"inv_1"}`),
		Resource: "invoice:inv_1", Principal: Principal{Agent: "billing-worker"}, Environment: "production", Decision: "allow",
		DecisionReason: "rule[0]", EffectKey: "charge:inv_1", Attempt: 1, Result: Committed, PolicyHash: "sha256:" + strings.Repeat("cd", 32), Mode: "enforce"}
	s, err := Seal(rc, 1, GenesisHash)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(s.Doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := scanLinks(s.Doc); !ok {
			b.Fatal("scanLinks refused a sealed document")
		}
	}
}
