package postgres

import (
	"context"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

var _ store.StateReader = (*Store)(nil)

// ReadEvidence calls fn with the chain and the state, read in one REPEATABLE READ, read-only
// transaction: one snapshot, whatever is written meanwhile (store.StateReader).
func (s *Store) ReadEvidence(ctx context.Context, fn func(ev *store.Evidence) error) error {
	return s.readTx(ctx, "read evidence", func(tx pgx.Tx) error { return s.readEvidence(ctx, tx, fn) })
}

func (s *Store) readEvidence(ctx context.Context, tx pgx.Tx, fn func(ev *store.Evidence) error) error {
	ev := &store.Evidence{Receipts: s.chainRows(ctx, tx)}
	var err error
	if ev.Head, err = s.optionalHead(ctx, tx); err != nil {
		return fmt.Errorf("read evidence: chain head: %w", err)
	}
	if s.keepsRetention() == nil {
		if ev.Start, err = s.chainStart(ctx, tx); err != nil {
			return fmt.Errorf("read evidence: %w", err)
		}
		ev.Carried = s.carriedRows(ctx, tx)
		ev.Holds = s.holdsFunc(ctx, tx)
	}
	// Both tables in byte order of key (COLLATE "C"), the order the state check merges in,
	// whatever the database's collation.
	ev.Effects = eachIn(ctx, tx, "read effects", `SELECT `+s.q.effectRead+` FROM `+s.quoted()+`.effects ORDER BY effect_key COLLATE "C"`, nil,
		into(scanEffect))
	ev.Approvals = eachIn(ctx, tx, "read approvals", `SELECT `+s.q.approvalRead+` FROM `+s.quoted()+`.approvals ORDER BY approval_id COLLATE "C"`, nil,
		into(scanApproval))
	if s.version >= ledgerVersion {
		ev.Charges = eachIn(ctx, tx, "read budget charges", s.ledgerSQL(`SELECT budget, metric, amount, budget_limit, window_ns,
			effect_key, attempt, action_id, consumed_at, released_at FROM {s}.budget_charges
			ORDER BY effect_key COLLATE "C", attempt, budget COLLATE "C", metric COLLATE "C"`), nil, into(scanCharge))
	}
	ev.Delegations = func() ([]*store.Delegation, error) {
		if s.version < delegationsVersion {
			return nil, nil
		}
		return listIn(ctx, tx, "delegations", s.q.listDelegations, nil, scanDelegation)
	}
	return fn(ev)
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
