package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

var _ store.CheckpointStore = (*Store)(nil)

// checkpointsVersion is the schema that added signed checkpoints (migration 8).
const checkpointsVersion = 8

// StoreID returns the store's identity.
func (s *Store) StoreID(ctx context.Context) (string, error) {
	if s.version < checkpointsVersion {
		return "", fmt.Errorf("store id: %w", store.ErrNoCheckpoints)
	}
	var id string
	if err := s.pool.QueryRow(ctx, `SELECT store_id FROM `+s.quoted()+`.store_identity WHERE id = 1`).Scan(&id); err != nil {
		return "", fmt.Errorf("store id: %w", err)
	}
	return id, nil
}

// AddCheckpoint stores a signed checkpoint.
func (s *Store) AddCheckpoint(ctx context.Context, c *receipt.Checkpoint) error {
	if c == nil || c.Seq < 1 || c.Signature == "" {
		return errors.New("add checkpoint: no signed checkpoint")
	}
	at, err := nanos(c.SignedAt)
	if err != nil {
		return fmt.Errorf("add checkpoint %d: %w", c.Seq, err)
	}
	args := []any{c.Seq, c.Hash, at.Int64, c.StoreID, c.KeyID, c.Signature}
	_, err = s.write(ctx, fmt.Sprintf("add checkpoint %d", c.Seq), func(ctx context.Context, t *txn) error {
		return t.insert(ctx, "checkpoint", `INSERT INTO `+s.quoted()+`.checkpoints (seq, hash, signed_at, store_id, key_id, signature)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`, args,
			presence{`SELECT count(*) FROM ` + s.quoted() + `.checkpoints WHERE seq = $1 AND hash = $2 AND signed_at = $3 AND store_id = $4
				AND key_id = $5 AND signature = $6`, args})
	})
	return err
}

// Checkpoints returns the stored checkpoints by seq.
func (s *Store) Checkpoints(ctx context.Context) ([]*receipt.Checkpoint, error) {
	if s.version < checkpointsVersion {
		return nil, nil
	}
	return list(ctx, s, "checkpoints", `SELECT `+checkpointColumns+` FROM `+s.quoted()+`.checkpoints ORDER BY seq, signed_at`, nil, scanCheckpoint)
}

// checkpointColumns are what scanCheckpoint reads.
const checkpointColumns = `seq, hash, signed_at, store_id, key_id, signature`

func scanCheckpoint(row pgx.Row) (*receipt.Checkpoint, error) {
	var c receipt.Checkpoint
	var at stamp
	if err := row.Scan(&c.Seq, &c.Hash, &at, &c.StoreID, &c.KeyID, &c.Signature); err != nil {
		return nil, err
	}
	c.SignedAt = fromNanos(at)
	return &c, nil
}
