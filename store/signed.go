package store

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/receipt"
)

// Signed checkpoints (docs/guarantees.md#signed-checkpoints).

// CheckpointStore is implemented by stores that keep signed checkpoints of their chain.
type CheckpointStore interface {
	// StoreID is the store's identity, made once when its schema was created; a checkpoint
	// names it, so that one store's checkpoint is never taken for another's.
	StoreID(ctx context.Context) (string, error)
	// AddCheckpoint stores a signed checkpoint.
	AddCheckpoint(ctx context.Context, c *receipt.Checkpoint) error
	// Checkpoints returns the stored checkpoints by seq.
	Checkpoints(ctx context.Context) ([]*receipt.Checkpoint, error)
}

// ErrNoCheckpoints is returned by a store that cannot keep checkpoints (its schema predates
// them, opened read-only).
var ErrNoCheckpoints = errors.New("the store keeps no checkpoints")

// Break kinds of a checkpoint check.
const (
	// BreakCheckpointMismatch: the receipt at a checkpoint's seq is not the one it signed:
	// something at or before it was rewritten.
	BreakCheckpointMismatch = "checkpoint_mismatch"
	// BreakCheckpointTruncated: the chain no longer reaches a checkpoint's seq.
	BreakCheckpointTruncated = "checkpoint_truncated"
	// BreakCheckpointSignature: a checkpoint's signature does not verify with the public key
	// given (forged, altered, or signed by another key).
	BreakCheckpointSignature = "checkpoint_signature"
	// BreakCheckpointStore: a checkpoint names another store.
	BreakCheckpointStore = "checkpoint_store"
)

func checkpointStore(st Store) (CheckpointStore, error) {
	cs, ok := st.(CheckpointStore)
	if !ok {
		return nil, fmt.Errorf("%T: %w", st, ErrNoCheckpoints)
	}
	return cs, nil
}

// SignCheckpoint signs the chain head of st with key at now, stores the checkpoint and returns
// it.
func SignCheckpoint(ctx context.Context, st Store, key ed25519.PrivateKey, now time.Time) (*receipt.Checkpoint, error) {
	cs, err := checkpointStore(st)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	id, err := cs.StoreID(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	head, err := st.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	c, err := receipt.SignCheckpoint(key, head, id, now)
	if err != nil {
		return nil, err
	}
	if err := cs.AddCheckpoint(ctx, c); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return c, nil
}

// VerifyCheckpoints checks the checkpoints st keeps, and extra ones (exported copies kept
// elsewhere), against pub and against st's chain: each must be signed by pub, name st, and the
// receipt at its seq must still be there, hash to the signed hash, and be stored under it. It
// returns the breaks and how many checkpoints held. A checkpoint below the start of a pruned
// chain is neither: what it signed was pruned (docs/retention.md).
func VerifyCheckpoints(ctx context.Context, st Store, pub ed25519.PublicKey, extra []*receipt.Checkpoint) ([]receipt.Break, int, error) {
	cs, err := checkpointStore(st)
	if err != nil {
		return nil, 0, fmt.Errorf("verify checkpoints: %w", err)
	}
	id, err := cs.StoreID(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("verify checkpoints: %w", err)
	}
	stored, err := cs.Checkpoints(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("verify checkpoints: %w", err)
	}
	head, err := st.Head(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("verify checkpoints: %w", err)
	}
	var start int64
	if rs, ok := st.(RetentionStore); ok {
		cs, err := rs.ChainStart(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("verify checkpoints: %w", err)
		}
		if cs != nil {
			start = cs.Seq
			// The checkpoint a prune pruned below is checked too, from the copy its row keeps,
			// unless it is stored as well: a start no key signed does not verify.
			if !slices.ContainsFunc(stored, func(c *receipt.Checkpoint) bool { return *c == cs.Checkpoint }) {
				cp := cs.Checkpoint
				extra = append([]*receipt.Checkpoint{&cp}, extra...)
			}
		}
	}
	breaks := []receipt.Break{}
	held := 0
	for _, c := range append(stored, extra...) {
		if c.Seq < start {
			continue // below the chain's start: its receipts were pruned (docs/retention.md)
		}
		brk := func(kind, detail string) {
			breaks = append(breaks, receipt.Break{Kind: kind, Seq: c.Seq, Detail: fmt.Sprintf("checkpoint signed at %s: %s",
				c.SignedAt.UTC().Format(receipt.TimeFormat), detail)})
		}
		if err := c.VerifySignature(pub); err != nil {
			brk(BreakCheckpointSignature, err.Error())
			continue
		}
		if c.StoreID != id {
			brk(BreakCheckpointStore, fmt.Sprintf("it names store %s, this store is %s", c.StoreID, id))
			continue
		}
		var found *receipt.Sealed
		for r, err := range st.Receipts(ctx, ReceiptFilter{AfterSeq: c.Seq - 1}) {
			if err != nil {
				return nil, 0, fmt.Errorf("verify checkpoints: %w", err)
			}
			if r.Seq == c.Seq {
				found = &r
			}
			break
		}
		switch {
		case found == nil:
			brk(BreakCheckpointTruncated, fmt.Sprintf("receipt %d is gone (the chain head is seq %d): the chain was cut at or before what was signed", c.Seq, head.Seq))
		case found.Hash != c.Hash || canon.Sum(found.Doc) != c.Hash:
			brk(BreakCheckpointMismatch, fmt.Sprintf("receipt %d was signed as %s, it is stored as %s and hashes to %s: the chain was rewritten at or before it",
				c.Seq, c.Hash, found.Hash, canon.Sum(found.Doc)))
		default:
			held++
		}
	}
	return breaks, held, nil
}
