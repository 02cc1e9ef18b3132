package postgres

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// TestVerifyIndexColumns edits a receipt's effect_key and result columns (outside the hashed
// document) and deletes the chain head row: VerifyChain names each, where a walk of the
// documents alone found the edits intact and Head failed with an SQL error.
func TestVerifyIndexColumns(t *testing.T) {
	t.Parallel()
	u := newSchemaURL(t)
	st, err := Open(t.Context(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 3 {
		id := "act_" + string(rune('a'+i))
		rc := &receipt.Receipt{
			ReceiptID: "rcp_" + id, ActionID: id, Action: "a", ActionHash: "sha256:00", Arguments: []byte("{}"),
			Principal: receipt.Principal{Agent: "x"}, Decision: "deny", Result: "denied", StartedAt: now, FinishedAt: now,
			EffectKey: "charge:" + id, PolicyHash: "sha256:00", Mode: "enforce",
		}
		if _, err := st.Record(t.Context(), &store.RecordRequest{Now: now, Receipt: rc}); err != nil {
			t.Fatal(err)
		}
	}
	q := pgxQuote(st.schema)
	for _, edit := range []struct{ column, sql string }{
		{"effect_key", `UPDATE ` + q + `.receipts SET effect_key = 'charge:hidden' WHERE seq = 2`},
		{"result", `UPDATE ` + q + `.receipts SET result = 'committed' WHERE seq = 3`},
	} {
		if err := execDirect(t.Context(), u, edit.sql); err != nil {
			t.Fatal(err)
		}
		head, err := st.Head(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if docsOnly, err := receipt.Verify(st.Receipts(t.Context(), store.ReceiptFilter{}), head); err != nil || !docsOnly.OK {
			t.Fatalf("documents-only walk = %+v, %v; the premise is that it finds nothing", docsOnly, err)
		}
	}
	rep, err := store.VerifyChain(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Breaks) != 2 || rep.Breaks[0].Kind != receipt.BreakIndexMismatch || rep.Breaks[0].Seq != 2 ||
		!strings.Contains(rep.Breaks[0].Detail, "effect_key column") || rep.Breaks[1].Seq != 3 ||
		!strings.Contains(rep.Breaks[1].Detail, "result column") {
		t.Errorf("VerifyChain after editing effect_key of seq 2 and result of seq 3 = %+v, want two index_mismatch breaks", rep)
	}

	if err := execDirect(t.Context(), u, `DELETE FROM `+q+`.chain_head`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Head(t.Context()); !errors.Is(err, store.ErrHeadMissing) {
		t.Errorf("Head() with the head row deleted = %v, want ErrHeadMissing", err)
	}
	rep, err = store.VerifyChain(t.Context(), st)
	if err != nil {
		t.Fatalf("VerifyChain = %v, want a report", err)
	}
	if n := len(rep.Breaks); rep.OK || n != 3 || rep.Breaks[n-1].Kind != store.BreakHeadMissing {
		t.Errorf("VerifyChain with the head row deleted = %+v, want the two index breaks and head_missing", rep)
	}
}
