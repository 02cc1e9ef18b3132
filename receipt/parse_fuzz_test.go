package receipt_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/receipt"
)

// FuzzParse asserts properties of Parse on arbitrary documents: it never panics; a document it
// reads and Seal accepts becomes, after one seal, a fixed point — parsed again it reads back to
// the same receipt (its arguments canonical) and seals to the same bytes and hash; and the
// sealed receipt, as the first of a chain, verifies.
func FuzzParse(f *testing.F) {
	for i := 1; i <= 3; i++ {
		r := sample(i)
		if i == 2 {
			r.Authority = &receipt.Authority{GrantID: "finance", DelegationID: "dlg_1"}
			r.ApprovalID, r.Approver, r.Error, r.Principal.User = "apr_1", "alice", "boom \u2028 \"quoted\"", "bob"
		}
		if i == 3 {
			r.WouldHave = &receipt.WouldHave{Decision: "deny", Reason: "unknown_action", Effect: "reserved"}
			r.Attempt, r.EffectKey, r.Result = 0, "", receipt.Observed
		}
		s, err := receipt.Seal(r, int64(i), receipt.GenesisHash)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s.Doc)
	}
	f.Add([]byte(`{"seq":1,"prev_hash":"x","arguments":{"a":[1,"\u0000"]},"started_at":"2026-11-29T10:00:00.000Z"}`))
	f.Add([]byte(`{"seq":0}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		r, err := receipt.Parse(doc)
		if err != nil || r.Seq < 1 {
			return
		}
		first, err := receipt.Seal(r, r.Seq, r.PrevHash)
		if err != nil {
			return // Seal refuses what it cannot write canonically (a float, invalid UTF-8)
		}
		r1, err := receipt.Parse(first.Doc)
		if err != nil {
			t.Fatalf("Parse(Seal(Parse(%q))) = %v", doc, err)
		}
		// A call's arguments come back canonical ({} when absent); a record of another kind
		// (a resolution, a hold…) has none; every other field exactly.
		args := []byte("{}")
		if !receipt.IsCall(r.Kind) {
			args = nil
		} else if len(r.Arguments) > 0 {
			if args, err = canon.Canonicalize(r.Arguments); err != nil {
				t.Fatalf("Seal accepted arguments canon refuses: %v", err)
			}
		}
		if !bytes.Equal(r1.Arguments, args) {
			t.Fatalf("sealed arguments %q read back as %q, want %q", r.Arguments, r1.Arguments, args)
		}
		if diff := cmp.Diff(r, r1, cmpopts.IgnoreFields(receipt.Receipt{}, "Arguments")); diff != "" {
			t.Fatalf("a sealed receipt reads back differently (-sealed +read):\n%s", diff)
		}
		second, err := receipt.Seal(r1, r1.Seq, r1.PrevHash)
		if err != nil || !bytes.Equal(second.Doc, first.Doc) || second.Hash != first.Hash {
			t.Fatalf("sealing twice: %q (%v), want %q", second.Doc, err, first.Doc)
		}
		genesis, err := receipt.Seal(r1, 1, receipt.GenesisHash)
		if err != nil {
			t.Fatalf("Seal as seq 1: %v", err)
		}
		rep, err := receipt.Verify(seq([]receipt.Sealed{genesis}), receipt.Head{Seq: 1, Hash: genesis.Hash})
		if err != nil || !rep.OK {
			t.Fatalf("a one-receipt chain of %q: %+v, %v", genesis.Doc, rep, err)
		}
	})
}
