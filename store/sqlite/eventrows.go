package sqlite

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Since schema 21 the events one write appends for one action, effect and request are one row
// of the events table: the first event in the row's columns, n the number of events the row
// holds (NULL for one) and more the others as a JSON array (migrations/0021_event_rows.sql).
// A reservation writes its three events as one row: one B-tree insert and one entry in each
// event index instead of three, and one statement.

// eventRowsVersion is the schema version from which a row may hold several events.
const eventRowsVersion = 21

// maxEventsPerRow bounds a row (the CHECK on n): a reader resuming after an event id finds the
// row holding it among the rows whose first id is at most maxEventsPerRow-1 lower.
const maxEventsPerRow = 8

// receiptLinksVersion is the schema version from which receipts are found by action and effect
// through the event indexes (migrations/0022_receipt_links.sql): the event row a write appends
// for a receipt's action and effect carries the receipt's seq, and a write whose receipt has no
// such row appends a row that only links it, with id -seq and kind ”.
const receiptLinksVersion = 22

// receiptLink is a receipt an event row links: its seq, action and effect.
type receiptLink struct {
	seq       int64
	actionID  string
	effectKey string
}

// linkFor returns the link rc needs, sealed at seq: nil before schema 22, and for a receipt
// that names neither an action nor an effect (nothing looks it up by them).
func (t *txn) linkFor(rc *receipt.Receipt, seq int64) *receiptLink {
	if !t.receiptLinks() || rc.ActionID == "" && rc.EffectKey == "" {
		return nil
	}
	return &receiptLink{seq: seq, actionID: rc.ActionID, effectKey: rc.EffectKey}
}

// receiptLinks reports whether the transaction's schema finds receipts through event rows.
func (t *txn) receiptLinks() bool { return t.version == 0 || t.version >= receiptLinksVersion }

// receiptLinks reports whether the store's schema finds receipts through event rows.
func (s *Store) receiptLinks() bool { return s.version == 0 || s.version >= receiptLinksVersion }

// insertLinkRow appends the row that links a receipt no event row of its write links.
func (t *txn) insertLinkRow(l *receiptLink) error {
	_, err := t.c.execArgs(`INSERT INTO events (id, kind, at, action_id, effect_key, approval_id, seq) VALUES (?, '', 0, ?, ?, '', ?)`,
		integer(-l.seq), text(l.actionID), text(l.effectKey), integer(l.seq))
	if err != nil {
		return fmt.Errorf("receipt %d: link: %w", l.seq, err)
	}
	return nil
}

// eventRows reports whether the transaction's schema stores several events in a row.
func (t *txn) eventRows() bool { return t.version == 0 || t.version >= eventRowsVersion }

// eventRows reports whether the store's schema stores several events in a row.
func (s *Store) eventRows() bool { return s.version == 0 || s.version >= eventRowsVersion }

// eventRowColumns are the columns a reader selects for the events of a row: n and more exist
// from schema 21 on (a reader of an older store reads one event a row).
func eventRowColumns(rows bool) string {
	if rows {
		return `id, kind, at, action_id, effect_key, approval_id, payload, n, more`
	}
	return `id, kind, at, action_id, effect_key, approval_id, payload, NULL, NULL`
}

// insertEventRowSQL appends one row; its id follows the last event of the row with the greatest
// id (1 in an empty table). That row is the last written: this transaction holds the only write
// lock, and pruning keeps the newest row.
// From schema 22 a row may also carry the seq of the receipt its write appended.
const (
	insertEventRowSQL = `INSERT INTO events (id, kind, at, action_id, effect_key, approval_id, payload, n, more)
	VALUES (COALESCE((SELECT id + COALESCE(n, 1) FROM events WHERE id > 0 ORDER BY id DESC LIMIT 1), 1), ?, ?, ?, ?, ?, ?, ?, ?)`
	insertLinkedEventRowSQL = `INSERT INTO events (id, kind, at, action_id, effect_key, approval_id, payload, n, more, seq)
	VALUES (COALESCE((SELECT id + COALESCE(n, 1) FROM events WHERE id > 0 ORDER BY id DESC LIMIT 1), 1), ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// sameRow reports whether b may share a row with a: a row's events share their action, effect
// and request, which the indexes hold once for the row. An event whose payload is not valid
// JSON is not put in the more array (it would spoil the document); it opens its own row.
func sameRow(a, b *store.Event) bool {
	return a.ActionID == b.ActionID && a.EffectKey == b.EffectKey && a.ApprovalID == b.ApprovalID &&
		(len(b.Payload) == 0 || json.Valid(b.Payload))
}

// insertEventRows appends events as rows of up to maxEventsPerRow events that share an action,
// effect and request; written holds them with their ids and times. The last row of link's
// action and effect carries its seq; when none has them, a row of its own links it.
func (t *txn) insertEventRows(events []store.Event, now time.Time, link *receiptLink) ([]store.Event, error) {
	linkAt := -1 // the index in events of the last event of link's action and effect: its row carries link
	if link != nil {
		for i := len(events) - 1; i >= 0; i-- {
			if events[i].ActionID == link.actionID && events[i].EffectKey == link.effectKey {
				linkAt = i
				break
			}
		}
		if linkAt < 0 {
			if err := t.insertLinkRow(link); err != nil {
				return nil, err
			}
		}
	}
	written := make([]store.Event, 0, len(events))
	more := t.c.more
	defer func() { t.c.more = more[:0] }()
	for len(events) > 0 {
		n := 1
		for n < len(events) && n < maxEventsPerRow && sameRow(&events[0], &events[n]) {
			n++
		}
		row := events[:n]
		events = events[n:]
		first := len(written)
		var b binder
		more = more[:0]
		for i, e := range row {
			if e.Time.IsZero() {
				e.Time = now
			}
			if e.Kind == "" {
				return nil, errEventKind
			}
			at := b.nanos(e.Time)
			if b.err != nil {
				return nil, fmt.Errorf("event %s: %w", e.Kind, b.err)
			}
			if i > 0 {
				var err error
				if more, err = appendMoreEvent(more, i == 1, at, &e); err != nil {
					return nil, err
				}
			}
			written = append(written, e)
		}
		if n > 1 {
			more = append(more, ']')
		}
		e := &written[first]
		count, moreArg := arg{}, arg{}
		if n > 1 {
			count, moreArg = integer(int64(n)), jsonArg(more)
		}
		q, args := insertEventRowSQL, [...]arg{text(e.Kind), integer(e.Time.UnixNano()), text(e.ActionID),
			text(e.EffectKey), text(e.ApprovalID), jsonArg(e.Payload), count, moreArg, {}}
		bound := len(args) - 1 // the seq only for the row that links the write's receipt
		if linkAt >= first && linkAt < first+n {
			q, args[8], bound = insertLinkedEventRowSQL, integer(link.seq), len(args)
		}
		id, err := t.c.insertArgs(q, args[:bound]...)
		if err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		t.rowIDs = append(t.rowIDs, idRange{id, id + int64(n)})
		for i := range written[first:] {
			written[first+i].ID = id + int64(i)
		}
	}
	return written, nil
}

// errEventKind refuses an event without a kind.
var errEventKind = errors.New("event without a kind")

// appendMoreEvent appends e to the more array being built in buf (opening it when first).
func appendMoreEvent(buf []byte, first bool, at int64, e *store.Event) ([]byte, error) {
	if first {
		buf = append(buf, '[')
	} else {
		buf = append(buf, ',')
	}
	buf = append(buf, `{"at":`...)
	buf = strconv.AppendInt(buf, at, 10)
	buf = append(buf, `,"kind":`...)
	buf, err := canon.AppendString(buf, e.Kind)
	if err != nil {
		return nil, fmt.Errorf("event kind: %w", err)
	}
	buf = append(buf, `,"payload":`...)
	if len(e.Payload) == 0 {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, e.Payload...)
	}
	return append(buf, '}'), nil
}

// moreEvent is an event of a row's more array.
type moreEvent struct {
	At      int64           `json:"at"`
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

// expandEventRow returns the events a row holds: first, then those of more, each with the row's
// action, effect and request and the ids after first's.
func expandEventRow(first store.Event, n sql.NullInt64, more sql.NullString) ([]store.Event, error) {
	if !more.Valid {
		return []store.Event{first}, nil
	}
	var rest []moreEvent
	if err := json.Unmarshal([]byte(more.String), &rest); err != nil {
		return nil, fmt.Errorf("event %d: its row's other events: %w", first.ID, err)
	}
	if !n.Valid || int64(len(rest)+1) != n.Int64 {
		return nil, fmt.Errorf("event %d: its row says it holds %d events and lists %d", first.ID, n.Int64, len(rest)+1)
	}
	out := make([]store.Event, 0, len(rest)+1)
	out = append(out, first)
	for i, m := range rest {
		e := store.Event{ID: first.ID + int64(i) + 1, Kind: m.Kind, Time: fromNanos(sql.NullInt64{Int64: m.At, Valid: true}),
			ActionID: first.ActionID, EffectKey: first.EffectKey, ApprovalID: first.ApprovalID}
		if len(m.Payload) > 0 && string(m.Payload) != "null" {
			e.Payload = m.Payload
		}
		out = append(out, e)
	}
	return out, nil
}
