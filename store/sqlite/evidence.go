package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

var _ store.StateReader = (*Store)(nil)

// ReadEvidence calls fn with the chain and the state, read in one read transaction: in WAL mode
// it sees the database as of its first read, whatever is written meanwhile (store.StateReader).
//
// Each table is read merged with the records that name its rows, in one query ordered by key:
// SQLite merges the two sides (receipts by their effect_key or approval_id index, the table by
// its key), so that neither is sorted and a key's records and row arrive together.
func (s *Store) ReadEvidence(ctx context.Context, fn func(ev *store.Evidence) error) error {
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("read evidence: %w", err)
	}
	defer tx.Rollback()
	ev := &store.Evidence{Receipts: chainRows(ctx, tx)}
	switch h, err := readHead(ctx, tx); {
	case err == nil:
		ev.Head = &h
	case !errors.Is(err, store.ErrHeadMissing):
		return fmt.Errorf("read evidence: chain head: %w", err)
	}
	retention := s.keepsRetention() == nil
	var carriedEffects, carriedApprovals string
	if retention {
		if ev.Start, err = scanChainStart(tx.QueryRowContext(ctx, chainStartQuery)); errors.Is(err, sql.ErrNoRows) {
			ev.Start = nil
		} else if err != nil {
			return fmt.Errorf("read evidence: chain start: %w", err)
		}
		ev.Carried = carriedRows(ctx, tx)
		ev.Holds = func() ([]*store.Hold, error) {
			rows, err := tx.QueryContext(ctx, holdQuery+` ORDER BY n`)
			if err != nil {
				return nil, fmt.Errorf("holds: %w", err)
			}
			defer rows.Close()
			var out []*store.Hold
			for rows.Next() {
				h, err := scanHold(rows)
				if err != nil {
					return nil, fmt.Errorf("holds: %w", err)
				}
				out = append(out, h)
			}
			return out, rows.Err()
		}
		// What the last prune carried stands in for the records it removed.
		carriedEffects = ` UNION ALL SELECT seq, doc, key, '', 1, '', '', '', NULL, NULL, '', '', NULL, NULL, NULL, '', ''
			FROM carried WHERE kind = 'effect'`
		carriedApprovals = ` UNION ALL SELECT seq, doc, key, '', '', NULL, '', '', '', '', NULL, NULL, '', NULL, '', NULL, '', '', ''
			FROM carried WHERE kind = 'approval'`
	}
	// A record stands in for the table's columns with empty values of the scanners' types; its
	// seq and doc lead. A row has the largest seq, so it comes after its key's records.
	ev.Effects = keyedRows(ctx, tx, `SELECT seq, doc, effect_key, '', 1, '', '', '', NULL, NULL, '', '', NULL, NULL, NULL, '', ''
		FROM receipts WHERE effect_key <> ''`+carriedEffects+`
		UNION ALL SELECT 9223372036854775807, NULL, `+s.effectSelect()+` FROM effects
		ORDER BY 3, 1`, func(sc scanner, k *store.Keyed) error {
		e, err := scanEffect(sc)
		if err == nil {
			k.Key, k.Effect = e.Key, e
		}
		return err
	})
	ev.Approvals = keyedRows(ctx, tx, `SELECT seq, doc, approval_id, '', '', NULL, '', '', '', '', NULL, NULL, '', NULL, '', NULL, '', '', ''
		FROM receipts WHERE approval_id <> ''`+carriedApprovals+`
		UNION ALL SELECT 9223372036854775807, NULL, `+s.approvalSelect()+` FROM approvals
		ORDER BY 3, 1`, func(sc scanner, k *store.Keyed) error {
		a, err := scanApproval(sc)
		if err == nil {
			k.Key, k.Approval = a.ID, a
		}
		return err
	})
	ev.Delegations = func() ([]*store.Delegation, error) {
		if s.readOnly && s.version < 2 {
			return nil, nil
		}
		rows, err := tx.QueryContext(ctx, delegationQuery+` ORDER BY d.seq`)
		if err != nil {
			return nil, fmt.Errorf("delegations: %w", err)
		}
		defer rows.Close()
		var out []*store.Delegation
		for rows.Next() {
			d, err := scanDelegation(rows)
			if err != nil {
				return nil, fmt.Errorf("delegations: %w", err)
			}
			out = append(out, d)
		}
		return out, rows.Err()
	}
	return fn(ev)
}

// leadScanner scans a row's seq and doc, then hands the rest to a table's scanner.
type leadScanner struct {
	rows *sql.Rows
	seq  *int64
	doc  *sql.NullString
}

func (l leadScanner) Scan(dest ...any) error {
	return l.rows.Scan(append([]any{l.seq, l.doc}, dest...)...)
}

// keyedRows yields the rows of a merged query: a record (doc not NULL) or a table's row, which
// scan reads.
func keyedRows(ctx context.Context, tx *sql.Tx, q string, scan func(scanner, *store.Keyed) error) iter.Seq2[store.Keyed, error] {
	return func(yield func(store.Keyed, error) bool) {
		rows, err := tx.QueryContext(ctx, q)
		if err != nil {
			yield(store.Keyed{}, fmt.Errorf("read state: %w", err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			var k store.Keyed
			var seq int64
			var doc sql.NullString
			if err := scan(leadScanner{rows, &seq, &doc}, &k); err != nil {
				yield(store.Keyed{}, fmt.Errorf("read state: %w", err))
				return
			}
			if doc.Valid {
				k.Seq, k.Doc, k.Effect, k.Approval = seq, []byte(doc.String), nil, nil
			}
			if !yield(k, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(store.Keyed{}, fmt.Errorf("read state: %w", err))
		}
	}
}

// chainRows yields every receipt of the transaction's snapshot with its index columns, by seq.
func chainRows(ctx context.Context, tx *sql.Tx) iter.Seq2[receipt.Sealed, error] {
	return func(yield func(receipt.Sealed, error) bool) {
		rs, err := tx.QueryContext(ctx, `SELECT seq, hash, doc, receipt_id, action_id, action, effect_key, approval_id, result, finished_at
			FROM receipts ORDER BY seq`)
		if err != nil {
			yield(receipt.Sealed{}, fmt.Errorf("receipts: %w", err))
			return
		}
		defer rs.Close()
		for rs.Next() {
			var r receipt.Sealed
			var ix receipt.Index
			var doc string
			if err := rs.Scan(&r.Seq, &r.Hash, &doc, &ix.ReceiptID, &ix.ActionID, &ix.Action, &ix.EffectKey, &ix.ApprovalID,
				&ix.Result, &ix.FinishedAt); err != nil {
				yield(receipt.Sealed{}, fmt.Errorf("receipts: %w", err))
				return
			}
			r.Doc, r.Index = []byte(doc), &ix
			if !yield(r, nil) {
				return
			}
		}
		if err := rs.Err(); err != nil {
			yield(receipt.Sealed{}, fmt.Errorf("receipts: %w", err))
		}
	}
}

// carriedRows yields what the last prune carried, by kind and key (byte order: SQLite's BINARY
// collation).
func carriedRows(ctx context.Context, tx *sql.Tx) iter.Seq2[store.Carried, error] {
	return func(yield func(store.Carried, error) bool) {
		rows, err := tx.QueryContext(ctx, `SELECT kind, key, seq, doc FROM carried ORDER BY kind, key`)
		if err != nil {
			yield(store.Carried{}, fmt.Errorf("carried: %w", err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			var it store.Carried
			var doc string
			if err := rows.Scan(&it.Kind, &it.Key, &it.Seq, &doc); err != nil {
				yield(store.Carried{}, fmt.Errorf("carried: %w", err))
				return
			}
			it.Doc = []byte(doc)
			if !yield(it, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(store.Carried{}, fmt.Errorf("carried: %w", err))
		}
	}
}
