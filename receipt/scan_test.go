package receipt

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sealedDocs is how many of scanDocs come first as Seal writes them: one of every record kind.
const sealedDocs = 7

// scanDocs are documents for the one-scan readers: every record kind as Seal writes it, and
// shapes they must decline (leaving the document to encoding/json) or read as it would.
func scanDocs(t testing.TB) [][]byte {
	t.Helper()
	var docs [][]byte
	base := Receipt{ReceiptID: "rcp_1", ActionID: "act_1", Action: "billing.charge", EffectKey: "charge:1",
		Arguments: json.RawMessage(`{"effect":{"state":"failed"},"kind":"x","seq":9,"prev_hash":"sha256:y"}`),
		Result:    Committed, FinishedAt: time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)}
	for i, kind := range []string{KindCall, KindResolution, KindApprovalAnswer, KindRevocation, KindPrune, KindHold, KindHoldReleased} {
		r := base
		r.Kind = kind
		switch kind {
		case KindCall, KindResolution:
			r.Effect = &EffectState{State: "committed", Attempt: 2, Holder: "act_1", ResultHash: "sha256:r"}
		case KindApprovalAnswer:
			r.Approval = &ApprovalState{Status: "granted"}
		case KindRevocation:
			r.Delegation = &DelegationState{ID: "dlg_1", Parent: "g", GrantHash: "sha256:g", RevokedBy: "b"}
		case KindPrune:
			r.Result, r.By = Pruned, "cli:ops"
			r.Prune = &PruneState{Start: 40, StartHash: "sha256:s", CheckpointSignedAt: "2026-03-01T12:00:00.000Z",
				CheckpointKey: "ed25519:k", Removed: 39, Carried: 2, CarriedHash: "sha256:c"}
		case KindHold, KindHoldReleased:
			r.Result, r.Note = Held, "case 7"
			if kind == KindHoldReleased {
				r.Result = Released
			}
			r.Hold = &HoldState{ID: "hold_1", From: 3, To: 9, Released: kind == KindHoldReleased}
		}
		s, err := Seal(&r, int64(i+1), GenesisHash)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, s.Doc)
	}
	h := GenesisHash
	for _, d := range []string{
		`{"action":"a","effect":{"state":"committed","attempt":1},"kind":"call","prev_hash":"` + h + `","seq":7}`,
		`{"effect":null,"kind":null,"prev_hash":"` + h + `","receipt_id":null,"seq":7}`,
		`{"Effect":{"state":"failed"},"effect":{"state":"committed"},"prev_hash":"` + h + `","seq":7}`,
		`{"effect":{"state":"committed"},"effect":{"state":"failed"},"prev_hash":"` + h + `","seq":7}`,
		// encoding/json decodes a repeated object member into the same value (merging them), and
		// matches a key in another case (the last one wins): the scan must decline both.
		`{"effect":{"state":"committed","attempt":1},"effect":{"state":"failed"},"prev_hash":"` + h + `","seq":7}`,
		`{"effect":{"state":"committed"},"Effect":{"attempt":3},"prev_hash":"` + h + `","seq":7}`,
		`{"prev_hash":"` + h + `","result":"committed","RESULT":"failed","seq":7}`,
		`{"prev_hash":"` + h + `","seq":7,"SEQ":8}`,
		// A seq that is not a plain unsigned integer, and anything after the object.
		`{"prev_hash":"` + h + `","seq":7.5}`,
		`{"prev_hash":"` + h + `","seq":7e0}`,
		`{"prev_hash":"` + h + `","seq":-7}`,
		`{"prev_hash":"` + h + `","seq":7} x`,
		`{"prev_hash":"` + h + `","seq":7}{}`,
		`{"effect":5,"prev_hash":"` + h + `","seq":7}`,
		`{"kind":"call\u0021","prev_hash":"` + h + `","seq":7}`,
		`{"action":"été","prev_hash":"` + h + `","seq":7}`,
		`{"action":7,"prev_hash":"` + h + `","seq":7}`,
		`{"effect":{"STATE":"failed","state":"committed"},"prev_hash":"` + h + `","seq":7}`,
		`{"finished_at":"2026-01-02T03:04:05.006Z","prev_hash":"` + h + `","result":"committed","seq":7}`,
		`{"prev_hash":"` + h + `","seq":7,"x":[1,2,{"kind":"y"}]}`,
		`{"prev_hash":"` + h + `","seq":7`,
		`{}`,
		`[]`,
	} {
		docs = append(docs, []byte(d))
	}
	return docs
}

// TestScanWalk: whenever the one-scan reader of links and index fields answers, encoding/json
// reads the same, and it answers for every document Seal writes.
func TestScanWalk(t *testing.T) {
	t.Parallel()
	for i, doc := range scanDocs(t) {
		ok := agreeWalk(t, doc)
		if i < sealedDocs && !ok {
			t.Errorf("scanWalk declined a sealed document: %s", doc)
		}
	}
}

// agreeWalk fails unless scanWalk, when it answers, reads doc as encoding/json does.
func agreeWalk(t *testing.T, doc []byte) bool {
	t.Helper()
	var lf linkFields
	var f indexFields
	if !scanWalk(doc, &lf, &f) {
		return false
	}
	var wl linkFields
	var wf indexFields
	if err := json.Unmarshal(doc, &wl); err != nil {
		t.Fatalf("scanWalk(%q) answered, json.Unmarshal fails: %v", doc, err)
	}
	if err := json.Unmarshal(doc, &wf); err != nil {
		t.Fatalf("scanWalk(%q) answered, json.Unmarshal fails: %v", doc, err)
	}
	if lf != wl || !reflect.DeepEqual(f, wf) {
		t.Fatalf("scanWalk(%q) = %+v %+v, json.Unmarshal = %+v %+v", doc, lf, f, wl, wf)
	}
	return true
}

// TestReadStatesScan: ReadStates reads what a full decode reads, whether the one scan answers or
// not, errors included; the scan answers for every record Seal writes.
func TestReadStatesScan(t *testing.T) {
	t.Parallel()
	for i, doc := range scanDocs(t) {
		ok := agreeStates(t, doc)
		if i < sealedDocs && !ok {
			t.Errorf("readStatesScan declined a sealed document: %s", doc)
		}
	}
}

func agreeStates(t *testing.T, doc []byte) bool {
	t.Helper()
	var scanned States
	ok := readStatesScan(doc, &scanned)
	got, gerr := ReadStates(doc)
	var want States
	werr := json.Unmarshal(doc, &want)
	want.Kind = KindOf(want.Kind)
	if (gerr == nil) != (werr == nil) || werr != nil && !strings.Contains(gerr.Error(), werr.Error()) {
		t.Fatalf("ReadStates(%q) error %v, json.Unmarshal %v", doc, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadStates(%q) = %+v, json.Unmarshal = %+v", doc, got, want)
	}
	if ok && werr != nil {
		t.Fatalf("readStatesScan(%q) answered, json.Unmarshal fails: %v", doc, werr)
	}
	return ok
}

// FuzzScanTop: whenever the one-scan readers answer, encoding/json agrees.
func FuzzScanTop(f *testing.F) {
	for _, d := range scanDocs(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		agreeWalk(t, doc)
		agreeStates(t, doc)
	})
}

// benchRecord is a call's receipt of the usual size, with its effect state.
func benchRecord(b *testing.B) Sealed {
	b.Helper()
	r := &Receipt{ReceiptID: "rcp_00000000000000000000000000000001", ActionID: "act_00000000000000000000000000000001",
		Action: "bench.charge", ActionHash: "sha256:" + strings.Repeat("ab", 32), EffectKey: "charge:inv_1",
		Arguments: json.RawMessage(`{"amount":24900,"capture":true,"currency":"EUR","customer":"cus_1","invoice_id":"inv_1"}`),
		Principal: Principal{Agent: "latch-bench"}, Environment: "production", Decision: "allow", DecisionReason: "decision",
		Attempt: 1, IdempotencyToken: "00000000-0000-8000-8000-000000000000", Result: Committed,
		StartedAt: time.Now(), FinishedAt: time.Now(), PolicyHash: "sha256:" + strings.Repeat("cd", 32), Mode: "enforce",
		Effect: &EffectState{State: "committed", Attempt: 1, Holder: "act_00000000000000000000000000000001", ResultHash: "sha256:" + strings.Repeat("ef", 32)}}
	s, err := Seal(r, 1, GenesisHash)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkReadStates is what a replay pays per record: ReadStates (one scan, the state objects
// decoded) against the full decode it replaced.
func BenchmarkReadStates(b *testing.B) {
	doc := benchRecord(b).Doc
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ReadStates(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("full_decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s States
			if err := json.Unmarshal(doc, &s); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkIndexCheck is what a walk pays per row with index columns beyond the hash: one scan
// for the links and the index fields, against the link scan plus the full decode it replaced.
func BenchmarkIndexCheck(b *testing.B) {
	s := benchRecord(b)
	ix := &Index{ReceiptID: "rcp_00000000000000000000000000000001", ActionID: "act_00000000000000000000000000000001",
		Action: "bench.charge", EffectKey: "charge:inv_1", Result: Committed}
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var lf linkFields
			var f indexFields
			if !scanWalk(s.Doc, &lf, &f) {
				b.Fatal("declined")
			}
			_ = checkIndexFields(&f, ix)
		}
	})
	b.Run("links_and_full_decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var lf linkFields
			if err := readLinks(s.Doc, &lf); err != nil {
				b.Fatal(err)
			}
			_ = checkIndex(s.Doc, ix)
		}
	})
}
