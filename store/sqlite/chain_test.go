package sqlite

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// TestVerifyIndexColumns edits, one at a time, each column a receipt is looked up by (outside
// its hashed document): VerifyChain names the edit as index_mismatch at that seq, where a walk
// of the documents alone finds the chain intact.
func TestVerifyIndexColumns(t *testing.T) {
	t.Parallel()
	for _, col := range []struct{ name, set string }{
		{"effect_key", "effect_key = 'charge:hidden'"},
		{"action_id", "action_id = 'act_other'"},
		{"action", "action = 'other.action'"},
		{"approval_id", "approval_id = 'apr_other'"},
		{"result", "result = 'failed'"},
		{"receipt_id", "receipt_id = 'rcp_other'"},
		{"finished_at", "finished_at = finished_at + 86400000000000"},
	} {
		t.Run(col.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "state.db")
			s := open(t, "sqlite:"+path, nil)
			now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			for i := range 3 {
				rc := deniedReceipt("act_"+string(rune('a'+i)), now)
				rc.EffectKey, rc.FinishedAt = "charge:inv_"+string(rune('a'+i)), now
				if _, err := s.Record(t.Context(), &store.RecordRequest{Now: now, Receipt: rc}); err != nil {
					t.Fatal(err)
				}
			}
			exec(t, rawDB(t, path), "UPDATE receipts SET "+col.set+" WHERE seq = 2")

			head, err := s.Head(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			docsOnly, err := receipt.Verify(s.Receipts(t.Context(), store.ReceiptFilter{}), head)
			if err != nil || !docsOnly.OK {
				t.Fatalf("documents-only walk = %+v, %v; the premise is that it finds nothing", docsOnly, err)
			}
			rep, err := store.VerifyChain(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || len(rep.Breaks) != 1 || rep.Breaks[0].Kind != receipt.BreakIndexMismatch || rep.Breaks[0].Seq != 2 ||
				!strings.Contains(rep.Breaks[0].Detail, col.name+" column") {
				t.Errorf("VerifyChain after editing %s of seq 2 = %+v, want one index_mismatch at seq 2 naming the column", col.name, rep)
			}
		})
	}
}

// TestVerifyHeadMissing deletes the chain head row: Head names it (store.ErrHeadMissing) and
// VerifyChain reports a head_missing break instead of an SQL error.
func TestVerifyHeadMissing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, "sqlite:"+path, nil)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if _, err := s.Record(t.Context(), &store.RecordRequest{Now: now, Receipt: deniedReceipt("act_1", now)}); err != nil {
		t.Fatal(err)
	}
	exec(t, rawDB(t, path), "DELETE FROM chain_head")
	if _, err := s.Head(t.Context()); !errors.Is(err, store.ErrHeadMissing) {
		t.Errorf("Head() with the head row deleted = %v, want ErrHeadMissing", err)
	}
	rep, err := store.VerifyChain(t.Context(), s)
	if err != nil {
		t.Fatalf("VerifyChain = %v, want a report", err)
	}
	if rep.OK || len(rep.Breaks) != 1 || rep.Breaks[0].Kind != store.BreakHeadMissing || rep.Verified != 1 {
		t.Errorf("VerifyChain with the head row deleted = %+v, want one head_missing break", rep)
	}
}
