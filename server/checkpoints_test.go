package server_test

import (
	"testing"

	"github.com/latchkit/latch/internal/storeraw"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// TestVerifyChecksCheckpoints: with the checkpoint public key, GET /v1/receipts/verify checks the
// signed checkpoints as `latch receipts --verify --checkpoints` does: a receipt rewritten below a
// checkpoint, hash and all so that the chain alone still holds, is a checkpoint_mismatch break.
// Without the key the report says the checkpoints were not checked (checkpoints null).
func TestVerifyChecksCheckpoints(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			priv, pub, err := receipt.NewSigningKey()
			if err != nil {
				t.Fatal(err)
			}
			key, _ := receipt.ParseSigningKey(priv)
			pubKey, _ := receipt.ParsePublicKey(pub)
			s := start(t, backend, &server.Config{CheckpointKey: pubKey})
			for _, inv := range []string{"inv_1", "inv_2"} {
				id := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": inv, "amount": 100}}).body["action_id"].(string)
				s.do("POST", "/v1/actions/"+id+"/outcome", s.alice, map[string]any{"outcome": "committed"})
			}
			cp, err := store.SignCheckpoint(t.Context(), s.g.Store(), key, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			v := s.do("GET", "/v1/receipts/verify", s.approver, nil)
			if cps, _ := v.body["checkpoints"].(map[string]any); v.body["ok"] != true || cps["held"] != float64(1) {
				t.Fatalf("verify before = %d %s, want ok with 1 checkpoint held", v.status, v.raw)
			}
			// Rewrite the chain from seq 1 on, each receipt resealed onto the one before: the
			// chain and its head hold, the checkpoint does not.
			var rows []receipt.Sealed
			for r, err := range s.g.Store().Receipts(t.Context(), store.ReceiptFilter{}) {
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, r)
			}
			db, err := storeraw.Open(t.Context(), s.storeURL)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			prev := receipt.GenesisHash
			var stmts []storeraw.Stmt
			for i, r := range rows {
				doc, err := receipt.Parse(r.Doc)
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					doc.Error = "rewritten"
				}
				sealed, err := receipt.Seal(doc, r.Seq, prev)
				if err != nil {
					t.Fatal(err)
				}
				stmts = append(stmts, storeraw.Stmt{SQL: "UPDATE {receipts} SET doc = ?, hash = ? WHERE seq = ?", Args: []any{storeraw.Doc(sealed.Doc), sealed.Hash, r.Seq}})
				prev = sealed.Hash
			}
			stmts = append(stmts, storeraw.Stmt{SQL: "UPDATE {chain_head} SET hash = ? WHERE id = 1", Args: []any{prev}})
			if _, err := db.Exec(t.Context(), stmts...); err != nil {
				t.Fatal(err)
			}
			v = s.do("GET", "/v1/receipts/verify", s.approver, nil)
			found := false
			for _, b := range v.body["breaks"].([]any) {
				if b := b.(map[string]any); b["kind"] == store.BreakCheckpointMismatch && b["seq"] == float64(cp.Seq) {
					found = true
				}
			}
			if v.body["ok"] != false || !found {
				t.Errorf("verify after the rewrite = %s, want a checkpoint_mismatch break at seq %d", v.raw, cp.Seq)
			}

			plain := start(t, backend, nil)
			if v := plain.do("GET", "/v1/receipts/verify", plain.approver, nil); v.body["checkpoints"] != nil || v.body["ok"] != true {
				t.Errorf("verify without a key = %s, want checkpoints null", v.raw)
			}
		})
	}
}
