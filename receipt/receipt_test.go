package receipt_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/receipt"
)

func sample(i int) *receipt.Receipt {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
	return &receipt.Receipt{
		ReceiptID: fmt.Sprintf("rcp_%032x", i), ActionID: fmt.Sprintf("act_%032x", i), Action: "billing.charge",
		ActionHash: "sha256:" + strings.Repeat("ab", 32), Arguments: json.RawMessage(fmt.Sprintf(`{"amount":%d,"invoice_id":"inv_%d"}`, 100+i, i)),
		Resource: "invoice:inv_1", Principal: receipt.Principal{Agent: "billing-worker"}, Environment: "production",
		Decision: "allow", DecisionReason: "rule[0]", EffectKey: fmt.Sprintf("charge:inv_%d", i), Attempt: 1,
		Result: receipt.Committed, StartedAt: t0, FinishedAt: t0.Add(3 * time.Millisecond), PolicyHash: "sha256:" + strings.Repeat("cd", 32), Mode: "enforce",
	}
}

// enveloped is sample(i) with every schema v3 member set: a call under a break-glass
// delegation, charged against two budgets, on a task, scope-checked.
func enveloped(i int) *receipt.Receipt {
	r := sample(i)
	r.Authority = &receipt.Authority{GrantID: "oncall", DelegationID: fmt.Sprintf("dlg_%032x", i), BreakGlass: "sev1"}
	r.BudgetCharges = []receipt.BudgetCharge{
		{Budget: "oncall", Metric: "amount_cents", Amount: int64(100 + i), Limit: 50000, Window: "P1D"},
		{Budget: "oncall", Metric: "count", Amount: 1, Limit: 20, Window: "PT1H"},
	}
	r.Task = "ticket:INC-" + fmt.Sprint(i)
	r.ScopeHash = "sha256:" + strings.Repeat("ef", 32)
	return r
}

// TestEnvelopeRoundTrip: the schema v3 members a call's envelope adds are written in canonical
// order (the same bytes canon.Marshal writes for the document), parse back to what was sealed,
// and are null on a call without an envelope.
func TestEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	r := enveloped(7)
	s, err := receipt.Seal(r, 1, receipt.GenesisHash)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := r.Document()
	if err != nil {
		t.Fatal(err)
	}
	want, err := canon.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Doc) != string(want) {
		t.Fatalf("Seal wrote\n%s\nwant (canon.Marshal)\n%s", s.Doc, want)
	}
	got, err := receipt.Parse(s.Doc)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.BudgetCharges, got.BudgetCharges); diff != "" {
		t.Errorf("budget_charges round trip (-sealed +parsed):\n%s", diff)
	}
	if got.Task != r.Task || got.ScopeHash != r.ScopeHash || got.Authority == nil || *got.Authority != *r.Authority {
		t.Errorf("Parse = task %q, scope_hash %q, authority %+v; want %q, %q, %+v", got.Task, got.ScopeHash, got.Authority, r.Task, r.ScopeHash, r.Authority)
	}
	plain, err := receipt.Seal(sample(8), 2, s.Hash)
	if err != nil {
		t.Fatal(err)
	}
	for _, member := range []string{`"budget_charges":null`, `"task":null`, `"scope_hash":null`} {
		if !strings.Contains(string(plain.Doc), member) {
			t.Errorf("a call without an envelope: document lacks %s:\n%s", member, plain.Doc)
		}
	}
	change := sample(9)
	change.Kind = receipt.KindResolution
	rec, err := receipt.Seal(change, 3, plain.Hash)
	if err != nil {
		t.Fatal(err)
	}
	for _, member := range []string{"budget_charges", "task", "scope_hash"} {
		if strings.Contains(string(rec.Doc), `"`+member+`"`) {
			t.Errorf("a resolution record carries %s:\n%s", member, rec.Doc)
		}
	}
}

func chain(t testing.TB, n int) ([]receipt.Sealed, receipt.Head) {
	t.Helper()
	var rows []receipt.Sealed
	head := receipt.Head{}
	for i := 1; i <= n; i++ {
		seq, prev := receipt.Next(head)
		s, err := receipt.Seal(sample(i), seq, prev)
		if err != nil {
			t.Fatalf("Seal(%d): %v", i, err)
		}
		rows = append(rows, s)
		head = receipt.Head{Seq: s.Seq, Hash: s.Hash}
	}
	return rows, head
}

func seq(rows []receipt.Sealed) iter.Seq2[receipt.Sealed, error] {
	return func(yield func(receipt.Sealed, error) bool) {
		for _, r := range rows {
			if !yield(r, nil) {
				return
			}
		}
	}
}

func breaks(t *testing.T, rows []receipt.Sealed, head receipt.Head) []string {
	t.Helper()
	rep, err := receipt.Verify(seq(rows), head)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	var got []string
	for _, b := range rep.Breaks {
		got = append(got, fmt.Sprintf("%s@%d", b.Kind, b.Seq))
	}
	if rep.OK != (len(got) == 0) {
		t.Errorf("OK = %v with breaks %v", rep.OK, got)
	}
	return got
}

func TestSealDocument(t *testing.T) {
	t.Parallel()
	rows, _ := chain(t, 2)
	var doc map[string]any
	if err := json.Unmarshal(rows[1].Doc, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema"] != receipt.Schema || doc["seq"] != float64(2) || doc["prev_hash"] != rows[0].Hash ||
		doc["started_at"] != "2026-11-29T10:00:02.000Z" || doc["approval_id"] != nil || doc["attempt"] != float64(1) {
		t.Errorf("document = %s", rows[1].Doc)
	}
	if first := rows[0]; !bytes.Contains(first.Doc, []byte(`"prev_hash":"`+receipt.GenesisHash+`"`)) {
		t.Errorf("receipt 1 does not link to the genesis hash: %s", first.Doc)
	}
	again, err := receipt.Seal(sample(2), 2, rows[0].Hash)
	if err != nil || again.Hash != rows[1].Hash {
		t.Errorf("Seal is not deterministic: %s vs %s (%v)", again.Hash, rows[1].Hash, err)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		tamper func(rows []receipt.Sealed, head receipt.Head) ([]receipt.Sealed, receipt.Head)
		want   []string
	}{
		{"intact", func(r []receipt.Sealed, h receipt.Head) ([]receipt.Sealed, receipt.Head) { return r, h }, nil},
		{"edit 2", func(r []receipt.Sealed, h receipt.Head) ([]receipt.Sealed, receipt.Head) {
			r[1].Doc = bytes.Replace(r[1].Doc, []byte(`"amount":102`), []byte(`"amount":999`), 1)
			return r, h
		}, []string{"content_altered@2"}},
		{"edit 2 and its hash", func(r []receipt.Sealed, h receipt.Head) ([]receipt.Sealed, receipt.Head) {
			forged, _ := receipt.Seal(func() *receipt.Receipt { x := sample(2); x.Result = receipt.Failed; return x }(), 2, r[0].Hash)
			r[1] = forged
			return r, h
		}, []string{"link_broken@3"}},
		{"delete 2", func(r []receipt.Sealed, h receipt.Head) ([]receipt.Sealed, receipt.Head) {
			return append(r[:1:1], r[2:]...), h
		}, []string{"missing@2"}},
		{"delete last", func(r []receipt.Sealed, h receipt.Head) ([]receipt.Sealed, receipt.Head) { return r[:4], h }, []string{"head_mismatch@5"}},
		{"swap 2 and 3", func(r []receipt.Sealed, h receipt.Head) ([]receipt.Sealed, receipt.Head) {
			r[1], r[2] = r[2], r[1]
			r[1].Seq, r[2].Seq = 2, 3
			return r, h
		}, []string{"content_altered@2", "content_altered@3", "link_broken@4"}},
		{"head moved", func(r []receipt.Sealed, h receipt.Head) ([]receipt.Sealed, receipt.Head) {
			return r, receipt.Head{Seq: h.Seq, Hash: r[3].Hash}
		}, []string{"head_mismatch@5"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rows, head := chain(t, 5)
			rows, head = tc.tamper(rows, head)
			if diff := cmp.Diff(tc.want, breaks(t, rows, head)); diff != "" {
				t.Errorf("breaks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVerifyEmpty(t *testing.T) {
	t.Parallel()
	rep, err := receipt.Verify(seq(nil), receipt.Head{})
	if err != nil || !rep.OK || rep.Verified != 0 {
		t.Errorf("Verify(empty) = %+v, %v", rep, err)
	}
	rows, _ := chain(t, 1)
	if got := breaks(t, nil, receipt.Head{Seq: 1, Hash: rows[0].Hash}); len(got) != 1 || got[0] != "head_mismatch@1" {
		t.Errorf("all rows deleted: breaks %v, want head_mismatch@1", got)
	}
}

// FuzzTamper flips one byte of one receipt: the chain must never still verify.
func FuzzTamper(f *testing.F) {
	f.Add(uint8(1), uint16(10), uint8(1))
	f.Add(uint8(3), uint16(200), uint8(0x20))
	rows, head := chain(f, 4)
	f.Fuzz(func(t *testing.T, which uint8, at uint16, flip uint8) {
		if flip == 0 {
			return
		}
		tampered := append([]receipt.Sealed(nil), rows...)
		i := int(which) % len(tampered)
		doc := append([]byte(nil), tampered[i].Doc...)
		doc[int(at)%len(doc)] ^= flip
		tampered[i].Doc = doc
		rep, err := receipt.Verify(seq(tampered), head)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK {
			t.Fatalf("a flipped byte in receipt %d verified", i+1)
		}
		if b := rep.Breaks[0]; b.Kind != receipt.BreakContentAltered || b.Seq != int64(i+1) {
			t.Fatalf("breaks = %+v, want content_altered at %d first", rep.Breaks, i+1)
		}
	})
}

func BenchmarkSeal(b *testing.B) {
	r := sample(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := receipt.Seal(r, 1, receipt.GenesisHash); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	rows, head := chain(b, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rep, err := receipt.Verify(seq(rows), head)
		if err != nil || !rep.OK {
			b.Fatal(rep, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/receipt")
}

func TestParseRoundTrip(t *testing.T) {
	t.Parallel()
	in := sample(7)
	in.Authority = &receipt.Authority{GrantID: "finance"}
	in.WouldHave = &receipt.WouldHave{Decision: "deny", Reason: "unknown_action"}
	in.ApprovalID, in.Approver, in.Error = "apr_1", "alice", "boom"
	in.Kind = receipt.KindCall
	s, err := receipt.Seal(in, 3, receipt.GenesisHash)
	if err != nil {
		t.Fatal(err)
	}
	got, err := receipt.Parse(s.Doc)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("Parse(Seal(r)) differs (-want +got):\n%s", diff)
	}
	again, err := receipt.Seal(got, 3, receipt.GenesisHash)
	if err != nil || again.Hash != s.Hash {
		t.Errorf("re-sealing the parsed receipt gives %s, want %s (%v)", again.Hash, s.Hash, err)
	}
}

// TestParseRefusesCallFieldsElsewhere: a record of another kind that carries a field only a
// call's receipt has (one Seal never writes for it, so it would not read back the same) is
// refused, naming the record and the field; without the field it reads.
func TestParseRefusesCallFieldsElsewhere(t *testing.T) {
	t.Parallel()
	for _, field := range []string{
		`"started_at":"0000-01-01T00:00:00.000Z"`, `"resource":"inv_1"`, `"principal":{"user":"bob"}`,
		`"arguments":{"a":1}`, `"decision":"allow"`, `"would_have":{}`, `"mode":"enforce"`,
	} {
		doc := `{"seq":4,"kind":"resolution","effect_key":"k",` + field + `}`
		name := field[1 : strings.Index(field[1:], `"`)+1]
		_, err := receipt.Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "parse receipt 4: a resolution record carries "+name) {
			t.Errorf("Parse(%s) = %v, want it refused naming %s", doc, err, name)
		}
	}
	if _, err := receipt.Parse([]byte(`{"seq":4,"kind":"resolution","effect_key":"k","arguments":null}`)); err != nil {
		t.Errorf("a resolution without call fields: %v", err)
	}
	if _, err := receipt.Parse([]byte(`{"seq":4,"kind":"call","started_at":"2026-01-01T00:00:00.000Z","resource":null}`)); err != nil {
		t.Errorf("a call with its fields: %v", err)
	}
}

// TestCanonicalMatchesMarshal holds Seal's direct writer to canon.Marshal of the map document:
// the same bytes for every shape of receipt (optional fields empty and set, authority,
// would_have, escapes, non-ASCII).
func TestCanonicalMatchesMarshal(t *testing.T) {
	t.Parallel()
	shapes := []func(*receipt.Receipt){
		func(r *receipt.Receipt) {},
		func(r *receipt.Receipt) {
			r.Authority = &receipt.Authority{GrantID: "g", DelegationID: "dlg_1"}
			r.WouldHave = &receipt.WouldHave{Decision: "deny", Reason: "unknown_action", Effect: "committed"}
		},
		func(r *receipt.Receipt) {
			r.Resource, r.EffectKey, r.Attempt, r.IdempotencyToken, r.PolicyHash = "", "", 0, "", ""
			r.Principal = receipt.Principal{Agent: "a", User: "ünïcode \"q\" \\ \n\t\u2028", Issuer: "https://i"}
			r.Error = "line1\nline2\x01"
			r.Arguments = json.RawMessage(`{ "b": [1, {"z": null, "a": true}], "a": "€" }`)
			r.StartedAt, r.FinishedAt = time.Time{}, time.Time{}
		},
		func(r *receipt.Receipt) { r.Arguments = nil; r.Authority = &receipt.Authority{} },
		func(r *receipt.Receipt) {
			r.Approval = &receipt.ApprovalState{Status: "consumed", Approver: "bob"}
			r.ApprovalEdit = &receipt.ApprovalEdit{RequestedActionHash: "sha256:" + strings.Repeat("ab", 32),
				RequestedArguments: json.RawMessage(`{"order_id":"ord_1", "amount":50000}`), EditedBy: []string{"session:alice", "token:ü \"q\""}}
		},
		func(r *receipt.Receipt) {
			r.Kind = receipt.KindLateOutcome
			r.Effect = &receipt.EffectState{State: "committed", Attempt: 2, Holder: "act_1", ResultHash: "sha256:00", Conflict: true}
			r.Approval = &receipt.ApprovalState{Status: "consumed", Approver: "alice"}
		},
		func(r *receipt.Receipt) {
			r.Kind, r.Result, r.By, r.Note = receipt.KindResolution, "failed", "cli:bob", "called the bank: \"no\" \n ü"
			r.Effect = &receipt.EffectState{State: "failed", Attempt: 1, Holder: "act_2", ResolvedBy: "cli:bob"}
		},
		func(r *receipt.Receipt) {
			r.Kind, r.Result, r.EffectKey, r.Attempt, r.Action = receipt.KindRevocation, receipt.Revoked, "", 0, ""
			r.Delegation = &receipt.DelegationState{ID: "dlg_1", Parent: "g", GrantHash: "sha256:11", CreatedBy: "a", RevokedBy: "b"}
		},
		func(r *receipt.Receipt) {
			r.Kind, r.Result, r.ApprovalID, r.Approver = receipt.KindApprovalAnswer, receipt.Granted, "apr_1", "carol"
			r.Approval = &receipt.ApprovalState{Status: receipt.Granted, Approver: "carol"}
		},
		func(r *receipt.Receipt) {
			r.Kind, r.Result, r.EffectKey, r.Attempt, r.Action, r.By = receipt.KindPrune, receipt.Pruned, "", 0, "", "cli:ops"
			r.Prune = &receipt.PruneState{Start: 40, StartHash: "sha256:22", CheckpointSignedAt: "2026-03-01T12:00:00.000Z",
				CheckpointKey: "ed25519:aa", Removed: 39, Carried: 3, CarriedHash: "sha256:33"}
		},
		func(r *receipt.Receipt) {
			r.Kind, r.Result, r.EffectKey, r.Attempt, r.Action, r.Note = receipt.KindHoldReleased, receipt.Released, "", 0, "", "case closed"
			r.Hold = &receipt.HoldState{ID: "hold_1", From: 3, To: 9, Released: true}
		},
	}
	for i, shape := range shapes {
		r := sample(i + 1)
		shape(r)
		s, err := receipt.Seal(r, int64(i+1), receipt.GenesisHash)
		if err != nil {
			t.Fatalf("shape %d: Seal: %v", i, err)
		}
		doc, err := r.Document()
		if err != nil {
			t.Fatal(err)
		}
		want, err := canon.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if string(s.Doc) != string(want) {
			t.Errorf("shape %d: Seal wrote\n%s\nwant (canon.Marshal of the document)\n%s", i, s.Doc, want)
		}
	}
	bad := sample(1)
	bad.Action = "\xff"
	if _, err := receipt.Seal(bad, 1, receipt.GenesisHash); err == nil {
		t.Errorf("Seal accepted invalid UTF-8")
	}
}

// v1Doc is a receipt as schema v1 wrote it (before kinds): byte for byte what the previous
// writer sealed, seq and prev_hash left to fill.
const v1Doc = `{"action":"billing.refund","action_hash":"sha256:3f0c","action_id":"act_00000000000000000000000000000001",` +
	`"approval_id":null,"approver":null,"arguments":{"amount":500},"attempt":1,"authority":null,"decision":"allow",` +
	`"decision_reason":"allowed","effect_key":"refund:1","environment":"production","error":null,` +
	`"finished_at":"2026-01-02T03:04:05.000Z","idempotency_token":"t","mode":"enforce","policy_hash":"sha256:ab",` +
	`"policy_version":null,"prev_hash":"%s","principal":{"agent":"w","issuer":null,"user":null},` +
	`"receipt_id":"rcp_00000000000000000000000000000001","resource":null,"result":"committed","schema":"latch.receipt/v1",` +
	`"seq":%d,"started_at":"2026-01-02T03:04:05.000Z"}`

// TestOlderSchemasVerify: a chain that starts with schema v1 receipts, goes on with a v2 one and
// v3 one, a v4 one of an edited call and then v4 records of every kind verifies, and a v1
// receipt parses as a call's receipt.
func TestOlderSchemasVerify(t *testing.T) {
	t.Parallel()
	var rows []receipt.Sealed
	prev := receipt.GenesisHash
	for n := int64(1); n <= 2; n++ {
		doc := []byte(fmt.Sprintf(v1Doc, prev, n))
		rows = append(rows, receipt.Sealed{Seq: n, Hash: canon.Sum(doc), Doc: doc})
		prev = rows[len(rows)-1].Hash
	}
	// A schema v2 receipt: what this version writes, without the v3 members.
	{
		s, err := receipt.Seal(enveloped(3), 3, prev)
		if err != nil {
			t.Fatal(err)
		}
		v, err := canon.Parse(s.Doc)
		if err != nil {
			t.Fatal(err)
		}
		doc := v.(map[string]any)
		delete(doc, "budget_charges")
		delete(doc, "task")
		delete(doc, "scope_hash")
		delete(doc, "approval_edit")
		delete(doc["authority"].(map[string]any), "break_glass")
		doc["schema"] = receipt.SchemaV2
		v2, err := canon.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, receipt.Sealed{Seq: 3, Hash: canon.Sum(v2), Doc: v2})
		prev = rows[len(rows)-1].Hash
	}
	// A schema v3 receipt: what this version writes, without approval_edit.
	{
		s, err := receipt.Seal(enveloped(4), 4, prev)
		if err != nil {
			t.Fatal(err)
		}
		v, err := canon.Parse(s.Doc)
		if err != nil {
			t.Fatal(err)
		}
		doc := v.(map[string]any)
		delete(doc, "approval_edit")
		doc["schema"] = receipt.SchemaV3
		v3, err := canon.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := receipt.Parse(v3); err != nil {
			t.Fatalf("Parse(v3 document) = %v", err)
		}
		rows = append(rows, receipt.Sealed{Seq: 4, Hash: canon.Sum(v3), Doc: v3})
		prev = rows[len(rows)-1].Hash
	}
	// A schema v4 receipt of a call an approver edited.
	{
		r := enveloped(5)
		r.ApprovalEdit = &receipt.ApprovalEdit{RequestedActionHash: "sha256:" + strings.Repeat("cd", 32),
			RequestedArguments: json.RawMessage(`{"amount":50000}`), EditedBy: []string{"session:alice"}}
		s, err := receipt.Seal(r, 5, prev)
		if err != nil {
			t.Fatal(err)
		}
		back, err := receipt.Parse(s.Doc)
		if err != nil || back.ApprovalEdit == nil || string(back.ApprovalEdit.RequestedArguments) != `{"amount":50000}` ||
			len(back.ApprovalEdit.EditedBy) != 1 || back.ApprovalEdit.EditedBy[0] != "session:alice" {
			t.Fatalf("Parse(edited call) = %+v, %v; want its approval_edit back", back, err)
		}
		rows = append(rows, s)
		prev = s.Hash
	}
	for i, kind := range []string{receipt.KindCall, receipt.KindResolution, receipt.KindApprovalAnswer, receipt.KindRevocation} {
		r := enveloped(10 + i)
		r.Kind = kind
		if kind != receipt.KindCall {
			r.BudgetCharges, r.Task, r.ScopeHash = nil, "", ""
		}
		s, err := receipt.Seal(r, int64(len(rows)+1), prev)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, s)
		prev = s.Hash
	}
	last := rows[len(rows)-1]
	rep, err := receipt.Verify(seq(rows), receipt.Head{Seq: last.Seq, Hash: last.Hash})
	if err != nil || !rep.OK || rep.Verified != int64(len(rows)) {
		t.Fatalf("Verify(v1, v1, v2, v3…) = %+v, %v; want ok, %d verified", rep, err, len(rows))
	}
	got, err := receipt.Parse(rows[0].Doc)
	if err != nil || got.Kind != receipt.KindCall || got.EffectKey != "refund:1" || got.Result != receipt.Committed {
		t.Errorf("Parse(v1) = %+v, %v; want a call's receipt of refund:1, committed", got, err)
	}
}

// TestWouldHaveJSON: a WouldHave encoded with encoding/json (latch serve's answer to an observed
// begin) is the would_have member of the receipt document, byte for byte: the same lower-case
// names, an empty member null.
func TestWouldHaveJSON(t *testing.T) {
	t.Parallel()
	for _, wh := range []receipt.WouldHave{
		{Decision: "deny", Reason: "unknown_action"},
		{Decision: "allow", Reason: "rule[0]", Effect: "reserved"},
		{Decision: "approve", Reason: "rule[1]", Effect: "ambiguous"},
	} {
		in := sample(1)
		in.Mode, in.Result, in.WouldHave = "observe", receipt.Observed, &wh
		s, err := receipt.Seal(in, 1, receipt.GenesisHash)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(s.Doc, &doc); err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(wh)
		if err != nil {
			t.Fatal(err)
		}
		if want := doc["would_have"]; !bytes.Equal(got, want) {
			t.Errorf("json.Marshal(%+v) = %s, want the receipt's would_have %s", wh, got, want)
		}
	}
}
