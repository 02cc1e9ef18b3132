package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Rows as SQLite holds them: times are INTEGER unix nanoseconds (NULL for the zero time), JSON is
// TEXT (NULL for none). Every write goes through the helpers here; every read through the scanners.

// binder converts values for binding and keeps the first conversion error.
type binder struct{ err error }

// time returns t as unix nanoseconds, or nil for the zero time.
func (b *binder) time(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return b.nanos(t)
}

// nanos is t as unix nanoseconds.
func (b *binder) nanos(t time.Time) int64 {
	n := t.UnixNano()
	if !time.Unix(0, n).Equal(t) && b.err == nil {
		b.err = fmt.Errorf("time %s is outside the range the store keeps (years 1678 to 2262)", t.UTC().Format(time.RFC3339))
	}
	return n
}

// json returns raw as text, or nil when empty.
func (b *binder) json(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
}

// timeArg is time as a typed argument: unix nanoseconds, or NULL for the zero time.
func (b *binder) timeArg(t time.Time) arg {
	if t.IsZero() {
		return arg{}
	}
	return integer(b.nanos(t))
}

// jsonArg is raw as a typed text argument, or NULL when empty. The argument shares raw's bytes
// (no copy): it must be bound before raw can change, which the statement methods do at once.
func jsonArg(raw json.RawMessage) arg {
	if len(raw) == 0 {
		return arg{}
	}
	return text(unsafe.String(&raw[0], len(raw)))
}

func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

func fromText(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

const effectColumns = `effect_key, state, attempt, action_id, action, action_hash, lease_expires_at, result, error, resolved_by, created_at, updated_at, arguments, note, conflict`

// notesVersion is the schema that added effects.arguments, note and conflict and approvals.note
// (migration 6). A reader of an older schema selects these stand-ins instead.
const notesVersion = 6

// deniedVersion is the schema that added approvals.previous_denied and previous_denied_by
// (migration 7).
const deniedVersion = 7

// preconditionVersion is the schema that added approvals.precondition_hash and precondition_at
// (migration 17).
const preconditionVersion = 17

const (
	effectColumnsBeforeNotes   = `effect_key, state, attempt, action_id, action, action_hash, lease_expires_at, result, error, resolved_by, created_at, updated_at, NULL, '', ''`
	approvalColumnsBeforeNotes = `approval_id, status, action_hash, action, action_name, agent, principal_user, policy_hash,
	created_at, expires_at, approver, answered_at, consumed_by, consumed_at, '', '', '', '', NULL`
	approvalColumnsBeforeDenied = `approval_id, status, action_hash, action, action_name, agent, principal_user, policy_hash,
	created_at, expires_at, approver, answered_at, consumed_by, consumed_at, note, '', '', '', NULL`
	approvalColumnsBeforePrecondition = `approval_id, status, action_hash, action, action_name, agent, principal_user, policy_hash,
	created_at, expires_at, approver, answered_at, consumed_by, consumed_at, note, previous_denied, previous_denied_by, '', NULL`
)

// approvalColumnsAt is the approval column list a reader selects from a schema at version
// (0: the latest).
func approvalColumnsAt(version int) string {
	switch {
	case version == 0:
		return approvalColumns
	case version < notesVersion:
		return approvalColumnsBeforeNotes
	case version < deniedVersion:
		return approvalColumnsBeforeDenied
	case version < preconditionVersion:
		return approvalColumnsBeforePrecondition
	}
	return approvalColumns
}

// effectSelect and approvalSelect are the column lists a reader selects from the store's schema.
func (s *Store) effectSelect() string {
	if s.beforeNotes() {
		return effectColumnsBeforeNotes
	}
	return effectColumns
}

// beforeNotes says a read-only store's schema predates effects.arguments, note and conflict.
func (s *Store) beforeNotes() bool { return s.version != 0 && s.version < notesVersion }

func (s *Store) approvalSelect() string { return approvalColumnsAt(s.version) }

func scanEffect(sc scanner) (*store.Effect, error) {
	var e store.Effect
	var state string
	var lease, created, updated sql.NullInt64
	var result, args sql.NullString
	if err := sc.Scan(&e.Key, &state, &e.Attempt, &e.ActionID, &e.Action, &e.ActionHash, &lease, &result,
		&e.Error, &e.ResolvedBy, &created, &updated, &args, &e.Note, &e.Conflict); err != nil {
		return nil, err
	}
	e.State = store.State(state)
	e.LeaseExpiresAt = fromNanos(lease)
	e.Result = fromText(result)
	e.Arguments = fromText(args)
	e.CreatedAt = fromNanos(created)
	e.UpdatedAt = fromNanos(updated)
	return &e, nil
}

// readEffect reads the effect under key, or nil when there is none.
func (s *Store) readEffect(ctx context.Context, key string) (*store.Effect, error) {
	e, err := scanEffect(s.r.QueryRowContext(ctx, `SELECT `+s.effectSelect()+` FROM effects WHERE effect_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return e, err
}

const (
	selectEffect            = `SELECT ` + effectColumns + ` FROM effects WHERE effect_key = ?`
	selectRecorded          = `SELECT 1 FROM receipts WHERE action_id = ? LIMIT 1`
	selectRecordedLinked    = `SELECT 1 FROM events WHERE action_id = ? AND seq IS NOT NULL LIMIT 1` // schema 22 on
	selectEffectBeforeNotes = `SELECT ` + effectColumnsBeforeNotes + ` FROM effects WHERE effect_key = ?`
)

// effect reads the effect under key in the transaction, or nil when there is none.
func (t *txn) effect(key string) (*store.Effect, error) {
	var e *store.Effect
	q := selectEffect
	if t.legacy {
		q = selectEffectBeforeNotes
	}
	_, err := t.c.queryRowArgs(q, []arg{text(key)}, func(sc scanner) (err error) {
		e, err = scanEffectRow(sc.(*zrow))
		return err
	})
	return e, err
}

// readRow reads, in a write, the one row q selects (scan reads it); store.ErrNotFound when there
// is none.
func readRow[T any](t *txn, q string, args []any, scan func(scanner) (*T, error)) (*T, error) {
	var v *T
	found, err := t.c.queryRow(q, args, func(sc scanner) (err error) {
		v, err = scan(sc)
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, store.ErrNotFound
	}
	return v, nil
}

// scanEffectRow is scanEffect reading the writer's row directly, with the same checks.
func scanEffectRow(r *zrow) (*store.Effect, error) {
	if n := r.st.ColumnCount(); n != 15 {
		return nil, fmt.Errorf("scan: 15 destinations for %d columns", n)
	}
	var rc rowCheck
	e := &store.Effect{
		Key: rc.text(r, 0), State: store.State(rc.text(r, 1)), Attempt: int(rc.integer(r, 2)), ActionID: rc.text(r, 3),
		Action: rc.text(r, 4), ActionHash: rc.text(r, 5), LeaseExpiresAt: fromNanos(rc.nullInteger(r, 6)),
		Result: fromText(rc.nullText(r, 7)), Error: rc.text(r, 8), ResolvedBy: rc.text(r, 9),
		CreatedAt: fromNanos(rc.nullInteger(r, 10)), UpdatedAt: fromNanos(rc.nullInteger(r, 11)),
		Arguments: fromText(rc.nullText(r, 12)), Note: rc.text(r, 13), Conflict: rc.text(r, 14),
	}
	if rc.err != nil {
		return nil, rc.err
	}
	return e, nil
}

const approvalColumns = `approval_id, status, action_hash, action, action_name, agent, principal_user, policy_hash,
	created_at, expires_at, approver, answered_at, consumed_by, consumed_at, note, previous_denied, previous_denied_by,
	precondition_hash, precondition_at`

func scanApproval(sc scanner) (*store.Approval, error) {
	var a store.Approval
	var status string
	var action sql.NullString
	var created, expires, answered, consumed, precondAt sql.NullInt64
	if err := sc.Scan(&a.ID, &status, &a.ActionHash, &action, &a.ActionName, &a.Agent, &a.User, &a.PolicyHash,
		&created, &expires, &a.Approver, &answered, &a.ConsumedBy, &consumed, &a.Note, &a.PreviousDenied,
		&a.PreviousDeniedBy, &a.PreconditionHash, &precondAt); err != nil {
		return nil, err
	}
	a.Status = store.ApprovalStatus(status)
	a.Action = fromText(action)
	a.CreatedAt = fromNanos(created)
	a.ExpiresAt = fromNanos(expires)
	a.AnsweredAt = fromNanos(answered)
	a.ConsumedAt = fromNanos(consumed)
	a.PreconditionAt = fromNanos(precondAt)
	return &a, nil
}

// readApproval reads the approval id, or nil when there is none.
func (s *Store) readApproval(ctx context.Context, tx *sql.Tx, id string) (*store.Approval, error) {
	a, err := scanApproval(tx.QueryRowContext(ctx, `SELECT `+s.approvalSelect()+` FROM approvals WHERE approval_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return a, err
}

// approval reads the approval id in the transaction, or nil when there is none.
func (t *txn) approval(id string) (*store.Approval, error) {
	var a *store.Approval
	_, err := t.c.queryRow(`SELECT `+approvalColumnsAt(t.version)+` FROM approvals WHERE approval_id = ?`, []any{id},
		func(sc scanner) (err error) {
			a, err = scanApproval(sc)
			return err
		})
	return a, err
}

// history reads, in the transaction, the requests of action hash still pending and the last
// one answered (store.ApprovalHistory).
func (t *txn) history(hash string) (store.ApprovalHistory, error) {
	var h store.ApprovalHistory
	cols := approvalColumnsAt(t.version)
	err := t.c.query(`SELECT `+cols+` FROM approvals WHERE action_hash = ? AND status = 'pending'`, []any{hash},
		func(sc scanner) error {
			a, err := scanApproval(sc)
			h.Pending = append(h.Pending, a)
			return err
		})
	if err != nil {
		return h, err
	}
	_, err = t.c.queryRow(`SELECT `+cols+` FROM approvals WHERE action_hash = ? AND status IN ('granted', 'denied', 'consumed')
		ORDER BY created_at DESC, approval_id DESC LIMIT 1`, []any{hash}, func(sc scanner) (err error) {
		h.Answered, err = scanApproval(sc)
		return err
	})
	return h, err
}

// errConcurrent reports a compare-and-set that matched no row. Under BEGIN IMMEDIATE nothing
// else can write between the read and the write, so this is a backstop that should never fire.
var errConcurrent = errors.New("the row changed under the transaction's lock")

// applyEffect writes an effect — an insert, or a compare-and-set on (key, state, attempt, action
// id) — and releases (or holds again) the budget charges of the attempt it writes.
func (t *txn) applyEffect(w *store.EffectWrite) error {
	if err := t.writeEffect(w); err != nil {
		return err
	}
	t.noteExecuting(w)
	return t.applyCharges(w)
}

// writeEffect writes an effect row: an insert, or a compare-and-set on (key, state, attempt,
// action id).
func (t *txn) writeEffect(w *store.EffectWrite) error {
	var b binder
	n := w.Next
	lease, result, created, updated := b.timeArg(n.LeaseExpiresAt), jsonArg(n.Result), b.timeArg(n.CreatedAt), b.timeArg(n.UpdatedAt)
	args := jsonArg(n.Arguments)
	if b.err != nil {
		return fmt.Errorf("effect %s: %w", n.Key, b.err)
	}
	if w.Prev == nil {
		// The primary key backs the lock up: a second insert of one key fails instead of
		// overwriting.
		var err error
		if t.legacy {
			_, err = t.c.execArgs(`INSERT INTO effects (effect_key, state, attempt, action_id, action, action_hash, lease_expires_at,
				result, error, resolved_by, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				text(n.Key), text(string(n.State)), integer(int64(n.Attempt)), text(n.ActionID), text(n.Action), text(n.ActionHash),
				lease, result, text(n.Error), text(n.ResolvedBy), created, updated)
		} else {
			_, err = t.c.execArgs(`INSERT INTO effects (`+effectColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				text(n.Key), text(string(n.State)), integer(int64(n.Attempt)), text(n.ActionID), text(n.Action), text(n.ActionHash),
				lease, result, text(n.Error), text(n.ResolvedBy), created, updated, args, text(n.Note), text(n.Conflict))
		}
		if err != nil {
			return fmt.Errorf("effect %s: %w", n.Key, err)
		}
		return nil
	}
	p := w.Prev
	if t.legacy {
		rows, err := t.c.execArgs(`UPDATE effects SET state = ?, attempt = ?, action_id = ?, action = ?, action_hash = ?,
			lease_expires_at = ?, result = ?, error = ?, resolved_by = ?, created_at = ?, updated_at = ?
			WHERE effect_key = ? AND state = ? AND attempt = ? AND action_id = ?`,
			text(string(n.State)), integer(int64(n.Attempt)), text(n.ActionID), text(n.Action), text(n.ActionHash), lease, result,
			text(n.Error), text(n.ResolvedBy), created, updated,
			text(p.Key), text(string(p.State)), integer(int64(p.Attempt)), text(p.ActionID))
		return checkRows(rows, err, "effect "+p.Key)
	}
	rows, err := t.c.execArgs(`UPDATE effects SET state = ?, attempt = ?, action_id = ?, action = ?, action_hash = ?,
		lease_expires_at = ?, result = ?, error = ?, resolved_by = ?, created_at = ?, updated_at = ?, arguments = ?, note = ?,
		conflict = ?
		WHERE effect_key = ? AND state = ? AND attempt = ? AND action_id = ?`,
		text(string(n.State)), integer(int64(n.Attempt)), text(n.ActionID), text(n.Action), text(n.ActionHash), lease, result,
		text(n.Error), text(n.ResolvedBy), created, updated, args, text(n.Note), text(n.Conflict),
		text(p.Key), text(string(p.State)), integer(int64(p.Attempt)), text(p.ActionID))
	return checkRows(rows, err, "effect "+p.Key)
}

// applyApproval writes an approval, compare-and-set on its previous status.
func (t *txn) applyApproval(w *store.ApprovalWrite) error {
	var b binder
	n := w.Next
	args := []any{string(n.Status), n.ActionHash, b.json(n.Action), n.ActionName, n.Agent, n.User, n.PolicyHash,
		b.time(n.CreatedAt), b.time(n.ExpiresAt), n.Approver, b.time(n.AnsweredAt), n.ConsumedBy, b.time(n.ConsumedAt),
		n.Note, n.ID, string(w.PrevStatus)}
	if b.err != nil {
		return fmt.Errorf("approval %s: %w", n.ID, b.err)
	}
	q := `UPDATE approvals SET status = ?, action_hash = ?, action = ?, action_name = ?, agent = ?,
		principal_user = ?, policy_hash = ?, created_at = ?, expires_at = ?, approver = ?, answered_at = ?, consumed_by = ?,
		consumed_at = ?, note = ? WHERE approval_id = ? AND status = ?`
	if t.legacy {
		q = `UPDATE approvals SET status = ?, action_hash = ?, action = ?, action_name = ?, agent = ?,
		principal_user = ?, policy_hash = ?, created_at = ?, expires_at = ?, approver = ?, answered_at = ?, consumed_by = ?,
		consumed_at = ? WHERE approval_id = ? AND status = ?`
		args = append(args[:13], args[14:]...)
	}
	rows, err := t.c.exec(q, args...)
	return checkRows(rows, err, "approval "+n.ID)
}

// checkRows requires a compare-and-set to have changed exactly one row.
func checkRows(n int64, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n != 1 {
		return fmt.Errorf("%s: %w", what, errConcurrent)
	}
	return nil
}

// eventsPerInsert is how many events one INSERT statement writes: a call writes up to four in
// one transaction, and one statement for all of them costs a quarter of four.
const eventsPerInsert = 8

// insertEvents appends events and returns them as written: with their ids, and now as the
// time of an event that had none. The ids of one multi-row INSERT are consecutive and end at
// its last rowid: id is the rowid (INTEGER PRIMARY KEY, without AUTOINCREMENT since schema 4),
// and SQLite gives each row inserted without one the largest rowid in the table plus one, in
// VALUES order. Nothing else can insert in between, because this transaction holds the only
// write lock, and the largest id is that of the last event written, because events are never
// deleted. (SQLite would pick a random unused rowid only once the largest reached 2^63-1.)
//
// link (schema 22 on; nil before, and when the write appends no receipt) is the receipt the same
// write appends: the last row of its action and effect carries its seq, or a row of its own
// links it when no row has them.
func (t *txn) insertEvents(events []store.Event, now time.Time, link *receiptLink) ([]store.Event, error) {
	if t.eventRows() {
		return t.insertEventRows(events, now, link)
	}
	written := make([]store.Event, 0, len(events))
	var args [eventsPerInsert * 6]arg
	for len(events) > 0 {
		chunk := events[:min(len(events), eventsPerInsert)]
		events = events[len(chunk):]
		start := len(written)
		for i, e := range chunk {
			if e.Time.IsZero() {
				e.Time = now
			}
			var b binder
			at := b.timeArg(e.Time)
			if b.err != nil {
				return nil, fmt.Errorf("event %s: %w", e.Kind, b.err)
			}
			if e.Kind == "" {
				return nil, errEventKind
			}
			args[i*6], args[i*6+1], args[i*6+2] = text(e.Kind), at, text(e.ActionID)
			args[i*6+3], args[i*6+4], args[i*6+5] = text(e.EffectKey), text(e.ApprovalID), jsonArg(e.Payload)
			written = append(written, e)
		}
		last, err := t.c.insertArgs(insertEventsSQL[len(chunk)], args[:len(chunk)*6]...)
		if err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		for i := range written[start:] {
			written[start+i].ID = last - int64(len(chunk)-1-i)
		}
	}
	return written, nil
}

// insertEventsSQL[n] inserts n events.
var insertEventsSQL = func() (q [eventsPerInsert + 1]string) {
	for n := 1; n <= eventsPerInsert; n++ {
		q[n] = `INSERT INTO events (kind, at, action_id, effect_key, approval_id, payload) VALUES ` +
			strings.TrimSuffix(strings.Repeat(`(?, ?, ?, ?, ?, ?), `, n), ", ")
	}
	return q
}()

// appendReceipt seals rc as the successor of the chain head, stores it and moves the head (in
// the transaction's memory: the head row is written once, at commit). From schema 22 on a row
// of the events table links it (eventrows.go): appendReceipt writes one of its own; apply,
// which writes the events of the same write first, puts the link in their row instead.
func (t *txn) appendReceipt(rc *receipt.Receipt) (receipt.Sealed, error) {
	sealed, err := t.sealReceipt(rc)
	if err != nil {
		return receipt.Sealed{}, err
	}
	if l := t.linkFor(rc, sealed.Seq); l != nil {
		if err := t.insertLinkRow(l); err != nil {
			return receipt.Sealed{}, err
		}
	}
	return sealed, t.storeReceipt(rc, sealed)
}

// sealReceipt seals rc as the successor of the chain head (or of the receipt this transaction
// appended last); storeReceipt stores it.
func (t *txn) sealReceipt(rc *receipt.Receipt) (receipt.Sealed, error) {
	if rc.ReceiptID == "" {
		return receipt.Sealed{}, errors.New("receipt has no receipt_id")
	}
	if err := t.readHead(); err != nil {
		return receipt.Sealed{}, err
	}
	seq, prev := receipt.Next(t.head)
	return receipt.Seal(rc, seq, prev)
}

// storeReceipt stores the receipt sealReceipt sealed and moves the head to it.
func (t *txn) storeReceipt(rc *receipt.Receipt, sealed receipt.Sealed) error {
	seq := sealed.Seq
	var b binder
	finished := b.timeArg(rc.FinishedAt)
	if b.err != nil {
		return fmt.Errorf("receipt %d: %w", seq, b.err)
	}
	if finished.kind == argNull {
		finished = integer(0)
	}
	_, err := t.c.execArgs(`INSERT INTO receipts (seq, hash, receipt_id, action_id, action, effect_key, approval_id, result, finished_at, doc)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		integer(seq), text(sealed.Hash), text(rc.ReceiptID), text(rc.ActionID), text(rc.Action), text(rc.EffectKey),
		text(rc.ApprovalID), text(rc.Result), finished, jsonArg(sealed.Doc))
	if err != nil {
		return fmt.Errorf("receipt %d: %w", seq, err)
	}
	if seq%spanReceipts == 0 && t.receiptSpans() {
		if err := t.writeSpan(seq); err != nil {
			return fmt.Errorf("receipt %d: %w", seq, err)
		}
	}
	t.head = receipt.Head{Seq: seq, Hash: sealed.Hash}
	return nil
}
