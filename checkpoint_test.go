package latch_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/storetest"
)

// rewriteChain rewrites every receipt from seq from on, consistently: each document edited
// (edit), resealed after its rewritten predecessor, and the head moved — what someone with
// write access to the database can do, and what the chain alone cannot detect.
func rewriteChain(t *testing.T, e *env, db *testdb.Raw, from int64, edit func(*receipt.Receipt)) {
	t.Helper()
	var rows []receipt.Sealed
	for r, err := range e.g.Store().Receipts(t.Context(), store.ReceiptFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	prev := receipt.GenesisHash
	for _, r := range rows {
		if r.Seq < from {
			prev = r.Hash
			continue
		}
		doc, err := receipt.Parse(r.Doc)
		if err != nil {
			t.Fatal(err)
		}
		edit(doc)
		s, err := receipt.Seal(doc, r.Seq, prev)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(e.url, "sqlite:") {
			db.Exec(`UPDATE receipts SET doc = ?, hash = ? WHERE seq = ?`, string(s.Doc), s.Hash, r.Seq)
		} else {
			db.Exec(`UPDATE receipts SET doc = ?, hash = ? WHERE seq = ?`, s.Doc, s.Hash, r.Seq)
		}
		prev = s.Hash
	}
	db.Exec(`UPDATE chain_head SET hash = ? WHERE id = 1`, prev)
}

// TestSignedCheckpointCatchesAConsistentRewrite: a rewrite of every row and the head after a
// checkpoint leaves a chain that verifies, and the signed checkpoint (stored, and an exported
// copy) names it; a truncation past a checkpoint is named too; another key's checkpoint is not
// taken for one.
func TestSignedCheckpointCatchesAConsistentRewrite(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, evidencePolicy)
			everyChange(t, e)
			key, pub := storetest.SigningKey(t)
			cp, err := store.SignCheckpoint(t.Context(), e.g.Store(), key, e.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			exported, err := json.Marshal(cp)
			if err != nil {
				t.Fatal(err)
			}
			var anchor receipt.Checkpoint
			if err := json.Unmarshal(exported, &anchor); err != nil {
				t.Fatalf("re-read exported checkpoint: %v", err)
			}
			// Positive control: the untouched store holds every checkpoint.
			brk, held, err := store.VerifyCheckpoints(t.Context(), e.g.Store(), pub, []*receipt.Checkpoint{&anchor})
			if err != nil || len(brk) != 0 || held != 2 {
				t.Fatalf("VerifyCheckpoints(untouched) = %+v, %d held, %v; want none broken, 2 held", brk, held, err)
			}
			// Another key: not taken for a signature of this one.
			_, otherPEM, _ := receipt.NewSigningKey()
			other, _ := receipt.ParsePublicKey(otherPEM)
			if brk, _, _ := store.VerifyCheckpoints(t.Context(), e.g.Store(), other, nil); len(brk) != 1 || brk[0].Kind != store.BreakCheckpointSignature {
				t.Errorf("VerifyCheckpoints(another key) = %+v, want one checkpoint_signature", brk)
			}

			db := testdb.OpenRaw(t, e.url)
			rewriteChain(t, e, db, 2, func(r *receipt.Receipt) { r.Note += " (rewritten)"; r.Error += " (rewritten)" })
			verifyChain(t, e.g) // the chain alone sees nothing
			brk, held, err = store.VerifyCheckpoints(t.Context(), e.g.Store(), pub, []*receipt.Checkpoint{&anchor})
			if err != nil || held != 0 || len(brk) != 2 || brk[0].Kind != store.BreakCheckpointMismatch || brk[0].Seq != cp.Seq ||
				brk[1].Kind != store.BreakCheckpointMismatch {
				t.Fatalf("VerifyCheckpoints(rewritten) = %+v, %d held, %v; want checkpoint_mismatch at %d, stored and exported", brk, held, err, cp.Seq)
			}

			// The checkpoint row deleted too: the exported copy still catches it.
			db.Exec(`DELETE FROM checkpoints`)
			if brk, _, _ := store.VerifyCheckpoints(t.Context(), e.g.Store(), pub, []*receipt.Checkpoint{&anchor}); len(brk) != 1 ||
				brk[0].Kind != store.BreakCheckpointMismatch {
				t.Errorf("VerifyCheckpoints(rows deleted, exported copy) = %+v, want checkpoint_mismatch", brk)
			}

			// A truncation past the checkpoint, head moved back to match.
			var hash string
			db.Query(`SELECT hash FROM receipts WHERE seq = ?`, []any{&hash}, cp.Seq-3)
			db.Exec(`DELETE FROM receipts WHERE seq > ?`, cp.Seq-3)
			db.Exec(`UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1`, cp.Seq-3, hash)
			if brk, _, _ := store.VerifyCheckpoints(t.Context(), e.g.Store(), pub, []*receipt.Checkpoint{&anchor}); len(brk) != 1 ||
				brk[0].Kind != store.BreakCheckpointTruncated || brk[0].Seq != cp.Seq {
				t.Errorf("VerifyCheckpoints(truncated) = %+v, want checkpoint_truncated at %d", brk, cp.Seq)
			}
		})
	}
}
