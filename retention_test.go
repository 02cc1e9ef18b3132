package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/storetest"
)

// TestPruneBelowACheckpoint: after one of every kind of state change, a prune below a signed
// checkpoint is refused over a legal hold (writing nothing) and, once the hold is released,
// leaves a chain that verifies from the checkpoint's receipt with every kept row still checked:
// an edit of an effect whose records were pruned is state_diverged, the same edit made to its
// carried record too is carried_altered, a deleted hold is state_diverged, and a consistent
// rewrite of everything after the prune (rows, head, the prune's row) is caught by the signed
// checkpoint pruned below.
func TestPruneBelowACheckpoint(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, evidencePolicy)
			c := everyChange(t, e)
			ctx := t.Context()
			rs, err := store.Retention(e.g.Store())
			if err != nil {
				t.Fatal(err)
			}
			key, pub := storetest.SigningKey(t)
			hold, err := rs.PlaceHold(ctx, &store.HoldRequest{Now: e.clock.Now(), From: 2, To: 4, Reason: "audit 2026", By: "cli:legal"})
			if err != nil {
				t.Fatal(err)
			}
			cp, err := store.SignCheckpoint(ctx, e.g.Store(), key, e.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) { return "ch", nil }, nil)(
				agent(ctx), Charge{InvoiceID: "inv_after", Amount: 1}); err != nil {
				t.Fatal(err)
			}

			headOf := func() receipt.Head {
				t.Helper()
				h, err := e.g.Store().Head(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			head := headOf()
			_, err = rs.Prune(ctx, &store.PruneRequest{Now: e.clock.Now(), By: "cli:ops", BeforeSeq: cp.Seq})
			var he *store.HoldError
			if !errors.As(err, &he) || he.Hold.ID != hold.ID || !strings.Contains(err.Error(), "audit 2026") {
				t.Fatalf("Prune over a hold = %v, want a HoldError naming %s and its reason", err, hold.ID)
			}
			if h := headOf(); h != head {
				t.Fatalf("a refused prune moved the head from %+v to %+v", head, h)
			}
			if _, err := rs.ReleaseHold(ctx, &store.ReleaseRequest{Now: e.clock.Now(), ID: hold.ID, Reason: "audit done", By: "cli:legal"}); err != nil {
				t.Fatal(err)
			}
			res, err := rs.Prune(ctx, &store.PruneRequest{Now: e.clock.Now(), By: "cli:ops", BeforeSeq: cp.Seq})
			if err != nil || res.Start.Seq != cp.Seq || res.Receipts != cp.Seq-1 {
				t.Fatalf("Prune = %+v, %v; want the %d receipts below %d removed", res, err, cp.Seq-1, cp.Seq)
			}
			rep := verifyChain(t, e.g)
			if rep.Start == nil || rep.Start.Seq != cp.Seq || !strings.Contains(rep.Start.Reason, "pruned below the signed checkpoint") {
				t.Errorf("VerifyChain().Start = %+v, want seq %d and why", rep.Start, cp.Seq)
			}
			if s := rep.State; s.Effects != 8 || s.Delegations != 2 || s.Unchained != 0 {
				t.Errorf("state checked after the prune = %+v, want the 8 effects and 2 delegations kept, every one checked", *s)
			}
			if brk, held, err := store.VerifyCheckpoints(ctx, e.g.Store(), pub, []*receipt.Checkpoint{cp}); err != nil || len(brk) != 0 || held != 2 {
				t.Errorf("VerifyCheckpoints after the prune = %+v, %d held, %v; want the checkpoint (stored, exported) holding", brk, held, err)
			}
			// The duplicate of a committed charge whose receipts were pruned is still refused.
			if _, err := latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) { return "again", nil }, nil)(
				agent(ctx), Charge{InvoiceID: "inv_ok", Amount: 100}); !errors.Is(err, latch.ErrDuplicateEffect) {
				t.Fatalf("duplicate of inv_ok = %v, want ErrDuplicateEffect", err)
			}
			if got, err := e.g.Store().Effect(ctx, "charge:inv_ok"); err != nil || got.State != store.Committed || string(got.Result) != `"ch"` {
				t.Errorf("inv_ok after its duplicate = %+v, %v; want committed with its first result", got, err)
			}
			verifyChain(t, e.g)

			db := testdb.OpenRaw(t, e.url)
			one := func(what, kind, subject string) {
				t.Helper()
				rep, err := store.VerifyChain(ctx, e.g.Store())
				if err != nil {
					t.Fatalf("%s: VerifyChain = %v", what, err)
				}
				if rep.OK || len(rep.Breaks) != 1 || rep.Breaks[0].Kind != kind || !strings.Contains(rep.Breaks[0].Subject, subject) {
					t.Errorf("%s: VerifyChain breaks = %+v, want one %s of %q", what, rep.Breaks, kind, subject)
				}
			}
			// The effect's own records were pruned: the carried one speaks for it.
			db.Exec(`UPDATE effects SET state = 'failed' WHERE effect_key = 'charge:inv_nx'`)
			one("a pruned effect edited", receipt.BreakStateDiverged, "charge:inv_nx")
			// Its carried record edited to match: the prune's chained hash catches it.
			var doc []byte
			var docText string
			if backend == "sqlite" {
				db.Query(`SELECT doc FROM carried WHERE kind = 'effect' AND key = 'charge:inv_nx'`, []any{&docText})
				doc = []byte(docText)
			} else {
				db.Query(`SELECT doc FROM carried WHERE kind = 'effect' AND key = 'charge:inv_nx'`, []any{&doc})
			}
			forged := strings.Replace(string(doc), `"state":"committed"`, `"state":"failed"`, 1)
			if forged == string(doc) {
				t.Fatalf("carried record %s does not say committed", doc)
			}
			if backend == "sqlite" {
				db.Exec(`UPDATE carried SET doc = ? WHERE kind = 'effect' AND key = 'charge:inv_nx'`, forged)
			} else {
				db.Exec(`UPDATE carried SET doc = ? WHERE kind = 'effect' AND key = 'charge:inv_nx'`, []byte(forged))
			}
			if rep, err := store.VerifyChain(ctx, e.g.Store()); err != nil || rep.OK || len(rep.Breaks) != 1 || rep.Breaks[0].Kind != store.BreakCarriedAltered {
				t.Errorf("row and carried record edited: VerifyChain = %+v, %v; want one carried_altered", rep.Breaks, err)
			}
			if backend == "sqlite" {
				db.Exec(`UPDATE carried SET doc = ? WHERE kind = 'effect' AND key = 'charge:inv_nx'`, string(doc))
			} else {
				db.Exec(`UPDATE carried SET doc = ? WHERE kind = 'effect' AND key = 'charge:inv_nx'`, doc)
			}
			db.Exec(`UPDATE effects SET state = 'committed' WHERE effect_key = 'charge:inv_nx'`)
			verifyChain(t, e.g)
			// A delegation whose records were pruned: its revocation deleted (behind the triggers).
			if backend == "sqlite" {
				db.Exec(`DROP TRIGGER revocations_insert_only_delete`)
				db.Exec(`DELETE FROM revocations WHERE delegation_id = ?`, c.revoked)
				one("a pruned revocation deleted", receipt.BreakStateDiverged, c.revoked)
			}
			// A hold deleted.
			db.Exec(`DELETE FROM holds`)
			rep2, err := store.VerifyChain(ctx, e.g.Store())
			if err != nil || rep2.OK || !hasBreak(rep2.Breaks, receipt.BreakStateDiverged, hold.ID) {
				t.Errorf("hold deleted: VerifyChain = %+v, %v; want state_diverged of %s", rep2.Breaks, err, hold.ID)
			}
		})
	}
}

// TestSignedCheckpointCatchesARewriteAfterAPrune: after a prune, someone rewrites every remaining
// receipt, the head and the prune's own row consistently: the chain verifies, and the checkpoint
// the prune kept as the start (signed with a key outside the store) names the rewrite.
func TestSignedCheckpointCatchesARewriteAfterAPrune(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, evidencePolicy)
			everyChange(t, e)
			ctx := t.Context()
			key, pub := storetest.SigningKey(t)
			cp, err := store.SignCheckpoint(ctx, e.g.Store(), key, e.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			rs, _ := store.Retention(e.g.Store())
			if _, err := rs.Prune(ctx, &store.PruneRequest{Now: e.clock.Now(), By: "cli:ops", BeforeSeq: cp.Seq}); err != nil {
				t.Fatal(err)
			}
			verifyChain(t, e.g)

			db := testdb.OpenRaw(t, e.url)
			var rows []receipt.Sealed
			for r, err := range e.g.Store().Receipts(ctx, store.ReceiptFilter{}) {
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, r)
			}
			var prev, start string
			for i, r := range rows {
				doc, err := receipt.Parse(r.Doc)
				if err != nil {
					t.Fatal(err)
				}
				doc.Note += " (rewritten)"
				if doc.Prune != nil {
					doc.Prune.StartHash = start
				}
				if i == 0 {
					prev = doc.PrevHash // the pruned predecessor's hash, as the start keeps it
				}
				s, err := receipt.Seal(doc, r.Seq, prev)
				if err != nil {
					t.Fatal(err)
				}
				if backend == "sqlite" {
					db.Exec(`UPDATE receipts SET doc = ?, hash = ? WHERE seq = ?`, string(s.Doc), s.Hash, r.Seq)
				} else {
					db.Exec(`UPDATE receipts SET doc = ?, hash = ? WHERE seq = ?`, s.Doc, s.Hash, r.Seq)
				}
				if i == 0 {
					start = s.Hash
				}
				prev = s.Hash
			}
			db.Exec(`UPDATE chain_head SET hash = ? WHERE id = 1`, prev)
			db.Exec(`UPDATE prunes SET start_hash = ?`, start)
			verifyChain(t, e.g) // the chain alone sees nothing
			brk, _, err := store.VerifyCheckpoints(ctx, e.g.Store(), pub, nil)
			if err != nil || !hasBreak(brk, store.BreakCheckpointMismatch, "") || brk[0].Seq != cp.Seq {
				t.Errorf("VerifyCheckpoints after the rewrite = %+v, %v; want checkpoint_mismatch at %d", brk, err, cp.Seq)
			}
		})
	}
}

func hasBreak(bs []receipt.Break, kind, subject string) bool {
	for _, b := range bs {
		if b.Kind == kind && strings.Contains(b.Subject, subject) {
			return true
		}
	}
	return false
}

// TestPruneRefusesABrokenChain: a receipt below the checkpoint edited behind latch's back: the
// prune is refused, naming the break, and writes nothing — it never removes the evidence.
func TestPruneRefusesABrokenChain(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, evidencePolicy)
			everyChange(t, e)
			ctx := t.Context()
			key, _ := storetest.SigningKey(t)
			cp, err := store.SignCheckpoint(ctx, e.g.Store(), key, e.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			var doc []byte
			for r, err := range e.g.Store().Receipts(ctx, store.ReceiptFilter{AfterSeq: 1}) {
				if err != nil {
					t.Fatal(err)
				}
				doc = r.Doc
				break
			}
			rc, err := receipt.Parse(doc)
			if err != nil {
				t.Fatal(err)
			}
			rc.Error += " (edited)"
			edited, err := receipt.Seal(rc, 2, rc.PrevHash)
			if err != nil {
				t.Fatal(err)
			}
			db := testdb.OpenRaw(t, e.url)
			if backend == "sqlite" {
				db.Exec(`UPDATE receipts SET doc = ? WHERE seq = 2`, string(edited.Doc))
			} else {
				db.Exec(`UPDATE receipts SET doc = ? WHERE seq = 2`, edited.Doc)
			}
			head, _ := e.g.Store().Head(ctx)
			rs, _ := store.Retention(e.g.Store())
			_, err = rs.Prune(ctx, &store.PruneRequest{Now: e.clock.Now(), By: "cli:ops", BeforeSeq: cp.Seq})
			var pe *store.PruneRefusedError
			if !errors.Is(err, store.ErrPruneRefused) || !errors.As(err, &pe) || pe.Breaks[0].Kind != receipt.BreakContentAltered ||
				pe.Breaks[0].Seq != 2 || !strings.Contains(err.Error(), "content_altered at seq 2") {
				t.Fatalf("Prune over an edited receipt = %v, want refused naming content_altered at seq 2", err)
			}
			after, _ := e.g.Store().Head(ctx)
			if after != head {
				t.Errorf("a refused prune moved the head from %+v to %+v", head, after)
			}
			for r, err := range e.g.Store().Receipts(ctx, store.ReceiptFilter{}) {
				if err != nil || r.Seq != 1 {
					t.Errorf("first receipt after a refused prune: %d, %v; want 1", r.Seq, err)
				}
				break
			}
		})
	}
}

// TestPruneKeepsWhatAResolutionNeeds: a record whose holder reported after a person resolved it
// (an outcome conflict) waits for a person to resolve it again, and that resolution checks who
// made the attempt from its action_proposed event. A prune below a checkpoint signed after the
// conflict keeps that attempt's events (and removes the events of a settled effect of the same
// age), so the conflict can still be resolved — by someone else than the attempt's agent, who is
// still refused self_resolution — and the chain verifies after.
func TestPruneKeepsWhatAResolutionNeeds(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			ctx := t.Context()
			charge := func(id string, fn func(context.Context, Charge) (string, error)) error {
				_, err := latch.Protect(e.g, "billing.charge", fn, nil)(agent(ctx), Charge{InvoiceID: id, Amount: 1})
				return err
			}
			if err := charge("inv_settled", func(context.Context, Charge) (string, error) { return "ch_s", nil }); err != nil {
				t.Fatal(err)
			}
			err := charge("inv_conf", func(ctx context.Context, c Charge) (string, error) {
				e.clock.Add(latch.DefaultLease + time.Second)
				if err := charge("inv_conf", func(context.Context, Charge) (string, error) { return "", nil }); !errors.Is(err, latch.ErrAmbiguousEffect) {
					t.Errorf("contender = %v, want ErrAmbiguousEffect", err)
				}
				if _, err := e.g.Resolve(ctx, "charge:inv_conf", store.Failed, "cli:ana"); err != nil {
					t.Errorf("Resolve = %v", err)
				}
				return "ch_late", nil
			})
			if !errors.Is(err, latch.ErrOutcomeConflict) {
				t.Fatalf("holder = %v, want ErrOutcomeConflict", err)
			}
			e.clock.Add(time.Hour)
			if err := charge("inv_later", func(context.Context, Charge) (string, error) { return "ch_l", nil }); err != nil {
				t.Fatal(err)
			}
			key, _ := storetest.SigningKey(t)
			cp, err := store.SignCheckpoint(ctx, e.g.Store(), key, e.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			rs, err := store.Retention(e.g.Store())
			if err != nil {
				t.Fatal(err)
			}
			before, err := e.g.Store().Events(ctx, store.EventFilter{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := rs.Prune(ctx, &store.PruneRequest{Now: e.clock.Now(), By: "cli:ops", BeforeSeq: cp.Seq})
			if err != nil || res.Events == 0 {
				t.Fatalf("Prune = %+v, %v; want events removed", res, err)
			}
			// The count is of events, not of the rows that hold them.
			if after, err := e.g.Store().Events(ctx, store.EventFilter{}); err != nil || res.Events != int64(len(before)-len(after)) {
				t.Errorf("Prune counted %d events removed; %d events before, %d after (%v)", res.Events, len(before), len(after), err)
			}
			// Every receipt kept is still found by its action and its effect.
			kept := 0
			for r, err := range e.g.Store().Receipts(ctx, store.ReceiptFilter{}) {
				if err != nil {
					t.Fatal(err)
				}
				var doc receipt.Receipt
				if err := json.Unmarshal(r.Doc, &doc); err != nil {
					t.Fatal(err)
				}
				for _, f := range []store.ReceiptFilter{{ActionID: doc.ActionID}, {EffectKey: doc.EffectKey}} {
					if f.ActionID == "" && f.EffectKey == "" {
						continue
					}
					found := false
					for g, err := range e.g.Store().Receipts(ctx, f) {
						if err != nil {
							t.Fatal(err)
						}
						found = found || g.Seq == r.Seq
					}
					if !found {
						t.Errorf("receipt %d kept by the prune is not found by %+v", r.Seq, f)
					}
				}
				kept++
			}
			if kept == 0 {
				t.Error("the prune kept no receipt: nothing was checked")
			}
			if evs, err := e.g.Store().Events(ctx, store.EventFilter{EffectKey: "charge:inv_settled"}); err != nil || len(evs) != 0 {
				t.Errorf("events of the settled charge after the prune = %d, %v; want none", len(evs), err)
			}
			eff, err := e.g.Store().Effect(ctx, "charge:inv_conf")
			if err != nil || eff.Conflict == "" {
				t.Fatalf("charge:inv_conf after the prune = %+v, %v; want kept with its conflict", eff, err)
			}
			_, err = e.g.Resolve(ctx, "charge:inv_conf", store.Committed, "cli:billing-worker")
			var re *store.ResolveError
			if !errors.As(err, &re) || re.Reason != store.ReasonSelfResolution {
				t.Errorf("the attempt's agent resolving after the prune = %v, want self_resolution", err)
			}
			got, err := e.g.Resolve(ctx, "charge:inv_conf", store.Committed, "cli:erin")
			if err != nil || got.State != store.Committed || got.Conflict != "" {
				t.Fatalf("erin resolves the conflict after the prune = %+v, %v; want committed, the conflict settled", got, err)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestPruneForgetsRequestKeysOfPrunedEffects: a prune that removes a settled effect removes the
// request keys naming it, older than what the prune keeps; a key whose effect is kept stays, and
// a replay under it is still answered from the effect.
func TestPruneForgetsRequestKeysOfPrunedEffects(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			keyed := func(key, inv string) {
				t.Helper()
				ctx := latch.WithRequestKey(agent(t.Context()), key)
				p, err := e.g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"` + inv + `","amount":1}`)})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.g.Finish(agent(t.Context()), p.ActionID, latch.OutcomeCommitted, json.RawMessage(`"ch"`), ""); err != nil {
					t.Fatal(err)
				}
			}
			keyed("key-old", "inv_old")
			e.clock.Add(2 * time.Hour)
			keyed("key-new", "inv_new")
			ctx := t.Context()
			key, _ := storetest.SigningKey(t)
			cp, err := store.SignCheckpoint(ctx, e.g.Store(), key, e.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			rs, err := store.Retention(e.g.Store())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rs.Prune(ctx, &store.PruneRequest{Now: e.clock.Now(), By: "cli:ops", BeforeSeq: cp.Seq, KeepSettled: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.g.Store().Effect(ctx, "charge:inv_old"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("charge:inv_old after the prune: %v, want pruned", err)
			}
			kr := e.g.Store().(store.RequestKeyReader)
			if rk, err := kr.RequestKey(ctx, "key-old"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("key-old after its effect was pruned = %+v, %v; want forgotten", rk, err)
			}
			if rk, err := kr.RequestKey(ctx, "key-new"); err != nil || rk.EffectKey != "charge:inv_new" {
				t.Errorf("key-new after the prune = %+v, %v; want kept", rk, err)
			}
			verifyChain(t, e.g)
		})
	}
}
