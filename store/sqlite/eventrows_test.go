package sqlite

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Tests of schema 21 (migrations/0021_event_rows.sql): the events of one write for one action,
// effect and request are one row, and every reader sees the same events, ids and cursors as
// when each event was a row.

// eventRowShape is a row of the events table as the file holds it.
type eventRowShape struct {
	id   int64
	kind string
	n    any
}

func eventRowsOf(t *testing.T, url string) []eventRowShape {
	t.Helper()
	var out []eventRowShape
	for _, r := range dump(t, rawDB(t, strings.TrimPrefix(url, "sqlite:")), `SELECT id, kind, n FROM events WHERE id > 0 ORDER BY id`) {
		out = append(out, eventRowShape{r[0].(int64), r[1].(string), r[2]})
	}
	return out
}

// TestReservationEventsOneRow: a reservation's three events are one row (n = 3), a record's two
// (the caller's execution_committed and the store's own) another; Events, the cursor, Limit and
// LastEventID read them as five events with consecutive ids, and the next call's rows start after
// them.
func TestReservationEventsOneRow(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	s := open(t, url, nil)
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	res, rec := protectedCall(t, s, 1, now)
	protectedCall(t, s, 2, now.Add(time.Second))

	rows := eventRowsOf(t, url)
	want := []eventRowShape{{1, store.EventActionProposed, int64(3)}, {4, store.EventExecutionCommitted, int64(2)},
		{6, store.EventActionProposed, int64(3)}, {9, store.EventExecutionCommitted, int64(2)}}
	if !slices.Equal(rows, want) {
		t.Fatalf("events rows = %v, want %v", rows, want)
	}
	var ids []int64
	for _, e := range append(res.Events, rec.Events...) {
		ids = append(ids, e.ID)
	}
	if !slices.Equal(ids, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("the first call's events were written with ids %v, want 1 to 5", ids)
	}

	all, err := s.Events(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for i, e := range all {
		if e.ID != int64(i+1) {
			t.Errorf("event %d has id %d, want %d", i, e.ID, i+1)
		}
		kinds = append(kinds, e.Kind)
	}
	if len(all) != 10 || !slices.Equal(kinds[:3], []string{store.EventActionProposed, store.EventPolicyEvaluated, store.EventEffectReserved}) ||
		!slices.Equal(kinds[:5], kinds[5:]) {
		t.Fatalf("Events() kinds = %v, want two calls of five", kinds)
	}
	// Every event as the store returned it when it wrote it: kind, time, keys and payload byte
	// for byte.
	for i, w := range append(slices.Clone(res.Events), rec.Events...) {
		g := all[i]
		if g.Kind != w.Kind || !g.Time.Equal(w.Time) || g.ActionID != w.ActionID || g.EffectKey != w.EffectKey ||
			g.ApprovalID != w.ApprovalID || string(g.Payload) != string(w.Payload) {
			t.Errorf("event %d read back as %+v, written as %+v", w.ID, g, w)
		}
	}
	var policy map[string]any
	if err := json.Unmarshal(all[1].Payload, &policy); err != nil || policy["decision"] != "allow" {
		t.Errorf("policy_evaluated payload = %s (%v)", all[1].Payload, err)
	}

	// A cursor inside a row, and a limit that ends inside one.
	for _, c := range []struct {
		after int64
		limit int
		want  []int64
	}{
		{after: 1, want: []int64{2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{after: 2, limit: 2, want: []int64{3, 4}},
		{after: 4, limit: 1, want: []int64{5}},
		{after: 6, limit: 3, want: []int64{7, 8, 9}},
		{after: 0, limit: 2, want: []int64{1, 2}},
		{after: 10, want: nil},
	} {
		got, err := s.Events(ctx, store.EventFilter{AfterID: c.after, Limit: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []int64
		for _, e := range got {
			gotIDs = append(gotIDs, e.ID)
		}
		if !slices.Equal(gotIDs, c.want) {
			t.Errorf("Events(after %d, limit %d) = %v, want %v", c.after, c.limit, gotIDs, c.want)
		}
	}
	byAction, err := s.Events(ctx, store.EventFilter{ActionID: res.Events[0].ActionID})
	if err != nil || len(byAction) != 5 || byAction[3].Kind != store.EventExecutionCommitted {
		t.Errorf("Events(action %s) = %d events, %v; want the call's five", res.Events[0].ActionID, len(byAction), err)
	}
	if last, err := s.LastEventID(ctx); err != nil || last != 10 {
		t.Errorf("LastEventID() = %d, %v; want 10", last, err)
	}
}

// TestEventRowsSplitByKeys: events of one write that name different actions, effects or
// requests go in different rows, and a row holds at most maxEventsPerRow events.
func TestEventRowsSplitByKeys(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	s := open(t, url, nil)
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var evs []store.Event
	for range maxEventsPerRow + 2 {
		evs = append(evs, store.NewEvent("note_a", now, "act_a", "", "", map[string]any{"i": len(evs)}))
	}
	evs = append(evs, store.NewEvent("note_b", now, "act_b", "", "", nil), store.NewEvent("note_c", now, "act_b", "", "apr_1", nil))
	if err := s.LogEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	rows := eventRowsOf(t, url)
	want := []eventRowShape{{1, "note_a", int64(maxEventsPerRow)}, {maxEventsPerRow + 1, "note_a", int64(2)},
		{maxEventsPerRow + 3, "note_b", nil}, {maxEventsPerRow + 4, "note_c", nil}}
	if !slices.Equal(rows, want) {
		t.Fatalf("events rows = %v, want %v", rows, want)
	}
	got, err := s.Events(ctx, store.EventFilter{ActionID: "act_a"})
	if err != nil || len(got) != maxEventsPerRow+2 {
		t.Fatalf("Events(act_a) = %d, %v", len(got), err)
	}
	for i, e := range got {
		var p struct{ I int }
		if err := json.Unmarshal(e.Payload, &p); err != nil || p.I != i || e.ID != int64(i+1) {
			t.Errorf("event %d = id %d payload %s (%v)", i, e.ID, e.Payload, err)
		}
	}
	if got, err := s.Events(ctx, store.EventFilter{ApprovalID: "apr_1"}); err != nil || len(got) != 1 || got[0].Kind != "note_c" {
		t.Errorf("Events(apr_1) = %v, %v", got, err)
	}
}

// TestMigrateEventRows: a store written at schema 20 keeps every event row and id; the writer
// of schema 21 continues the ids after them, the chain verifies, and a reader sees old and new
// events alike.
func TestMigrateEventRows(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	old := openAtVersion(t, url, eventRowsVersion-1)
	for i := range 3 {
		protectedCall(t, old, i, now)
	}
	before, err := old.Events(ctx, store.EventFilter{})
	if err != nil || len(before) != 15 {
		t.Fatalf("Events() at schema %d = %d, %v; want 15", eventRowsVersion-1, len(before), err)
	}
	old.Close()
	if rows := dump(t, rawDB(t, strings.TrimPrefix(url, "sqlite:")), `SELECT id FROM events`); len(rows) != 15 {
		t.Fatalf("schema %d wrote %d event rows for 15 events, want one each", eventRowsVersion-1, len(rows))
	}

	s := open(t, url, nil)
	if v, err := schemaVersion(ctx, s.r); err != nil || v != latestVersion() || v < eventRowsVersion {
		t.Fatalf("schema version after opening = %d, %v", v, err)
	}
	protectedCall(t, s, 3, now)
	after, err := s.Events(ctx, store.EventFilter{})
	if err != nil || len(after) != 20 {
		t.Fatalf("Events() after the migration = %d, %v; want 20", len(after), err)
	}
	for i, e := range after {
		if e.ID != int64(i+1) {
			t.Errorf("event %d has id %d after the migration", i, e.ID)
		}
		if i < len(before) {
			b := before[i]
			if e.Kind != b.Kind || !e.Time.Equal(b.Time) || string(e.Payload) != string(b.Payload) || e.ActionID != b.ActionID {
				t.Errorf("event %d changed in the migration: %+v, was %+v", e.ID, e, b)
			}
		}
	}
	if rows := eventRowsOf(t, url); len(rows) != 17 || rows[15] != (eventRowShape{16, store.EventActionProposed, int64(3)}) {
		t.Errorf("rows after one call at schema %d = %v, want the old 15 and 2 new (the first holding 3, from id 16)", eventRowsVersion, rows)
	}
	if rep := verifyChain(t, s); rep.Verified != 4 {
		t.Errorf("%d receipts verified, want 4", rep.Verified)
	}
	if last, err := s.LastEventID(ctx); err != nil || last != 20 {
		t.Errorf("LastEventID() = %d, %v; want 20", last, err)
	}
}

// TestEventRowsFewerFrames measures the pages a protected call commits to the log at schema 20
// and at the current schema, on the same calls. A reservation's three events in one row leave
// the same B-trees touched (events and its two key indexes) but put one record in each instead
// of three: the leaves fill and split a third as often, and the two index leaves of a call's
// action and effect take one entry each. Measured: 18.46 frames at schema 20, 16.77 at 21.
func TestEventRowsFewerFrames(t *testing.T) {
	t.Parallel()
	old, cur := walFramesPerCall(t, eventRowsVersion-1), walFramesPerCall(t, latestVersion())
	t.Logf("WAL frames per protected call: schema %d %.2f, schema %d %.2f", eventRowsVersion-1, old, latestVersion(), cur)
	if old-cur < 1 {
		t.Errorf("a protected call commits %.2f frames at schema %d and %.2f at schema %d: want at least 1 fewer", old, eventRowsVersion-1, cur, latestVersion())
	}
}

// checkReceiptLinks checks that every receipt naming an action or an effect is found by each,
// through the event rows that link them, and that nothing else is.
func checkReceiptLinks(t *testing.T, s *Store) {
	t.Helper()
	ctx := t.Context()
	var all []receipt.Sealed
	for r, err := range s.Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	byAction, byEffect := map[string][]int64{}, map[string][]int64{}
	for _, r := range all {
		var doc struct {
			ActionID  string `json:"action_id"`
			EffectKey string `json:"effect_key"`
		}
		if err := json.Unmarshal(r.Doc, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.ActionID != "" {
			byAction[doc.ActionID] = append(byAction[doc.ActionID], r.Seq)
		}
		if doc.EffectKey != "" {
			byEffect[doc.EffectKey] = append(byEffect[doc.EffectKey], r.Seq)
		}
	}
	seqs := func(f store.ReceiptFilter) []int64 {
		var out []int64
		for r, err := range s.Receipts(ctx, f) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r.Seq)
		}
		return out
	}
	for a, want := range byAction {
		if got := seqs(store.ReceiptFilter{ActionID: a}); !slices.Equal(got, want) {
			t.Errorf("Receipts(action %s) = %v, want %v", a, got, want)
		}
	}
	for k, want := range byEffect {
		if got := seqs(store.ReceiptFilter{EffectKey: k}); !slices.Equal(got, want) {
			t.Errorf("Receipts(effect %s) = %v, want %v", k, got, want)
		}
	}
	if len(byAction) == 0 && len(byEffect) == 0 {
		t.Error("no receipt names an action or an effect: nothing was checked")
	}
}

// TestReceiptLinks: from schema 22 a call's record puts its receipt's seq in the row of its own
// events (no row of its own, no receipt index entry), a receipt written without events of its
// action and effect gets a row that only links it, and receipts are found by action and effect
// through them — while Events, ids and cursors never show a link row.
func TestReceiptLinks(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	s := open(t, url, nil)
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 3 {
		protectedCall(t, s, i, now)
	}
	// A reservation refused as a duplicate writes its refusal's receipt with its events.
	dup, err := s.Reserve(ctx, &store.ReserveRequest{Now: now, ActionID: "act_dup", Action: "billing.charge",
		ActionHash: "sha256:" + strings.Repeat("ab", 32), EffectKey: callKey(1), Lease: time.Minute,
		Events:  []store.Event{store.NewEvent(store.EventActionProposed, now, "act_dup", callKey(1), "", nil)},
		Receipt: &receipt.Receipt{ReceiptID: "rcp_dup", ActionID: "act_dup", Action: "billing.charge", EffectKey: callKey(1), FinishedAt: now}})
	if err != nil || dup.Reserved || dup.Receipt == nil {
		t.Fatalf("a second reservation of a committed key = %+v, %v; want refused with a receipt", dup, err)
	}
	// Resolution receipts and the like come through the same path; a receipt appended on its
	// own (here straight through the transaction) gets a link row.
	if err := s.write(ctx, func(tx *txn) error {
		_, err := tx.appendReceipt(&receipt.Receipt{ReceiptID: "rcp_alone", ActionID: "act_alone", EffectKey: "alone:1",
			Result: receipt.Denied, FinishedAt: now})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, strings.TrimPrefix(url, "sqlite:"))
	links := dump(t, db, `SELECT id, kind, action_id, seq FROM events WHERE seq IS NOT NULL ORDER BY seq`)
	if len(links) != 5 {
		t.Fatalf("rows linking receipts = %v, want 5 (3 calls, the refusal, the lone receipt)", links)
	}
	for i, l := range links[:4] {
		if l[0].(int64) <= 0 || l[1] == "" || l[3] != int64(i+1) {
			t.Errorf("link of receipt %d = %v, want an event row carrying seq %d", i+1, l, i+1)
		}
	}
	if l := links[4]; l[0] != int64(-5) || l[1] != "" || l[2] != "act_alone" || l[3] != int64(5) {
		t.Errorf("link of the lone receipt = %v, want a row of its own with id -5", l)
	}
	checkReceiptLinks(t, s)

	// Record with Once: an action with a receipt is recorded, found through its link.
	_, err = s.Record(ctx, &store.RecordRequest{Now: now, ActionID: "act_alone", Once: true,
		Receipt: &receipt.Receipt{ReceiptID: "rcp_again", ActionID: "act_alone", Result: receipt.Denied, FinishedAt: now}})
	if !errors.Is(err, store.ErrRecorded) {
		t.Errorf("Record(Once) of an action with a receipt = %v, want ErrRecorded", err)
	}

	// Link rows are no events: not listed, not counted, not in the ids.
	evs, err := s.Events(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.ID != int64(i+1) || e.Kind == "" {
			t.Errorf("event %d = id %d kind %q", i, e.ID, e.Kind)
		}
	}
	if got, err := s.Events(ctx, store.EventFilter{ActionID: "act_alone"}); err != nil || len(got) != 0 {
		t.Errorf("Events(act_alone) = %v, %v; want none (its receipt has only a link)", got, err)
	}
	if last, err := s.LastEventID(ctx); err != nil || last != evs[len(evs)-1].ID {
		t.Errorf("LastEventID() = %d, %v; want %d", last, err, evs[len(evs)-1].ID)
	}
}

// TestReceiptLinksFewerFrames measures the pages a protected call commits to the log at schema
// 21 and at 22: the record no longer writes receipts_action_id and
// receipts_effect_key (two leaves of B-trees keyed by random ids: two frames), and its receipt's
// seq rides in the event row it writes anyway. Measured: 16.77 frames at schema 21, 14.66 at 22.
func TestReceiptLinksFewerFrames(t *testing.T) {
	t.Parallel()
	old, cur := walFramesPerCall(t, receiptLinksVersion-1), walFramesPerCall(t, receiptLinksVersion)
	t.Logf("WAL frames per protected call: schema %d %.2f, schema %d %.2f", receiptLinksVersion-1, old, receiptLinksVersion, cur)
	if old-cur < 1.5 {
		t.Errorf("a protected call commits %.2f frames at schema %d and %.2f at schema %d: want at least 1.5 fewer", old, receiptLinksVersion-1, cur, receiptLinksVersion)
	}
}

// TestReaderOfSchema20And21: a reader of this version opens a store a writer left at schema 20
// (one event a row, receipt indexes) or 21 (event rows, receipt indexes, no links) without
// migrating it, and reads its events, last event id and receipts by action and effect.
func TestReaderOfSchema20And21(t *testing.T) {
	t.Parallel()
	for _, version := range []int{eventRowsVersion - 1, receiptLinksVersion - 1} {
		url := backend.New(t)
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		w := openAtVersion(t, url, version)
		for i := range 2 {
			protectedCall(t, w, i, now)
		}
		want, err := w.Events(t.Context(), store.EventFilter{})
		if err != nil || len(want) != 10 {
			t.Fatalf("schema %d: Events() = %d, %v; want 10", version, len(want), err)
		}
		w.Close()
		r, err := Open(t.Context(), url, &Config{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only Open of schema %d: %v", version, err)
		}
		if v, err := schemaVersion(t.Context(), r.r); err != nil || v != version {
			t.Fatalf("read-only Open migrated schema %d to %d (%v)", version, v, err)
		}
		got, err := r.Events(t.Context(), store.EventFilter{AfterID: 2, Limit: 4})
		if err != nil || len(got) != 4 || got[0].ID != 3 || got[0].Kind != want[2].Kind {
			t.Errorf("schema %d: Events(after 2, limit 4) = %v, %v", version, got, err)
		}
		if last, err := r.LastEventID(t.Context()); err != nil || last != want[len(want)-1].ID {
			t.Errorf("schema %d: LastEventID() = %d, %v; want %d", version, last, err, want[len(want)-1].ID)
		}
		checkReceiptLinks(t, r)
		r.Close()
	}
}
