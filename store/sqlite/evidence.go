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
			out, err := collect(ctx, tx, holdQuery+` ORDER BY n`, nil, scanHold)
			if err != nil {
				return nil, fmt.Errorf("holds: %w", err)
			}
			return out, nil
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
		out, err := collect(ctx, tx, delegationQuery+` ORDER BY d.seq`, nil, scanDelegation)
		if err != nil {
			return nil, fmt.Errorf("delegations: %w", err)
		}
		return out, nil
	}
	return fn(ev)
}

// leadScanner scans a row's seq and doc, then hands the rest to a table's scanner.
type leadScanner struct {
	row scanner
	seq *int64
	doc *sql.NullString
}

func (l leadScanner) Scan(dest ...any) error {
	return l.row.Scan(append([]any{l.seq, l.doc}, dest...)...)
}

// keyedRows yields the rows of a merged query: a record (doc not NULL) or a table's row, which
// scan reads.
func keyedRows(ctx context.Context, tx *sql.Tx, q string, scan func(scanner, *store.Keyed) error) iter.Seq2[store.Keyed, error] {
	return each(ctx, tx, "read state", q, nil, func(row scanner, k *store.Keyed) error {
		var seq int64
		var doc sql.NullString
		if err := scan(leadScanner{row, &seq, &doc}, k); err != nil {
			return err
		}
		if doc.Valid {
			k.Seq, k.Doc, k.Effect, k.Approval = seq, []byte(doc.String), nil, nil
		}
		return nil
	})
}

// chainRows yields every receipt of the transaction's snapshot with its index columns, by seq.
func chainRows(ctx context.Context, tx *sql.Tx) iter.Seq2[receipt.Sealed, error] {
	return each(ctx, tx, "receipts", `SELECT seq, hash, doc, receipt_id, action_id, action, effect_key, approval_id, result, finished_at
		FROM receipts ORDER BY seq`, nil, func(sc scanner, r *receipt.Sealed) error {
		var ix receipt.Index
		var doc string
		if err := sc.Scan(&r.Seq, &r.Hash, &doc, &ix.ReceiptID, &ix.ActionID, &ix.Action, &ix.EffectKey, &ix.ApprovalID,
			&ix.Result, &ix.FinishedAt); err != nil {
			return err
		}
		r.Doc, r.Index = []byte(doc), &ix
		return nil
	})
}

// carriedRows yields what the last prune carried, by kind and key (byte order: SQLite's BINARY
// collation).
func carriedRows(ctx context.Context, tx *sql.Tx) iter.Seq2[store.Carried, error] {
	return each(ctx, tx, "carried", `SELECT kind, key, seq, doc FROM carried ORDER BY kind, key`, nil, scanCarried)
}

// scanCarried reads a row of the carried table.
func scanCarried(sc scanner, it *store.Carried) error {
	var doc string
	if err := sc.Scan(&it.Kind, &it.Key, &it.Seq, &doc); err != nil {
		return err
	}
	it.Doc = []byte(doc)
	return nil
}
