package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/latchkit/latch/store"
)

// The executing effects, without an index entry a call (migrations/0024_executing_window.sql).
//
// An effect is executing from its reservation to its outcome: for most calls a few
// milliseconds. The sweeper, the console's attention page and `latch effects --state` read the
// executing effects; an index whose condition names them cost every call two pages, its entry
// written by the reservation's commit and removed by the outcome's. Since schema 24 an executing
// effect is found instead either among the event rows appended since executing_window's mark
// (every write that makes an effect executing appends the effect's effect_reserved event, in
// the same transaction: apply refuses one that does not) or in executing_parked, which holds
// the keys of the effects that were still executing when the mark last moved. Each writer has
// the mark moved after it has appended executingMarkRows event rows — itself, when every row
// past the mark is its own (moveMarkIfDue), else from a reader's snapshot in the background
// (Store.moveMark) — so what a read looks through stays bounded whatever the store's size, and
// a call writes nothing for it. A move costs in proportion to the rows since the mark when
// other writers' rows are among them, and to the effects executing in any case.

// executingWindowVersion is the schema from which the executing effects are found through the
// mark and the parked keys, and effects_attention replaces effects_unsettled.
const executingWindowVersion = 24

// executingMarkRows is how many event rows a writer appends before it has the mark moved: some
// 256 protected calls. A read of the executing effects looks through about this many rows for
// each process that writes.
const executingMarkRows = 512

// reservedRow selects, among event rows, those that hold an effect_reserved event: the event a
// write that makes an effect executing appends (checkExecutingNamed), first in the row or in its
// more array, which appendMoreEvent writes as "kind":"effect_reserved". A payload that happens to
// hold that text only adds a row to look at.
const reservedRow = `effect_key <> '' AND (kind = 'effect_reserved' OR n IS NOT NULL AND instr(more, '"kind":"effect_reserved"') > 0)`

// executingKeys selects the keys of every effect that may be executing: those parked when the
// mark last moved, and those reserved by the event rows since. It names effects that settled
// since, and a key more than once: a read keeps the effects whose state says executing.
const executingKeys = `SELECT effect_key FROM executing_parked
	UNION ALL SELECT effect_key FROM events WHERE id >= (SELECT from_event FROM executing_window WHERE id = 1) AND ` + reservedRow

// attentionWhere is the condition of the index effects_attention (schema 24), written as the
// index writes it so that SQLite knows the index serves a read that names it.
const attentionWhere = `(state = 'ambiguous' OR conflict <> '')`

// unsettledKeys selects the keys of every effect a person may have to settle and every effect
// that may be executing, for the store's schema (a superset: a read checks the state).
func unsettledKeys(window bool) string {
	if window {
		return `SELECT effect_key FROM effects WHERE ` + attentionWhere + ` UNION ALL ` + executingKeys
	}
	return `SELECT effect_key FROM effects WHERE ` + unsettledWhere
}

// executingWindow reports whether the store's schema finds executing effects through the mark.
func (s *Store) executingWindow() bool { return s.version == 0 || s.version >= executingWindowVersion }

// executingWindow reports whether the transaction's schema finds executing effects through the
// mark.
func (t *txn) executingWindow() bool { return t.version == 0 || t.version >= executingWindowVersion }

// errExecutingUnnamed refuses a write that would make an effect executing where no read could
// find it: without an effect_reserved event row that names it.
var errExecutingUnnamed = errors.New("a write that makes an effect executing must append its effect_reserved event")

// checkExecutingNamed refuses, before anything is written, a write that makes its effect
// executing without the effect_reserved event of the effect (store.PlanReserve always writes
// one).
func (t *txn) checkExecutingNamed(w *store.EffectWrite, events []store.Event) error {
	if w == nil || !t.executingWindow() || w.Next.State != store.Executing || w.Prev != nil && w.Prev.State == store.Executing {
		return nil
	}
	for i := range events {
		if events[i].EffectKey == w.Next.Key && events[i].Kind == store.EventEffectReserved {
			return nil
		}
	}
	return fmt.Errorf("effect %s: %w", w.Next.Key, errExecutingUnnamed)
}

// moveMark moves the executing mark past the event rows appended since it last moved. What is
// costly — looking up the state of each effect those rows reserved — is read in one snapshot on
// a reader connection, while the writer goes on writing; what the move writes is then one small
// write request, committed in a batch with the calls (moveMarkTo): the keys executing at the
// snapshot parked, the parked keys no longer executing dropped, the mark moved to the snapshot's
// end. An effect reserved after the snapshot has its row past the new mark.
func (s *Store) moveMark(ctx context.Context) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("executing mark: %w", err)
	}
	defer tx.Rollback()
	var from, end int64
	if err := tx.QueryRowContext(ctx, markRange).Scan(&from, &end); err != nil {
		return fmt.Errorf("executing mark: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT effect_key FROM events e WHERE e.id >= ? AND e.id < ? AND `+reservedRow+`
		AND `+executingNow("e.effect_key"), from, end)
	if err != nil {
		return fmt.Errorf("executing mark: park: %w", err)
	}
	var park []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return fmt.Errorf("executing mark: park: %w", err)
		}
		park = append(park, k)
	}
	if err := errors.Join(rows.Err(), rows.Close(), tx.Rollback()); err != nil {
		return fmt.Errorf("executing mark: park: %w", err)
	}
	if err := s.write(ctx, func(t *txn) error { return t.moveMarkTo(slices.Values(park), end) }); err != nil {
		return fmt.Errorf("executing mark: %w", err)
	}
	return nil
}

// markDue starts a move of the executing mark unless one runs or the store is closing; the
// writer calls it once it has appended executingMarkRows event rows since it last did. A move
// that fails leaves the mark where it was: reads stay exact and look through more rows, and the
// next due move tries again.
func (s *Store) markDue() {
	s.markMu.Lock()
	defer s.markMu.Unlock()
	if s.marking || s.closing {
		return
	}
	s.marking = true
	s.markWG.Add(1)
	go func() {
		defer s.markWG.Done()
		if err := s.moveMark(context.Background()); err != nil {
			s.log.Warn("executing mark not moved", "store", s.url, "err", err)
		}
		s.markMu.Lock()
		s.marking = false
		s.markMu.Unlock()
	}()
}

// idRange is the event ids [from, to) of the rows a writer appended.
type idRange struct{ from, to int64 }

// executingChange is an effect a transaction made executing (in) or moved out of executing.
type executingChange struct {
	key string
	in  bool
}

// noteExecuting records w in the transaction's changes when it makes its effect executing or
// moves it out of executing.
func (t *txn) noteExecuting(w *store.EffectWrite) {
	was, is := w.Prev != nil && w.Prev.State == store.Executing, w.Next.State == store.Executing
	if was != is {
		t.changes = append(t.changes, executingChange{key: w.Next.Key, in: is})
	}
}

// committed takes in what a committed transaction appended and changed, toward the next move of
// the executing mark. The caller holds the writer's lock.
func (w *writer) committed(t *txn) {
	if w.markDue == nil || w.version != 0 && w.version < executingWindowVersion {
		return
	}
	if t.marked != nil { // the batch began by moving the mark (markInBatch)
		w.inflight, w.own, w.sinceMark = t.marked, w.own[:0], 0
	}
	for _, r := range t.rowIDs {
		if n := len(w.own); n > 0 && w.own[n-1].to == r.from {
			w.own[n-1].to = r.to
		} else {
			w.own = append(w.own, r)
		}
		w.sinceMark++
	}
	for _, c := range t.changes {
		if c.in {
			w.inflight[c.key] = struct{}{}
		} else {
			delete(w.inflight, c.key)
		}
	}
}

// covers reports whether the ranges, in ascending order, hold every id from from up to end.
func covers(ranges []idRange, from, end int64) bool {
	at := from
	for _, r := range ranges {
		if at >= end {
			break
		}
		if r.to <= at {
			continue
		}
		if r.from > at {
			return false
		}
		at = r.to
	}
	return at >= end
}

// nextEventID is the id the next event row gets (eventrows.go).
const nextEventID = `COALESCE((SELECT id + COALESCE(n, 1) FROM events WHERE id > 0 ORDER BY id DESC LIMIT 1), 1)`

// markRange reads the executing mark and the id the next event row gets: a move parks what the
// rows between them reserved and moves the mark to the second.
const markRange = `SELECT from_event, ` + nextEventID + ` FROM executing_window WHERE id = 1`

// executingNow is the condition that the effect keyed by col is executing now.
func executingNow(col string) string {
	return `EXISTS (SELECT 1 FROM effects f WHERE f.effect_key = ` + col + ` AND f.state = 'executing')`
}

// moveMarkTo is what a move of the executing mark writes, made by the writer itself
// (moveOwnMark) or from a reader's snapshot (Store.moveMark): park the keys of park, drop every
// parked key whose effect is no longer executing (its state checked in this transaction), and
// move the mark to end — never back. A key of park settled since it was read is dropped again
// here; an effect reserved after end has its row past the new mark.
func (t *txn) moveMarkTo(park iter.Seq[string], end int64) error {
	for k := range park {
		if _, err := t.c.exec(`INSERT OR IGNORE INTO executing_parked (effect_key) VALUES (?)`, k); err != nil {
			return err
		}
	}
	if _, err := t.c.exec(`DELETE FROM executing_parked WHERE NOT ` + executingNow("executing_parked.effect_key")); err != nil {
		return err
	}
	_, err := t.c.exec(`UPDATE executing_window SET from_event = MAX(from_event, ?) WHERE id = 1`, end)
	return err
}

// markInBatch moves the executing mark at the start of a batch's transaction, before its
// requests, once this writer has committed executingMarkRows event rows since it last did: the
// move never costs a transaction of its own. When every row past the mark is one this writer
// appended — one writer on the file, the usual case — the writer knows which effects those rows
// made executing and are still (w.inflight), so the move is made here, with the state of only the
// parked effects looked up, under a savepoint of its own (a move that fails is rolled back
// alone, and tried again by a later batch); what the writer knows is replaced when the batch
// commits (committed). When other writers' rows lie past the mark, the move is left to
// Store.moveMark, which looks up the state of every effect those rows reserved, on a reader
// connection, while this writer goes on. The caller holds the writer's lock.
func (w *writer) markInBatch(t *txn) {
	if w.sinceMark < executingMarkRows || w.markDue == nil || w.version != 0 && w.version < executingWindowVersion {
		return
	}
	if _, err := t.c.exec(`SAVEPOINT mark`); err != nil {
		return
	}
	still, own, err := w.moveOwnMark(t)
	if err != nil || !own {
		_, _ = t.c.exec(`ROLLBACK TO mark`)
		_, _ = t.c.exec(`RELEASE mark`)
		if err != nil {
			w.sinceMark = executingMarkRows / 2 // tried again some rows later
			return
		}
		// The move reads every row since the mark from a snapshot, this writer's among them;
		// what this writer knows starts again from its next commit, so that an effect of its
		// own that another writer settled does not stay in w.inflight.
		w.sinceMark = 0
		w.own = w.own[:0]
		clear(w.inflight)
		w.markDue()
		return
	}
	if _, err := t.c.exec(`RELEASE mark`); err != nil {
		return
	}
	t.marked = still
}

// moveOwnMark makes the move of markInBatch in t when every event row past the mark is one of
// w.own, and returns the effects of w.inflight that stay executing; it reports false, having
// written nothing, when a row past the mark is not one of w.own.
func (w *writer) moveOwnMark(t *txn) (map[string]struct{}, bool, error) {
	var from, end int64
	found, err := t.c.queryRow(markRange, nil, func(sc scanner) error { return sc.Scan(&from, &end) })
	if err != nil {
		return nil, false, err
	}
	if !found {
		return nil, false, errors.New("executing mark: executing_window has no row")
	}
	if !covers(w.own, from, end) {
		return nil, false, nil
	}
	if err := t.moveMarkTo(maps.Keys(w.inflight), end); err != nil {
		return nil, false, err
	}
	// What stays parked is exactly what is executing among them: an effect of this writer's that
	// another writer settled leaves w.inflight here.
	still := make(map[string]struct{}, len(w.inflight))
	if err := t.c.query(`SELECT effect_key FROM executing_parked`, nil, func(sc scanner) error {
		var k string
		if err := sc.Scan(&k); err != nil {
			return err
		}
		if _, ok := w.inflight[k]; ok {
			still[k] = struct{}{}
		}
		return nil
	}); err != nil {
		return nil, false, err
	}
	return still, true, nil
}
