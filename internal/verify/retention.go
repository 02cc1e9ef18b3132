package verify

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Retention guarantees (docs/retention.md): G29 a prune adds no new chain break, G30 a held range
// refuses to prune, G32 an honest prune keeps its checkpoints. Each runs the scratch store's own
// prune (store.RetentionStore) below a checkpoint signed with a key made for the scenario; their
// flow faults edit the scratch store behind latch's back, as a prune built otherwise would leave
// it.

// Flow faults of the retention guarantees.
const (
	// faultPrunePastCheckpoint removes the checkpoint's receipt too, as a prune that removes
	// "up to and including" would. G29 fails.
	faultPrunePastCheckpoint = "prune_past_checkpoint"
	// faultHoldIgnored prunes as if no hold existed, as a prune that does not read the holds
	// would. G30 fails.
	faultHoldIgnored = "hold_ignored"
	// faultPruneReseals makes the kept receipt a fresh genesis (its prev_hash resealed to the
	// genesis hash), as a prune that "restarts" the chain would. G32 fails.
	faultPruneReseals = "prune_reseals_start"
)

// retentionEnv is a scratch environment with a chain to prune and a checkpoint key.
type retentionEnv struct {
	*env
	rs     store.RetentionStore
	key    ed25519.PrivateKey
	pub    ed25519.PublicKey
	action string
}

// newRetentionEnv opens a scratch environment with its store's retention operations and a
// checkpoint key made for the scenario; it makes no call (calls does).
func (r *runner) newRetentionEnv(ctx context.Context, name string) (*retentionEnv, error) {
	e, err := r.newEnv(ctx, name, r.sp)
	if err != nil {
		return nil, err
	}
	rs, err := store.Retention(e.st)
	if err != nil {
		e.close()
		return nil, err
	}
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		e.close()
		return nil, err
	}
	return &retentionEnv{env: e, rs: rs, key: key, pub: pub}, nil
}

// calls makes n calls that leave receipts (chainCalls) and keeps the action they name.
func (e *retentionEnv) calls(ctx context.Context, n int) {
	var c counter
	e.action = e.r.chainCalls(ctx, e.env, n, c.commit)
}

func (e *retentionEnv) checkpoint(ctx context.Context) (*receipt.Checkpoint, error) {
	cp, err := store.SignCheckpoint(ctx, e.st, e.key, e.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("sign checkpoint: %w", err)
	}
	return cp, nil
}

func (e *retentionEnv) prune(ctx context.Context, cp *receipt.Checkpoint) (*store.PruneResult, error) {
	return e.rs.Prune(ctx, &store.PruneRequest{Now: e.clock.Now(), By: "verify", BeforeSeq: cp.Seq,
		Check: func(c *receipt.Checkpoint) error { return c.VerifySignature(e.pub) }})
}

// g29: a prune below a signed checkpoint leaves a chain (and a state) that verifies, starting at
// the checkpoint's receipt.
func (r *runner) g29(ctx context.Context) (outcome, error) {
	e, err := r.newRetentionEnv(ctx, "g29")
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	e.calls(ctx, 4)
	cp, err := e.checkpoint(ctx)
	if err != nil {
		return outcome{}, err
	}
	e.calls(ctx, 2)
	before, err := store.VerifyChain(ctx, e.st)
	if err != nil {
		return outcome{}, err
	}
	res, err := e.prune(ctx, cp)
	if err != nil {
		return controlFailed(e.action, fmt.Sprintf("prune below the checkpoint of seq %d: %v", cp.Seq, err)), nil
	}
	if r.faults[faultPrunePastCheckpoint] {
		if _, err := r.sc.edit(ctx, e.url, stmt{"DELETE FROM {receipts} WHERE seq = ?", []any{cp.Seq}}); err != nil {
			return outcome{}, err
		}
	}
	after, err := store.VerifyChain(ctx, e.st)
	if err != nil {
		return outcome{}, err
	}
	head, err := e.st.Head(ctx)
	if err != nil {
		return outcome{}, err
	}
	detail := fmt.Sprintf("checkpoint of seq %d; before the prune: ok %v, %d verified, breaks %s; pruned %d receipts; after: ok %v, %d verified from seq %d, breaks %s",
		cp.Seq, before.OK, before.Verified, breaksText(before.Breaks), res.Receipts, after.OK, after.Verified, startSeq(after.Start),
		breaksText(after.Breaks))
	switch {
	case !before.OK || res.Receipts != cp.Seq-1:
		return controlFailed(e.action, detail), nil
	case !after.OK:
		return fail(e.action, "the prune added a chain break", detail), nil
	case after.Start == nil || after.Start.Seq != cp.Seq || after.Verified != head.Seq-cp.Seq+1:
		return fail(e.action, fmt.Sprintf("the chain does not start at the checkpoint's receipt %d", cp.Seq), detail), nil
	}
	return pass(e.action, detail), nil
}

func startSeq(s *receipt.Start) int64 {
	if s == nil {
		return 1
	}
	return s.Seq
}

// g30: a prune that would remove a seq an active hold keeps is refused, naming the hold, and
// writes nothing; released, the same prune goes ahead (the control).
func (r *runner) g30(ctx context.Context) (outcome, error) {
	e, err := r.newRetentionEnv(ctx, "g30")
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	e.calls(ctx, 4)
	const reason = "latch verify: legal hold"
	hold, err := e.rs.PlaceHold(ctx, &store.HoldRequest{Now: e.clock.Now(), From: 1, To: 2, Reason: reason, By: "verify"})
	if err != nil {
		return outcome{}, fmt.Errorf("place hold: %w", err)
	}
	cp, err := e.checkpoint(ctx)
	if err != nil {
		return outcome{}, err
	}
	if r.faults[faultHoldIgnored] {
		if _, err := r.sc.edit(ctx, e.url, stmt{"DELETE FROM {holds}", nil}); err != nil {
			return outcome{}, err
		}
	}
	head, err := e.st.Head(ctx)
	if err != nil {
		return outcome{}, err
	}
	_, perr := e.prune(ctx, cp)
	after, err := e.st.Head(ctx)
	if err != nil {
		return outcome{}, err
	}
	first := int64(0)
	for s, err := range e.st.Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			return outcome{}, err
		}
		first = s.Seq
		break
	}
	var he *store.HoldError
	refused := errors.As(perr, &he)
	detail := fmt.Sprintf("hold %s on seq 1 to 2, checkpoint of seq %d; prune: %v; chain after: seq %d to %d", hold.ID, cp.Seq, perr, first, after.Seq)
	switch {
	case perr == nil:
		return fail(e.action, "the held range was pruned", detail), nil
	case !refused || he.Hold.ID != hold.ID || he.Hold.Reason != reason:
		return fail(e.action, "the prune was not refused by the hold, named with its reason", detail), nil
	case first != 1 || after != head:
		return fail(e.action, "the refused prune wrote", detail), nil
	}
	if _, err := e.rs.ReleaseHold(ctx, &store.ReleaseRequest{Now: e.clock.Now(), ID: hold.ID, Reason: "latch verify: control", By: "verify"}); err != nil {
		return controlFailed(e.action, detail+"; release: "+err.Error()), nil
	}
	res, err := e.prune(ctx, cp)
	if err != nil || res.Start.Seq != cp.Seq {
		return controlFailed(e.action, fmt.Sprintf("%s; released, the prune: %+v, %v", detail, res, err)), nil
	}
	return pass(e.action, fmt.Sprintf("%s; released, the prune removed %d receipts", detail, res.Receipts)), nil
}

// g32: every checkpoint at or after the start of a pruned chain still holds, stored and exported,
// the one pruned below included.
func (r *runner) g32(ctx context.Context) (outcome, error) {
	e, err := r.newRetentionEnv(ctx, "g32")
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	e.calls(ctx, 3)
	cp1, err := e.checkpoint(ctx)
	if err != nil {
		return outcome{}, err
	}
	e.calls(ctx, 2)
	cp2, err := e.checkpoint(ctx)
	if err != nil {
		return outcome{}, err
	}
	e.calls(ctx, 1)
	anchors := []*receipt.Checkpoint{cp1, cp2}
	bBefore, hBefore, err := store.VerifyCheckpoints(ctx, e.st, e.pub, anchors)
	if err != nil {
		return outcome{}, err
	}
	res, err := e.prune(ctx, cp1)
	if err != nil {
		return controlFailed(e.action, fmt.Sprintf("prune below the checkpoint of seq %d: %v", cp1.Seq, err)), nil
	}
	if r.faults[faultPruneReseals] {
		if err := r.reseal(ctx, e, cp1.Seq); err != nil {
			return outcome{}, err
		}
	}
	bAfter, hAfter, err := store.VerifyCheckpoints(ctx, e.st, e.pub, anchors)
	if err != nil {
		return outcome{}, err
	}
	detail := fmt.Sprintf("checkpoints of seq %d and %d, stored and exported: before the prune %d hold, breaks %s; pruned %d receipts below %d; after: %d hold, breaks %s",
		cp1.Seq, cp2.Seq, hBefore, breaksText(bBefore), res.Receipts, cp1.Seq, hAfter, breaksText(bAfter))
	switch {
	case len(bBefore) != 0 || hBefore != 4:
		return controlFailed(e.action, detail), nil
	case len(bAfter) != 0 || hAfter != hBefore:
		return fail(e.action, "a checkpoint no longer holds after an honest prune", detail), nil
	}
	return pass(e.action, detail), nil
}

// reseal rewrites the kept receipt at seq as a fresh genesis and the prune's record of it.
func (r *runner) reseal(ctx context.Context, e *retentionEnv, seq int64) error {
	for s, err := range e.st.Receipts(ctx, store.ReceiptFilter{AfterSeq: seq - 1}) {
		if err != nil {
			return err
		}
		doc, err := receipt.Parse(s.Doc)
		if err != nil {
			return err
		}
		sealed, err := receipt.Seal(doc, seq, receipt.GenesisHash)
		if err != nil {
			return err
		}
		_, err = r.sc.edit(ctx, e.url,
			stmt{"UPDATE {receipts} SET doc = ?, hash = ? WHERE seq = ?", []any{docValue(sealed.Doc), sealed.Hash, seq}},
			stmt{"UPDATE {prunes} SET start_hash = ?", []any{sealed.Hash}})
		return err
	}
	return errors.New("reseal: no receipt")
}
