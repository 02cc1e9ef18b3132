package verify

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// The evidence guarantees (G28, G31, L4) edit a scratch store behind latch's back, as someone
// with the database's password would, and check that verification — the chain, the state
// replayed from it, the signed checkpoints — names what was done.

// naNoEffectRun is L4's N/A reason.
const naNoEffectRun = "no action with an effect template can run (none can decide allow or approve)"

// chainCalls makes n calls that leave receipts: whatever the policy lets run (done right) and,
// every second call, an unlisted one (denied, which leaves a receipt too). It returns the action
// named in details.
func (r *runner) chainCalls(ctx context.Context, e *env, n int, fn executor) string {
	pk, _ := r.runnable(n)
	unlisted := &latch.Call{Action: unlistedName(r.pol()), Arguments: json.RawMessage(`{"verify":"chain"}`)}
	action := unlisted.Action
	for i := range n {
		if pk != nil && i%2 == 0 {
			action = pk.Action
			_ = e.run(ctx, pk, pk.variant(i), fn) // a refusal leaves a receipt too
			continue
		}
		var c counter
		_, _ = e.g.Execute(withPrincipal(ctx, latch.Principal{Agent: verifyAgent}), unlisted, c.commit)
	}
	return action
}

// verifyState runs what latch receipts --verify runs: the chain, and the state it implies
// compared with the tables.
func (e *env) verifyState(ctx context.Context) (receipt.Report, error) {
	rep, err := store.VerifyChain(ctx, e.st)
	if err != nil {
		return receipt.Report{}, err
	}
	if e.r.faults[faultStateBlind] {
		kept := rep.Breaks[:0]
		for _, b := range rep.Breaks {
			if b.Kind != receipt.BreakStateDiverged {
				kept = append(kept, b)
			}
		}
		rep.Breaks, rep.OK = kept, len(kept) == 0
	}
	if e.r.faults[faultSchemaCurrentOnly] {
		for s, err := range e.st.Receipts(ctx, store.ReceiptFilter{}) {
			if err != nil {
				return receipt.Report{}, fmt.Errorf("read receipts: %w", err)
			}
			if !strings.Contains(string(s.Doc), `"schema":"`+receipt.Schema+`"`) {
				rep.Breaks = append(rep.Breaks, receipt.Break{Kind: receipt.BreakContentAltered, Seq: s.Seq, Detail: "not a " + receipt.Schema + " document"})
				rep.OK = false
			}
		}
	}
	return rep, nil
}

func breaksText(bs []receipt.Break) string {
	if len(bs) == 0 {
		return "none"
	}
	var parts []string
	for _, b := range bs {
		s := fmt.Sprintf("%s at %d", b.Kind, b.Seq)
		if b.Subject != "" {
			s = fmt.Sprintf("%s of %s (%s in the chain, %s in the table)", b.Kind, b.Subject, b.Chain, b.Table)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// l4: a call commits an effect; its state is then edited in the effects table, behind latch's
// back (committed → failed: what would let the effect run again). Verification must name it
// state_diverged, for that key. Control: before the edit, the chain and the state verify, the
// effect counted.
func (r *runner) l4(ctx context.Context) (outcome, error) {
	pk, _ := r.effectPick(1)
	if pk == nil {
		var why string
		if pk, why = r.pickFor(policy.Approve, chooseOpts{needEffect: true, n: 1}, naNoEffectRun); pk == nil {
			if strings.HasPrefix(why, noGrant) {
				return notApplicable(why), nil
			}
			return notApplicable(naNoEffectRun), nil
		}
	}
	v := pk.variants[0]
	e, err := r.newEnv(ctx, "l4", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	var c counter
	cerr := e.run(ctx, pk, v, c.commit)
	before, err := e.verifyState(ctx)
	if err != nil {
		return outcome{}, err
	}
	n, err := r.sc.edit(ctx, e.url, stmt{"UPDATE {effects} SET state = 'failed' WHERE effect_key = ?", []any{v.Key}})
	if err != nil {
		return outcome{}, err
	}
	after, err := e.verifyState(ctx)
	if err != nil {
		return outcome{}, err
	}
	checked := int64(0)
	if before.State != nil {
		checked = before.State.Effects
	}
	subject := "effect " + v.Key
	named := false
	for _, b := range after.Breaks {
		if b.Kind == receipt.BreakStateDiverged && strings.Contains(b.Subject, v.Key) {
			named = true
		}
	}
	detail := fmt.Sprintf("%s: the call %s, executions: %d; verified before the edit: ok %v, %d effects checked; UPDATE effects SET state = 'failed' for %s (%d row): ok %v, breaks: %s",
		v.describe(), outcomeOf(cerr), c.count(), before.OK, checked, v.Key, n[0], after.OK, breaksText(after.Breaks))
	switch {
	case cerr != nil || c.count() != 1 || !before.OK || checked < 1 || n[0] != 1:
		return controlFailed(pk.Action, detail), nil
	case after.OK || !named:
		return fail(pk.Action, "the edit of "+subject+" was not named state_diverged", detail), nil
	}
	return pass(pk.Action, detail), nil
}

// g28: receipts are written, the head is signed (a checkpoint), more receipts follow; then
// every receipt from the checkpoint's on is deleted and the head row set to the receipt before
// it — a consistent truncation, which the chain alone cannot tell from a shorter history. The
// checkpoint check must fail. Control: before the truncation, the chain verifies and the
// checkpoint holds.
func (r *runner) g28(ctx context.Context) (outcome, error) {
	e, err := r.newEnv(ctx, "g28", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	var c counter
	action := r.chainCalls(ctx, e, 3, c.commit)
	priv, pubPEM, err := receipt.NewSigningKey()
	if err != nil {
		return outcome{}, fmt.Errorf("checkpoint key: %w", err)
	}
	key, err := receipt.ParseSigningKey(priv)
	if err != nil {
		return outcome{}, fmt.Errorf("checkpoint key: %w", err)
	}
	pub, err := receipt.ParsePublicKey(pubPEM)
	if err != nil {
		return outcome{}, fmt.Errorf("checkpoint key: %w", err)
	}
	cp, err := store.SignCheckpoint(ctx, e.st, key, e.clock.Now())
	if err != nil {
		return controlFailed(action, "sign a checkpoint: "+err.Error()), nil
	}
	r.chainCalls(ctx, e, 2, c.commit)
	head, err := e.st.Head(ctx)
	if err != nil {
		return outcome{}, fmt.Errorf("read chain head: %w", err)
	}
	chain, err := e.verifyChain(ctx)
	if err != nil {
		return outcome{}, err
	}
	ctl, held, err := e.checkpoints(ctx, pub)
	if err != nil {
		return outcome{}, err
	}
	if cp.Seq < 2 {
		return controlFailed(action, fmt.Sprintf("three calls left a head at %d", cp.Seq)), nil
	}

	// Truncate: keep the receipts before the checkpoint's, and make the head point at the last.
	keep := cp.Seq - 1
	var keepHash string
	for s, err := range e.st.Receipts(ctx, store.ReceiptFilter{AfterSeq: keep - 1}) {
		if err != nil {
			return outcome{}, fmt.Errorf("read receipt %d: %w", keep, err)
		}
		keepHash = s.Hash
		break
	}
	n, err := r.sc.edit(ctx, e.url,
		stmt{"DELETE FROM {receipts} WHERE seq > ?", []any{keep}},
		stmt{"UPDATE {chain_head} SET seq = ?, hash = ? WHERE id = 1", []any{keep, keepHash}})
	if err != nil {
		return outcome{}, err
	}
	truncChain, err := e.verifyChain(ctx)
	if err != nil {
		return outcome{}, err
	}
	got, heldAfter, err := e.checkpoints(ctx, pub)
	if err != nil {
		return outcome{}, err
	}

	detail := fmt.Sprintf("chain of %d receipts, checkpoint signed at seq %d: chain ok %v, checkpoint breaks %s, %d held; receipts %d–%d deleted (%d rows) and the head set to %d: the chain alone ok %v (%d verified); checkpoints: breaks %s, %d held",
		head.Seq, cp.Seq, chain.OK, breaksText(ctl), held, keep+1, head.Seq, n[0], keep, truncChain.OK, truncChain.Verified, breaksText(got), heldAfter)
	switch {
	case !chain.OK || len(ctl) != 0 || held != 1 || head.Seq <= cp.Seq || n[0] != head.Seq-keep:
		return controlFailed(action, detail), nil
	case len(got) == 0 || heldAfter != 0:
		return fail(action, "the truncation past the checkpoint was not detected", detail), nil
	}
	return pass(action, detail), nil
}

// checkpoints checks the scratch store's checkpoints against pub.
func (e *env) checkpoints(ctx context.Context, pub ed25519.PublicKey) ([]receipt.Break, int, error) {
	bs, held, err := store.VerifyCheckpoints(ctx, e.st, pub, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("verify checkpoints: %w", err)
	}
	if e.r.faults[faultCheckpointsBlind] {
		return nil, held + len(bs), nil
	}
	return bs, held, nil
}

// v3Fields are the members a schema v3 document added to a call's receipt: its envelope. The
// authority object's break_glass is one too (envelopeOf removes it).
var v3Fields = []string{"budget_charges", "task", "scope_hash"}

// v2Fields are the members a schema v2 document added to a call's receipt: its kind and the
// state it leaves behind.
var v2Fields = []string{"kind", "effect", "approval", "delegation"}

// asSchema rewrites doc, a current call's receipt document, as schema tag wrote it: without the
// members later versions added.
func asSchema(doc map[string]any, tag string) {
	switch tag {
	case receipt.SchemaV1:
		for _, k := range v2Fields {
			delete(doc, k)
		}
		fallthrough
	case receipt.SchemaV2:
		for _, k := range v3Fields {
			delete(doc, k)
		}
		if a, ok := doc["authority"].(map[string]any); ok {
			delete(a, "break_glass")
		}
		fallthrough
	case receipt.SchemaV3:
		delete(doc, "approval_edit")
	}
	doc["schema"] = tag
}

// olderSchemas says which schema each of the first receipts of G31's chain is rewritten as: the
// ones after them stay current.
var olderSchemas = []string{receipt.SchemaV1, receipt.SchemaV1, receipt.SchemaV2, receipt.SchemaV3}

// g31: a chain is written, then its first receipts are rewritten as the earlier schemas wrote
// them — receipts 1 and 2 as schema v1 (no kind, no state, no envelope), receipt 3 as schema v2
// (no envelope: budget_charges, task, scope_hash, authority.break_glass), receipt 4 as schema v3
// (no approval_edit) — and the chain
// re-linked, as a store upgraded across those versions holds it; a further call appends a current
// receipt. The whole chain must verify, every receipt counted, and each document parse, each
// version where it was put. Control: the chain as written (current schema only) verifies.
func (r *runner) g31(ctx context.Context) (outcome, error) {
	e, err := r.newEnv(ctx, "g31", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	var c counter
	action := r.chainCalls(ctx, e, 5, c.commit)
	ctl, err := e.verifyState(ctx)
	if err != nil {
		return outcome{}, err
	}
	head, err := e.st.Head(ctx)
	if err != nil {
		return outcome{}, fmt.Errorf("read chain head: %w", err)
	}
	older := int64(len(olderSchemas))
	if head.Seq <= older {
		return controlFailed(action, fmt.Sprintf("five calls left %d receipts", head.Seq)), nil
	}

	var stmts, ledger []stmt
	prev := receipt.GenesisHash
	for s, err := range e.st.Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			return outcome{}, fmt.Errorf("read receipts: %w", err)
		}
		v, _, err := canon.ParseCanonical(s.Doc)
		if err != nil {
			return outcome{}, fmt.Errorf("read receipt %d: %w", s.Seq, err)
		}
		doc, ok := v.(map[string]any)
		if !ok {
			return outcome{}, fmt.Errorf("receipt %d is not an object", s.Seq)
		}
		if s.Seq <= older {
			// A call before budgets charged nothing: its ledger rows go with the members.
			if key, ok := doc["effect_key"].(string); ok && doc["budget_charges"] != nil && olderSchemas[s.Seq-1] != receipt.SchemaV3 {
				if attempt, ok := doc["attempt"].(int64); ok {
					ledger = append(ledger, stmt{"DELETE FROM {budget_charges} WHERE effect_key = ? AND attempt = ?", []any{key, attempt}})
				}
			}
			asSchema(doc, olderSchemas[s.Seq-1])
		}
		doc["prev_hash"] = prev
		b, err := canon.Marshal(doc)
		if err != nil {
			return outcome{}, fmt.Errorf("rewrite receipt %d: %w", s.Seq, err)
		}
		prev = canon.Sum(b)
		stmts = append(stmts, stmt{"UPDATE {receipts} SET doc = ?, hash = ? WHERE seq = ?", []any{docValue(b), prev, s.Seq}})
	}
	stmts = append(stmts, stmt{"UPDATE {chain_head} SET hash = ? WHERE id = 1 AND seq = ?", []any{prev, head.Seq}})
	n, err := r.sc.edit(ctx, e.url, append(stmts, ledger...)...)
	if err != nil {
		return outcome{}, err
	}
	rewritten, uncharged := int64(0), int64(0)
	for i, k := range n {
		if i < len(stmts) {
			rewritten += k
		} else {
			uncharged += k
		}
	}
	r.chainCalls(ctx, e, 1, c.commit) // a current receipt after the older ones
	after, err := e.st.Head(ctx)
	if err != nil {
		return outcome{}, fmt.Errorf("read chain head: %w", err)
	}
	got, err := e.verifyState(ctx)
	if err != nil {
		return outcome{}, err
	}
	versions := map[string]int{}
	misplaced, unparsed := 0, 0
	for s, err := range e.st.Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			return outcome{}, fmt.Errorf("read receipts: %w", err)
		}
		var tag struct {
			Schema string `json:"schema"`
		}
		if _, err := receipt.Parse(s.Doc); err != nil || json.Unmarshal(s.Doc, &tag) != nil {
			unparsed++
			continue
		}
		versions[tag.Schema]++
		want := receipt.Schema
		if s.Seq <= older {
			want = olderSchemas[s.Seq-1]
		}
		if tag.Schema != want {
			misplaced++
		}
	}

	detail := fmt.Sprintf("chain of %d receipts (%s): verifies %v; receipts 1–%d rewritten as %s and the chain re-linked (%d rows; %d ledger rows of their calls removed, as before budgets), then one more call: head %d, %d %s + %d %s + %d %s + %d %s documents (%d unparsable, %d not the version written): ok %v, %d verified, breaks: %s",
		head.Seq, receipt.Schema, ctl.OK, older, strings.Join(olderSchemas, ", "), rewritten, uncharged, after.Seq,
		versions[receipt.SchemaV1], receipt.SchemaV1, versions[receipt.SchemaV2], receipt.SchemaV2, versions[receipt.SchemaV3], receipt.SchemaV3, versions[receipt.Schema], receipt.Schema,
		unparsed, misplaced, got.OK, got.Verified, breaksText(got.Breaks))
	switch {
	case !ctl.OK || ctl.Verified != head.Seq || rewritten != head.Seq+1 || after.Seq <= head.Seq:
		return controlFailed(action, detail), nil
	case !got.OK || got.Verified != after.Seq:
		return fail(action, "a chain holding "+receipt.SchemaV1+", "+receipt.SchemaV2+" and "+receipt.SchemaV3+" receipts does not verify", detail), nil
	case unparsed > 0 || misplaced > 0:
		return fail(action, "an older receipt does not parse as the version it is", detail), nil
	}
	return pass(action, detail), nil
}
