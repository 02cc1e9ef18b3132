package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Reads are single statements outside any explicit transaction: each sees one consistent
// snapshot, and none of them ever changes a row.

// Effect returns the effect record under key; store.ErrNotFound when there is none.
func (s *Store) Effect(ctx context.Context, key string) (*store.Effect, error) {
	if err := store.CheckText("effect key", key); err != nil {
		return nil, fmt.Errorf("effect: %w", err)
	}
	var r effectRow
	err := r.scan(s.pool.QueryRow(ctx, s.q.readEffect, key))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("effect %s: %w", key, store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("effect %s: %w", key, err)
	}
	return r.effect(), nil
}

// Effects lists the effect records f selects, ordered by key.
func (s *Store) Effects(ctx context.Context, f store.EffectFilter) ([]*store.Effect, error) {
	q, args := s.effectsQuery(f)
	return list(ctx, s, "effects", q, args, scanEffect)
}

// unsettledWhere is the condition of the index effects_unsettled (migration 20).
const unsettledWhere = `(state IN ('ambiguous', 'executing') OR conflict <> '')`

// effectsQuery is the read of Effects: each selection through the index that holds it, where
// one does (TestEffectReadPlans).
func (s *Store) effectsQuery(f store.EffectFilter) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	switch {
	case f.Unsettled && s.q.legacy:
		where = append(where, `state IN ('ambiguous', 'executing')`) // no outcome conflicts before that schema
	case f.Unsettled:
		where = append(where, unsettledWhere)
	case f.State == "":
	case f.State == store.Failed:
		where = append(where, `state = 'failed'`)
	case f.State == store.Ambiguous, f.State == store.Executing:
		where = append(where, `state = `+arg(string(f.State)))
		if !s.q.legacy {
			where = append(where, unsettledWhere)
		}
	default:
		where = append(where, `state = `+arg(string(f.State)))
	}
	if f.After != "" {
		where = append(where, `effect_key > `+arg(f.After))
	}
	q := `SELECT ` + s.q.effectRead + ` FROM ` + s.quoted() + `.effects`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY effect_key`
	if f.Limit > 0 {
		q += ` LIMIT ` + arg(f.Limit)
	}
	return q, args
}

// Approval returns the approval request id; store.ErrNotFound when there is none.
func (s *Store) Approval(ctx context.Context, id string) (*store.Approval, error) {
	if err := store.CheckText("approval id", id); err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	var a *store.Approval
	err := s.readTx(ctx, "begin read", func(tx pgx.Tx) error {
		var r approvalRow
		if err := r.scan(tx.QueryRow(ctx, s.q.readApproval, id)); err != nil {
			return err
		}
		a = r.approval()
		return s.readAnswers(ctx, tx, a)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("approval %s: %w", id, store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("approval %s: %w", id, err)
	}
	return a, nil
}

// Approvals lists approval requests, oldest first, with their answers, read in one snapshot.
func (s *Store) Approvals(ctx context.Context, f store.ApprovalFilter) ([]*store.Approval, error) {
	var out []*store.Approval
	q, args := s.q.listApprovals, []any{string(f.Status)}
	if f.ActionHash != "" {
		q, args = s.q.listApprovalsOfHash, append(args, f.ActionHash)
	}
	err := s.readTx(ctx, "list approvals", func(tx pgx.Tx) (err error) {
		out, err = listIn(ctx, tx, "approvals", q, args, scanApproval)
		if err == nil {
			err = s.readAnswers(ctx, tx, out...)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readTx runs fn in a REPEATABLE READ, read-only transaction: every statement fn runs sees one
// snapshot, whatever commits meanwhile.
// what names the read in the error of a transaction that cannot begin; fn's error is returned
// as it is.
func (s *Store) readTx(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return fn(tx)
}

// optionalHead reads the chain head in tx: nil when its row is missing.
func (s *Store) optionalHead(ctx context.Context, tx pgx.Tx) (*receipt.Head, error) {
	var h receipt.Head
	switch err := tx.QueryRow(ctx, s.q.head).Scan(&h.Seq, &h.Hash); {
	case err == nil:
		return &h, nil
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	default:
		return nil, err
	}
}

// Receipts yields the receipts f selects in ascending seq order, streaming them from one query.
// Its filters combine with AND.
func (s *Store) Receipts(ctx context.Context, f store.ReceiptFilter) iter.Seq2[receipt.Sealed, error] {
	return func(yield func(receipt.Sealed, error) bool) {
		if err := f.Check(); err != nil {
			yield(receipt.Sealed{}, fmt.Errorf("list receipts: %w", err))
			return
		}
		fail := func(err error) { yield(receipt.Sealed{}, fmt.Errorf("list receipts: %w", err)) }
		var where []string
		var args []any
		add := func(cond string, v any) {
			args = append(args, v)
			where = append(where, strings.Replace(cond, "$?", "$"+strconv.Itoa(len(args)), 1))
		}
		if f.ActionID != "" {
			add("action_id = $?", f.ActionID)
		}
		if f.EffectKey != "" {
			add("effect_key = $?", f.EffectKey)
		}
		if f.ApprovalID != "" {
			// The index holds only non-empty approval ids (migration 3).
			add("approval_id = $? AND approval_id <> ''", f.ApprovalID)
		}
		if !f.Since.IsZero() {
			since, err := nanos(f.Since)
			if err != nil {
				fail(err)
				return
			}
			add("finished_at >= $?", since.Int64)
		}
		if f.AfterSeq > 0 {
			add("seq > $?", f.AfterSeq)
		}
		q := `SELECT ` + receiptColumns + ` FROM ` + s.q.receipts
		if len(where) > 0 {
			q += ` WHERE ` + strings.Join(where, " AND ")
		}
		if f.Last > 0 {
			q = `SELECT ` + receiptColumns + ` FROM (` + q + ` ORDER BY seq DESC LIMIT ` + strconv.Itoa(f.Last) + `) last ORDER BY seq`
		} else {
			q += ` ORDER BY seq`
		}
		eachIn(ctx, s.pool, "list receipts", q, args, func(row pgx.Row, r *receipt.Sealed) error {
			return row.Scan(&r.Seq, &r.Hash, &r.Doc)
		})(yield)
	}
}

// Head returns the chain head: seq 0 and no hash before the first receipt.
func (s *Store) Head(ctx context.Context) (receipt.Head, error) {
	var h receipt.Head
	err := s.pool.QueryRow(ctx, s.q.head).Scan(&h.Seq, &h.Hash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return receipt.Head{}, fmt.Errorf("chain head: %w", store.ErrHeadMissing)
	case err != nil:
		return receipt.Head{}, fmt.Errorf("chain head: %w", err)
	}
	return h, nil
}

// ReadChain calls fn with the chain head and every receipt with its index columns, read in one
// REPEATABLE READ, read-only transaction: one snapshot, whatever is appended meanwhile
// (store.ChainReader).
func (s *Store) ReadChain(ctx context.Context, fn func(head *receipt.Head, rows iter.Seq2[receipt.Sealed, error]) error) error {
	return s.readTx(ctx, "read chain", func(tx pgx.Tx) error {
		head, err := s.optionalHead(ctx, tx)
		if err != nil {
			return fmt.Errorf("read chain: chain head: %w", err)
		}
		return fn(head, s.chainRows(ctx, tx))
	})
}

// LastEventID returns the greatest event id, 0 for an empty log: one index lookup.
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	var id int64
	if err := s.pool.QueryRow(ctx, s.q.lastEventID).Scan(&id); err != nil {
		return 0, fmt.Errorf("last event id: %w", err)
	}
	return id, nil
}

// Events lists the events matching any of f's non-empty ids (all events for the zero filter),
// in id order.
func (s *Store) Events(ctx context.Context, f store.EventFilter) ([]*store.Event, error) {
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	if f.AfterID > 0 || f.Limit > 0 {
		var limit any // NULL: no limit
		if f.Limit > 0 {
			limit = f.Limit
		}
		return list(ctx, s, "events", s.q.listEventsAfter, []any{f.ActionID, f.EffectKey, f.ApprovalID, f.AfterID, limit}, scanEvent)
	}
	return list(ctx, s, "events", s.q.listEvents, []any{f.ActionID, f.EffectKey, f.ApprovalID}, scanEvent)
}

// list runs a query on the pool and scans every row; what names the rows in errors.
func list[T any](ctx context.Context, s *Store, what, q string, args []any, scan func(pgx.Row) (*T, error)) ([]*T, error) {
	return listIn(ctx, s.pool, what, q, args, scan)
}

// listIn is list in a transaction, or on any querier.
func listIn[T any](ctx context.Context, db pgQuerier, what, q string, args []any, scan func(pgx.Row) (*T, error)) ([]*T, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return out, nil
}

// into is scan in the form eachIn takes, for rows read as pointers.
func into[T any](scan func(pgx.Row) (*T, error)) func(pgx.Row, **T) error {
	return func(row pgx.Row, v **T) (err error) {
		*v, err = scan(row)
		return err
	}
}

// eachIn yields the rows of a query on db one at a time, each scanned by scan into a fresh T;
// what names the rows in errors. The query runs when the sequence is ranged over, and its rows
// are closed when the range ends.
func eachIn[T any](ctx context.Context, db pgQuerier, what, q string, args []any, scan func(pgx.Row, *T) error) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		rows, err := db.Query(ctx, q, args...)
		if err != nil {
			yield(zero, fmt.Errorf("%s: %w", what, err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			var v T
			if err := scan(rows, &v); err != nil {
				yield(zero, fmt.Errorf("%s: %w", what, err))
				return
			}
			if !yield(v, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(zero, fmt.Errorf("%s: %w", what, err))
		}
	}
}
