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
func (s *Store) ReadEvidence(ctx context.Context, fn func(ev *store.Evidence) error) error {
	return s.readTx(ctx, "read evidence", func(tx *sql.Tx) error { return s.readEvidence(ctx, tx, fn) })
}

func (s *Store) readEvidence(ctx context.Context, tx *sql.Tx, fn func(ev *store.Evidence) error) error {
	ev := &store.Evidence{Receipts: chainRows(ctx, tx)}
	var err error
	if ev.Head, err = optionalHead(ctx, tx); err != nil {
		return fmt.Errorf("read evidence: chain head: %w", err)
	}
	if s.keepsRetention() == nil {
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
	}
	// Both tables are read in key order (SQLite's BINARY collation: byte order), from their
	// primary keys.
	// Of an effect, only what the check compares (store.EffectStateOf): its arguments, note and
	// the rest stay unread.
	conflict := "conflict"
	if s.beforeNotes() {
		conflict = "''"
	}
	ev.Effects = each(ctx, tx, "read effects", `SELECT effect_key, state, attempt, action_id, result, resolved_by, `+conflict+`
		FROM effects ORDER BY effect_key`, nil, func(sc scanner, e **store.Effect) error {
		var r store.Effect
		var state string
		var result sql.NullString
		if err := sc.Scan(&r.Key, &state, &r.Attempt, &r.ActionID, &result, &r.ResolvedBy, &r.Conflict); err != nil {
			return err
		}
		r.State, r.Result, *e = store.State(state), fromText(result), &r
		return nil
	})
	ev.Approvals = each(ctx, tx, "read approvals", `SELECT `+s.approvalSelect()+` FROM approvals ORDER BY +approval_id`, nil,
		func(sc scanner, a **store.Approval) (err error) {
			*a, err = scanApproval(sc)
			return err
		})
	if s.version == 0 || s.version >= ledgerVersion {
		// By primary key: effect key in byte order, then attempt.
		ev.Charges = each(ctx, tx, "read budget charges", `SELECT budget, metric, amount, budget_limit, window_ns, effect_key, attempt,
			action_id, consumed_at, released_at FROM budget_charges ORDER BY effect_key, attempt, budget, metric`, nil,
			func(sc scanner, c **store.ChargeRecord) (err error) {
				*c, err = scanCharge(sc)
				return err
			})
	}
	ev.Delegations = func() ([]*store.Delegation, error) {
		if s.readOnly && s.version < 2 {
			return nil, nil
		}
		out, err := collect(ctx, tx, s.delegationQuery()+` ORDER BY d.seq`, nil, scanDelegation)
		if err != nil {
			return nil, fmt.Errorf("delegations: %w", err)
		}
		return out, nil
	}
	return fn(ev)
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
