package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

var _ store.CheckpointStore = (*Store)(nil)

// checkpointsVersion is the schema that added signed checkpoints (migration 9).
const checkpointsVersion = 9

func (s *Store) keepsCheckpoints() error {
	if s.readOnly && s.version != 0 && s.version < checkpointsVersion {
		return store.ErrNoCheckpoints
	}
	return nil
}

// StoreID returns the store's identity.
func (s *Store) StoreID(ctx context.Context) (string, error) {
	if err := s.keepsCheckpoints(); err != nil {
		return "", fmt.Errorf("store id: %w", err)
	}
	var id string
	if err := s.r.QueryRowContext(ctx, `SELECT store_id FROM store_identity WHERE id = 1`).Scan(&id); err != nil {
		return "", fmt.Errorf("store id: %w", err)
	}
	return id, nil
}

// AddCheckpoint stores a signed checkpoint.
func (s *Store) AddCheckpoint(ctx context.Context, c *receipt.Checkpoint) error {
	if c == nil || c.Seq < 1 || c.Signature == "" {
		return errors.New("add checkpoint: no signed checkpoint")
	}
	err := s.write(ctx, func(t *txn) error {
		var b binder
		at := b.time(c.SignedAt)
		if b.err != nil {
			return b.err
		}
		_, err := t.c.exec(`INSERT INTO checkpoints (seq, hash, signed_at, store_id, key_id, signature) VALUES (?, ?, ?, ?, ?, ?)`,
			c.Seq, c.Hash, at, c.StoreID, c.KeyID, c.Signature)
		return err
	})
	if err != nil {
		return fmt.Errorf("add checkpoint %d: %w", c.Seq, err)
	}
	return nil
}

// Checkpoints returns the stored checkpoints by seq.
func (s *Store) Checkpoints(ctx context.Context) ([]*receipt.Checkpoint, error) {
	if err := s.keepsCheckpoints(); err != nil {
		return nil, nil
	}
	out, err := collect(ctx, s.r, checkpointQuery+` ORDER BY seq, signed_at`, nil, scanCheckpoint)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	return out, nil
}

const checkpointQuery = `SELECT seq, hash, signed_at, store_id, key_id, signature FROM checkpoints`

func scanCheckpoint(sc scanner) (*receipt.Checkpoint, error) {
	var c receipt.Checkpoint
	var at sql.NullInt64
	if err := sc.Scan(&c.Seq, &c.Hash, &at, &c.StoreID, &c.KeyID, &c.Signature); err != nil {
		return nil, err
	}
	c.SignedAt = fromNanos(at)
	return &c, nil
}
