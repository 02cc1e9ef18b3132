package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/latchkit/latch/store"
)

var _ store.TallyKeeper = (*Store)(nil)

// tallyVersion is the schema that added receipt_tally (migration 23).
const tallyVersion = 23

// KeptTally returns the tally kept, nil when there is none, when the chain no longer starts at
// its From, or on a store (read-only) whose schema predates it. The tally and the chain's first
// seq are read by one statement: one snapshot.
func (s *Store) KeptTally(ctx context.Context) (*store.KeptTally, error) {
	if s.version != 0 && s.version < tallyVersion {
		return nil, nil
	}
	var t store.KeptTally
	var doc string
	var first *int64
	err := s.r.QueryRowContext(ctx, `SELECT from_seq, through_seq, doc, (SELECT min(seq) FROM receipts)
		FROM receipt_tally WHERE id = 1`).Scan(&t.From, &t.Through, &doc, &first)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("kept tally: %w", err)
	}
	return store.DecodeTally(&t, doc, first)
}

// KeepTally keeps t in place of the tally kept, unless that one starts at the same seq and
// counts further.
func (s *Store) KeepTally(ctx context.Context, t *store.KeptTally) error {
	doc, err := store.EncodeTally(t)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(x *txn) error {
		_, err := x.c.exec(`INSERT INTO receipt_tally (id, from_seq, through_seq, doc) VALUES (1, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET from_seq = excluded.from_seq, through_seq = excluded.through_seq, doc = excluded.doc
			WHERE receipt_tally.from_seq <> excluded.from_seq OR receipt_tally.through_seq < excluded.through_seq`,
			t.From, t.Through, doc)
		return err
	})
	if err != nil {
		return fmt.Errorf("keep tally: %w", err)
	}
	return nil
}

// Schema reports the schema the store was opened at and the one this binary writes.
func (s *Store) Schema() (at, latest int) {
	if s.version == 0 {
		return latestVersion(), latestVersion()
	}
	return s.version, latestVersion()
}
