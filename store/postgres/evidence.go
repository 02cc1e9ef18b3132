package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

var _ store.StateReader = (*Store)(nil)

// ReadEvidence calls fn with the chain and the state, read in one REPEATABLE READ, read-only
// transaction: one snapshot, whatever is written meanwhile (store.StateReader).
//
// Each table is read merged with the records that name its rows, in one query ordered by key
// (the server sorts, spilling to disk past work_mem: the client holds one row at a time). A
// connection runs one query at a time, so the merge is the server's, not two cursors'.
func (s *Store) ReadEvidence(ctx context.Context, fn func(ev *store.Evidence) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("read evidence: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	ev := &store.Evidence{Receipts: s.chainRows(ctx, tx)}
	var h receipt.Head
	switch err := tx.QueryRow(ctx, s.q.head).Scan(&h.Seq, &h.Hash); {
	case err == nil:
		ev.Head = &h
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("read evidence: chain head: %w", err)
	}
	effectRead, approvalRead := s.q.effectRead, s.q.approvalRead
	var carriedEffects, carriedApprovals string
	if s.keepsRetention() == nil {
		if ev.Start, err = s.chainStart(ctx, tx); err != nil {
			return fmt.Errorf("read evidence: %w", err)
		}
		ev.Carried = s.carriedRows(ctx, tx)
		ev.Holds = s.holdsFunc(ctx, tx)
		// What the last prune carried stands in for the records it removed.
		carriedEffects = ` UNION ALL SELECT seq, doc, key, ''::text, 1::bigint, ''::text, ''::text, ''::text,
			NULL::bigint, NULL::bytea, ''::text, ''::text, NULL::bigint, NULL::bigint, NULL::bytea, ''::text, ''::text
			FROM ` + s.tbl("carried") + ` WHERE kind = 'effect'`
		carriedApprovals = ` UNION ALL SELECT seq, doc, key, ''::text, ''::text, NULL::bytea, ''::text, ''::text,
			''::text, ''::text, NULL::bigint, NULL::bigint, ''::text, NULL::bigint, ''::text, NULL::bigint, ''::text, ''::text, ''::text
			FROM ` + s.tbl("carried") + ` WHERE kind = 'approval'`
	}
	// A record stands in for the table's columns with empty values of their types; its seq and
	// doc lead. A row has the largest seq, so it comes after its key's records.
	ev.Effects = keyedRows(ctx, tx, `SELECT seq, doc, effect_key, ''::text, 1::bigint, ''::text, ''::text, ''::text,
			NULL::bigint, NULL::bytea, ''::text, ''::text, NULL::bigint, NULL::bigint, NULL::bytea, ''::text, ''::text
		FROM `+s.q.receipts+` WHERE effect_key <> ''`+carriedEffects+`
		UNION ALL SELECT 9223372036854775807, NULL::bytea, `+effectRead+` FROM `+s.quoted()+`.effects
		ORDER BY 3, 1`, func(row pgx.Row, k *store.Keyed) error {
		var r effectRow
		if err := r.scan(row); err != nil {
			return err
		}
		k.Key, k.Effect = r.key, r.effect()
		return nil
	})
	ev.Approvals = keyedRows(ctx, tx, `SELECT seq, doc, approval_id, ''::text, ''::text, NULL::bytea, ''::text, ''::text,
			''::text, ''::text, NULL::bigint, NULL::bigint, ''::text, NULL::bigint, ''::text, NULL::bigint, ''::text, ''::text, ''::text
		FROM `+s.q.receipts+` WHERE approval_id <> ''`+carriedApprovals+`
		UNION ALL SELECT 9223372036854775807, NULL::bytea, `+approvalRead+` FROM `+s.quoted()+`.approvals
		ORDER BY 3, 1`, func(row pgx.Row, k *store.Keyed) error {
		var r approvalRow
		if err := r.scan(row); err != nil {
			return err
		}
		k.Key, k.Approval = r.id, r.approval()
		return nil
	})
	ev.Delegations = func() ([]*store.Delegation, error) {
		if s.version < delegationsVersion {
			return nil, nil
		}
		return listIn(ctx, tx, "delegations", s.q.listDelegations, nil, scanDelegation)
	}
	return fn(ev)
}

// leadRow scans a row's seq and doc, then hands the rest to a table's scanner.
type leadRow struct {
	row pgx.Row
	seq *int64
	doc *[]byte
}

func (l leadRow) Scan(dest ...any) error { return l.row.Scan(append([]any{l.seq, l.doc}, dest...)...) }

// keyedRows yields the rows of a merged query: a record (doc not NULL) or a table's row, which
// scan reads.
func keyedRows(ctx context.Context, tx pgx.Tx, q string, scan func(pgx.Row, *store.Keyed) error) iter.Seq2[store.Keyed, error] {
	return eachIn(ctx, tx, "read state", q, nil, func(row pgx.Row, k *store.Keyed) error {
		var seq int64
		var doc []byte
		if err := scan(leadRow{row, &seq, &doc}, k); err != nil {
			return err
		}
		if doc != nil {
			k.Seq, k.Doc, k.Effect, k.Approval = seq, doc, nil, nil
		}
		return nil
	})
}

// chainRows yields every receipt of the transaction's snapshot with its index columns, by seq.
func (s *Store) chainRows(ctx context.Context, tx pgx.Tx) iter.Seq2[receipt.Sealed, error] {
	return eachIn(ctx, tx, "list receipts", `SELECT seq, hash, doc, receipt_id, action_id, action, effect_key, approval_id, result, finished_at
		FROM `+s.q.receipts+` ORDER BY seq`, nil, func(row pgx.Row, r *receipt.Sealed) error {
		var ix receipt.Index
		if err := row.Scan(&r.Seq, &r.Hash, &r.Doc, &ix.ReceiptID, &ix.ActionID, &ix.Action, &ix.EffectKey, &ix.ApprovalID,
			&ix.Result, &ix.FinishedAt); err != nil {
			return err
		}
		r.Index = &ix
		return nil
	})
}
