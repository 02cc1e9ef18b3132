package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

var _ store.TallyKeeper = (*Store)(nil)

// tallyVersion is the schema that added receipt_tally (migration 20).
const tallyVersion = 20

// KeptTally returns the tally kept, nil when there is none, when the chain no longer starts at
// its From, or on a store (read-only) whose schema predates it. The tally and the chain's first
// seq are read by one statement: one snapshot.
func (s *Store) KeptTally(ctx context.Context) (*store.KeptTally, error) {
	if s.version < tallyVersion {
		return nil, nil
	}
	var t store.KeptTally
	var doc string
	var first *int64
	err := s.pool.QueryRow(ctx, `SELECT from_seq, through_seq, doc, (SELECT min(seq) FROM `+s.quoted()+`.receipts)
		FROM `+s.quoted()+`.receipt_tally WHERE id = 1`).Scan(&t.From, &t.Through, &doc, &first)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("kept tally: %w", err)
	}
	return store.DecodeTally(&t, doc, first)
}

// KeepTally keeps t in place of the tally kept, unless that one starts at the same seq and
// counts further. Keeping the same tally twice changes nothing.
func (s *Store) KeepTally(ctx context.Context, t *store.KeptTally) error {
	doc, err := store.EncodeTally(t)
	if err != nil {
		return err
	}
	_, err = s.write(ctx, "keep tally", func(ctx context.Context, x *txn) error {
		_, err := x.Exec(ctx, `INSERT INTO `+s.quoted()+`.receipt_tally AS k (id, from_seq, through_seq, doc) VALUES (1, $1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET from_seq = excluded.from_seq, through_seq = excluded.through_seq, doc = excluded.doc
			WHERE k.from_seq <> excluded.from_seq OR k.through_seq < excluded.through_seq`,
			t.From, t.Through, doc)
		return err
	})
	return err
}

// Schema reports the schema the store was opened at and the one this binary writes.
func (s *Store) Schema() (at, latest int) { return s.version, latestVersion() }
