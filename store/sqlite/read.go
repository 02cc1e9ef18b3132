package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Reads go through the reader pool and never change a row: an executing record whose lease has
// lapsed is reported executing until a reservation meets it (docs/guarantees.md#the-retry-table).

// Effect returns the effect record under key; store.ErrNotFound when there is none.
func (s *Store) Effect(ctx context.Context, key string) (*store.Effect, error) {
	if err := store.CheckText("effect key", key); err != nil {
		return nil, fmt.Errorf("effect: %w", err)
	}
	e, err := s.readEffect(ctx, key)
	switch {
	case err != nil:
		return nil, fmt.Errorf("effect %s: %w", key, err)
	case e == nil:
		return nil, fmt.Errorf("effect %s: %w", key, store.ErrNotFound)
	}
	return e, nil
}

// Effects returns the effect records f selects, ordered by key.
func (s *Store) Effects(ctx context.Context, f store.EffectFilter) ([]*store.Effect, error) {
	q, args := s.effectsQuery(f)
	out, err := collect(ctx, s.r, q, args, scanEffect)
	if err != nil {
		return nil, fmt.Errorf("effects: %w", err)
	}
	return out, nil
}

// unsettledWhere selects the effects a person may have to settle or that are executing. It is
// the condition of the index effects_unsettled of schema 23 (migrations/0023), written as the
// index writes it: a read that names it in its WHERE is one SQLite serves from that index. From
// schema 24 these effects are found through unsettledKeys (executing.go).
const unsettledWhere = `(state IN ('ambiguous', 'executing') OR conflict <> '')`

// effectsQuery is the read of Effects: each selection through the index that holds it, where
// one does.
func (s *Store) effectsQuery(f store.EffectFilter) (string, []any) {
	var where []string
	var args []any
	switch {
	case f.Unsettled && s.beforeNotes():
		where = append(where, `state IN ('ambiguous', 'executing')`) // no outcome conflicts before that schema
	case f.Unsettled && s.executingWindow():
		return s.unsettledQuery(f)
	case f.Unsettled:
		where = append(where, unsettledWhere)
	case f.State == "":
	case f.State == store.Failed:
		// The index effects_state holds failed and ambiguous effects only (migration 4); the
		// repeated condition lets SQLite use it.
		where = append(where, `state = 'failed' AND state IN ('failed', 'ambiguous')`)
	case f.State == store.Ambiguous && s.executingWindow():
		where = append(where, `state = 'ambiguous' AND `+attentionWhere)
	case f.State == store.Executing && s.executingWindow():
		where = append(where, `state = 'executing' AND effect_key IN (`+executingKeys+`)`)
	case f.State == store.Ambiguous:
		where = append(where, `state = 'ambiguous' AND `+unsettledWhere)
	case f.State == store.Executing:
		where = append(where, `state = 'executing' AND `+unsettledWhere)
	default:
		where = append(where, `state = ?`)
		args = append(args, string(f.State))
	}
	if f.After != "" {
		where = append(where, `effect_key > ?`)
		args = append(args, f.After)
	}
	q := `SELECT ` + s.effectSelect() + ` FROM effects`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY effect_key`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return q, args
}

// unsettledQuery is the read of the effects a person may have to settle, from schema 24: those
// that need a person, read from effects_attention (which carries every column from schema 25),
// and the executing ones, looked up by the keys the mark and the parked keys give. The two parts
// select apart (an executing effect with an outcome conflict is in the first) and each comes in
// key order, so SQLite merges them without a sort.
func (s *Store) unsettledQuery(f store.EffectFilter) (string, []any) {
	var after string
	var args []any
	if f.After != "" {
		after = ` AND effect_key > ?`
		args = append(args, f.After)
	}
	cols := s.effectSelect()
	q := `SELECT ` + cols + ` FROM effects WHERE ` + attentionWhere + after +
		` UNION ALL SELECT ` + cols + ` FROM effects WHERE state = 'executing' AND conflict = '' AND effect_key IN (` + executingKeys + `)` + after +
		` ORDER BY effect_key`
	args = append(args, args...) // the After bound, for each part
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return q, args
}

// Approval returns the approval request id; store.ErrNotFound when there is none. The request
// and its answers are read in one read transaction: one snapshot, so an answer committed
// meanwhile cannot show beside a status from before it.
func (s *Store) Approval(ctx context.Context, id string) (*store.Approval, error) {
	if err := store.CheckText("approval id", id); err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	var a *store.Approval
	err := s.readTx(ctx, "begin read", func(tx *sql.Tx) (err error) {
		if a, err = s.readApproval(ctx, tx, id); err == nil && a != nil {
			err = s.readAnswers(ctx, tx, a)
		}
		return err
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("approval %s: %w", id, err)
	case a == nil:
		return nil, fmt.Errorf("approval %s: %w", id, store.ErrNotFound)
	}
	return a, nil
}

// Approvals returns the approval requests f selects, oldest first, with their answers, read in
// one read transaction.
func (s *Store) Approvals(ctx context.Context, f store.ApprovalFilter) ([]*store.Approval, error) {
	q := `SELECT ` + s.approvalSelect() + ` FROM approvals`
	var where []string
	var args []any
	if f.Status != "" {
		where = append(where, `status = ?`)
		args = append(args, string(f.Status))
	}
	if f.ActionHash != "" {
		where = append(where, `action_hash = ?`)
		args = append(args, f.ActionHash)
	}
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	var out []*store.Approval
	err := s.readTx(ctx, "begin read", func(tx *sql.Tx) (err error) {
		if out, err = collect(ctx, tx, q+` ORDER BY created_at, approval_id`, args, scanApproval); err == nil {
			err = s.readAnswers(ctx, tx, out...)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	return out, nil
}

// readTx runs fn in a read transaction of the reader pool: every statement fn runs sees one
// snapshot of the database (WAL), whatever commits meanwhile. what names the read in the error
// of a transaction that cannot begin; fn's error is returned as it is.
func (s *Store) readTx(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
	return fn(tx)
}

// optionalHead reads the chain head in tx: nil when its row is missing.
func optionalHead(ctx context.Context, tx *sql.Tx) (*receipt.Head, error) {
	switch h, err := readHead(ctx, tx); {
	case err == nil:
		return &h, nil
	case errors.Is(err, store.ErrHeadMissing):
		return nil, nil
	default:
		return nil, err
	}
}

// Receipts yields the receipts f selects in ascending seq order. Rows are read as they are
// yielded, so a chain of any length is walked in constant memory; breaking out of the loop
// releases the connection.
func (s *Store) Receipts(ctx context.Context, f store.ReceiptFilter) iter.Seq2[receipt.Sealed, error] {
	return func(yield func(receipt.Sealed, error) bool) {
		if err := f.Check(); err != nil {
			yield(receipt.Sealed{}, fmt.Errorf("list receipts: %w", err))
			return
		}
		if f.Last < 0 {
			yield(receipt.Sealed{}, fmt.Errorf("receipts: last %d is negative", f.Last))
			return
		}
		q, args, err := receiptsQuery(f, s.receiptLinks(), s.receiptSpans())
		if err != nil {
			yield(receipt.Sealed{}, fmt.Errorf("receipts: %w", err))
			return
		}
		if err := s.receiptRows(ctx, q, args, yield); err != nil {
			yield(receipt.Sealed{}, fmt.Errorf("receipts: %w", err))
		}
	}
}

// receiptsQuery is the query of Receipts(f) and its arguments; links: the schema finds receipts
// by action and effect through the event rows that link them (schema 22 on); spans: it finds a
// window's receipts through the spans of the chain (schema 26 on).
func receiptsQuery(f store.ReceiptFilter, links, spans bool) (string, []any, error) {
	var where, keys []string
	var args, keyArgs []any
	for _, k := range []struct{ col, val string }{{"action_id", f.ActionID}, {"effect_key", f.EffectKey}} {
		if k.val != "" {
			keys = append(keys, k.col+" = ?")
			keyArgs = append(keyArgs, k.val)
		}
	}
	if len(keys) > 0 {
		where, args = append(where, keys...), append(args, keyArgs...)
		if links {
			// From schema 22 receipts have no index of their own on these columns: the event
			// rows that link them do (eventrows.go).
			// Qualified: an unqualified seq would name the receipt's own when events has none.
			where = append(where, "seq IN (SELECT v.seq FROM events v WHERE v."+strings.Join(keys, " AND v.")+" AND v.seq IS NOT NULL)")
			args = append(args, keyArgs...)
		}
	}
	if f.ApprovalID != "" {
		// The index holds only non-empty approval ids (migration 3); the repeated condition
		// lets SQLite use it.
		where = append(where, "approval_id = ? AND approval_id <> ''")
		args = append(args, f.ApprovalID)
	}
	if !f.Since.IsZero() {
		var b binder
		since := b.time(f.Since)
		if b.err != nil {
			return "", nil, fmt.Errorf("since: %w", b.err)
		}
		// The seqs of the window — through the spans of the chain from schema 26 (spans.go),
		// through the finished_at index before — then their rows by seq: the plain
		// "finished_at >= ?" beside ORDER BY seq was answered by scanning the whole table in
		// seq order (SQLite prefers the scan that needs no sort), in proportion to the store
		// rather than to the window.
		if spans {
			where = append(where, "seq IN ("+windowSeqs+")")
			args = append(args, since, since, since)
		} else {
			where = append(where, "seq IN (SELECT seq FROM receipts WHERE finished_at >= ?)")
			args = append(args, since)
		}
	}
	if f.AfterSeq > 0 {
		where = append(where, "seq > ?")
		args = append(args, f.AfterSeq)
	}
	q := `SELECT seq, hash, doc FROM receipts`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	if f.Last > 0 {
		q = `SELECT seq, hash, doc FROM (` + q + ` ORDER BY seq DESC LIMIT ?) ORDER BY seq`
		args = append(args, f.Last)
	} else {
		q += ` ORDER BY seq`
	}
	return q, args, nil
}

// Head returns the chain head: seq 0 and an empty hash before the first receipt.
func (s *Store) Head(ctx context.Context) (receipt.Head, error) {
	h, err := readHead(ctx, s.r)
	if err != nil {
		return receipt.Head{}, fmt.Errorf("chain head: %w", err)
	}
	return h, nil
}

// readHead reads the chain head row; store.ErrHeadMissing when it is gone.
func readHead(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (receipt.Head, error) {
	var h receipt.Head
	err := q.QueryRowContext(ctx, `SELECT seq, hash FROM chain_head WHERE id = 1`).Scan(&h.Seq, &h.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return receipt.Head{}, store.ErrHeadMissing
	}
	return h, err
}

// ReadChain calls fn with the chain head and every receipt with its index columns, read in one
// read transaction: in WAL mode it sees the database as of its first read, whatever is appended
// meanwhile (store.ChainReader).
func (s *Store) ReadChain(ctx context.Context, fn func(head *receipt.Head, rows iter.Seq2[receipt.Sealed, error]) error) error {
	return s.readTx(ctx, "read chain", func(tx *sql.Tx) error {
		head, err := optionalHead(ctx, tx)
		if err != nil {
			return fmt.Errorf("read chain: chain head: %w", err)
		}
		return fn(head, chainRows(ctx, tx))
	})
}

// LastEventID returns the greatest event id, 0 for an empty log: one index lookup.
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	var id int64
	q := `SELECT COALESCE(MAX(id), 0) FROM events`
	if s.eventRows() {
		q = `SELECT COALESCE((SELECT id + COALESCE(n, 1) - 1 FROM events WHERE id > 0 ORDER BY id DESC LIMIT 1), 0)`
	}
	if err := s.r.QueryRowContext(ctx, q).Scan(&id); err != nil {
		return 0, fmt.Errorf("last event id: %w", err)
	}
	return id, nil
}

// Events returns the events matching any of f's non-empty ids (all of them for the zero filter),
// in id order.
func (s *Store) Events(ctx context.Context, f store.EventFilter) ([]*store.Event, error) {
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	var or []string
	var args []any
	for _, c := range []struct{ cond, val string }{
		{"action_id = ?", f.ActionID},
		{"effect_key = ?", f.EffectKey},
		// The index holds only non-empty approval ids (migration 3).
		{"(approval_id = ? AND approval_id <> '')", f.ApprovalID},
	} {
		if c.val != "" {
			or = append(or, c.cond)
			args = append(args, c.val)
		}
	}
	// A row holds up to maxEventsPerRow events from its id on: the event after AfterID may be in
	// a row that starts up to maxEventsPerRow-1 ids lower, and as many rows may hold none past
	// AfterID, so the query reads that many more rows than Limit and the events are cut here.
	q := `SELECT ` + eventRowColumns(s.eventRows()) + ` FROM events`
	where := []string{`id > 0`} // rows with negative ids only link receipts (schema 22)
	if len(or) > 0 {
		where = append(where, `(`+strings.Join(or, " OR ")+`)`)
	}
	if f.AfterID > 0 {
		where = append(where, `id > ?`)
		args = append(args, f.AfterID-(maxEventsPerRow-1))
	}
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit+maxEventsPerRow-1)
	}
	rows, err := collect(ctx, s.r, q, args, scanEventRow)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	var out []*store.Event
	for _, row := range rows {
		for i := range *row {
			e := &(*row)[i]
			if e.ID <= f.AfterID {
				continue
			}
			if f.Limit > 0 && len(out) == f.Limit {
				return out, nil
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// scanEventRow scans a row of the events table (eventRowColumns) into the events it holds.
func scanEventRow(sc scanner) (*[]store.Event, error) {
	var e store.Event
	var at, n sql.NullInt64
	var payload, more sql.NullString
	if err := sc.Scan(&e.ID, &e.Kind, &at, &e.ActionID, &e.EffectKey, &e.ApprovalID, &payload, &n, &more); err != nil {
		return nil, err
	}
	e.Time = fromNanos(at)
	e.Payload = fromText(payload)
	evs, err := expandEventRow(e, n, more)
	if err != nil {
		return nil, err
	}
	return &evs, nil
}

// rowsQuerier is the reader pool or a read transaction on it.
type rowsQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// collect runs a query and scans every row.
func collect[T any](ctx context.Context, db rowsQuerier, q string, args []any, scan func(scanner) (*T, error)) ([]*T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// collectOne runs a query for the one row a unique key selects; store.ErrNotFound when there is
// none.
func collectOne[T any](ctx context.Context, db rowsQuerier, q string, args []any, scan func(scanner) (*T, error)) (*T, error) {
	out, err := collect(ctx, db, q, args, scan)
	switch {
	case err != nil:
		return nil, err
	case len(out) == 0:
		return nil, store.ErrNotFound
	}
	return out[0], nil
}

// each yields the rows of a query on db one at a time, each scanned by scan into a fresh T;
// what names the rows in errors. The query runs when the sequence is ranged over, and its rows
// are closed when the range ends.
func each[T any](ctx context.Context, db rowsQuerier, what, q string, args []any, scan func(scanner, *T) error) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		rows, err := db.QueryContext(ctx, q, args...)
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
