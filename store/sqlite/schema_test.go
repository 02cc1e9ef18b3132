package sqlite

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Tests of schema 4 (migrations/0004_fewer_btrees.sql): the tables it rebuilds, a store that an
// older binary left at schema 3 carried over row for row, and what it saves a protected call.

// schema3 is the last version before the tables were rebuilt.
const schema3 = 3

// openAtVersion opens a writer that migrates the store at url to version and no further, as the
// binary that knew only that version did; the test closes it.
func openAtVersion(t *testing.T, url string, version int) *Store {
	t.Helper()
	s, err := openAt(t.Context(), url, nil, version)
	if err != nil {
		t.Fatalf("open %s at schema %d: %v", url, version, err)
	}
	if v, err := schemaVersion(t.Context(), s.r); err != nil || v != version {
		s.Close()
		t.Fatalf("schema version = %d, %v; want %d", v, err, version)
	}
	return s
}

// callKey is the effect key of call i: spread over the key space, as real keys (invoice ids,
// order numbers) are, so that inserts land all over the effects B-tree and not only at its end.
func callKey(i int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "call %d", i))
	return "charge:inv_" + hex.EncodeToString(sum[:8])
}

// protectedCall writes what the pipeline writes for one allowed call with an effect key that
// commits: a reservation with the two proposal events (the store adds effect_reserved), then the
// outcome with its event and a receipt with the fields, and so about the size, of the pipeline's.
func protectedCall(t *testing.T, s *Store, i int, now time.Time) (*store.ReserveResult, *store.RecordResult) {
	t.Helper()
	key, act := callKey(i), fmt.Sprintf("act_%032d", i)
	hash := "sha256:" + strings.Repeat("ab", 32)
	res, err := s.Reserve(t.Context(), &store.ReserveRequest{Now: now, ActionID: act, Action: "billing.charge", ActionHash: hash,
		EffectKey: key, Lease: time.Minute, Events: []store.Event{
			store.NewEvent(store.EventActionProposed, now, act, key, "", map[string]any{"action": "billing.charge",
				"action_hash": hash, "agent": "billing-agent", "user": "", "environment": "production", "resource": ""}),
			store.NewEvent(store.EventPolicyEvaluated, now, act, key, "", map[string]any{"decision": "allow",
				"reason": "charges are allowed", "policy_hash": "sha256:" + strings.Repeat("cd", 32)}),
		}})
	if err != nil || !res.Reserved {
		t.Fatalf("Reserve(%s) = %+v, %v", key, res, err)
	}
	args := fmt.Sprintf(`{"amount":24900,"capture":true,"currency":"EUR","customer":"cus_1","invoice_id":"inv_%d"}`, i)
	rec, err := s.Record(t.Context(), &store.RecordRequest{Now: now, EffectKey: key, ActionID: act, Attempt: 1,
		Outcome: store.Committed, Result: json.RawMessage(`{"charge_id":"ch_` + act[4:] + `"}`),
		Events: []store.Event{store.NewEvent(store.EventExecutionCommitted, now, act, key, "", map[string]any{"attempt": 1})},
		Receipt: &receipt.Receipt{ReceiptID: fmt.Sprintf("rcp_%032x", i), ActionID: act, Action: "billing.charge",
			ActionHash: hash, Arguments: json.RawMessage(args), Principal: receipt.Principal{Agent: "billing-agent"},
			Environment: "production", Decision: "allow", DecisionReason: "charges are allowed", EffectKey: key, Attempt: 1,
			IdempotencyToken: "00000000-0000-8000-8000-000000000000", Result: receipt.Committed, StartedAt: now,
			FinishedAt: now, PolicyHash: "sha256:" + strings.Repeat("cd", 32), Mode: "enforce"}})
	if err != nil || rec.Effect == nil || rec.Effect.State != store.Committed {
		t.Fatalf("Record(%s) = %+v, %v", key, rec, err)
	}
	return res, rec
}

// dump reads every row of a query as the driver returns it: int64, string, nil (and []byte,
// float64), so that two dumps are equal only when every value and its storage class are.
func dump(t *testing.T, db *sql.DB, query string) [][]any {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]any
	for rows.Next() {
		row := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// contents are the rows of every table that holds a store's history.
var contents = []string{
	`SELECT * FROM effects ORDER BY effect_key`,
	`SELECT * FROM events WHERE id > 0 ORDER BY id`, // negative ids: rows that link receipts (schema 22)
	`SELECT * FROM receipts ORDER BY seq`,
	`SELECT * FROM chain_head`,
	`SELECT * FROM approvals ORDER BY approval_id`,
}

// checkSchema4 checks the shape migration 4 gives the three tables: effects keyed by
// effect_key alone (WITHOUT ROWID), events and receipts plain rowid tables, no AUTOINCREMENT
// and no use of sqlite_sequence, no index on receipt_id, every other index as before — but for
// receipts_action_id and receipts_effect_key, which schema 22 drops (receipts are found by
// action and effect through the event indexes since: TestReceiptLinks), and effects_attention,
// which schema 24 adds in place of schema 23's effects_unsettled (TestEffectReadPlans), and
// receipts_finished_at, which schema 26 replaces with receipt_spans (TestReceiptWindows).
func checkSchema4(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, c := range []struct {
		table      string
		withoutRow int
		indexes    []string // name unique origin partial, as pragma index_list says
	}{
		{"effects", 1, []string{"effects_attention 0 c 1", "effects_state 0 c 1", "sqlite_autoindex_effects_1 1 pk 0"}},
		{"events", 0, []string{"events_action_id 0 c 0", "events_approval_id 0 c 1", "events_effect_key 0 c 0"}},
		{"receipts", 0, []string{"receipts_approval_id 0 c 1"}},
	} {
		var wr, strict int
		var def string
		err := db.QueryRowContext(t.Context(), `SELECT l.wr, l.strict, s.sql FROM pragma_table_list AS l
			JOIN sqlite_schema AS s ON s.name = l.name WHERE l.schema = 'main' AND l.name = ?`, c.table).Scan(&wr, &strict, &def)
		if err != nil {
			t.Fatalf("table %s: %v", c.table, err)
		}
		if wr != c.withoutRow || strict != 1 {
			t.Errorf("table %s: WITHOUT ROWID = %d, STRICT = %d; want %d and 1", c.table, wr, strict, c.withoutRow)
		}
		if strings.Contains(strings.ToUpper(def), "AUTOINCREMENT") {
			t.Errorf("table %s is declared with AUTOINCREMENT:\n%s", c.table, def)
		}
		var got []string
		for _, r := range dump(t, db, `SELECT name, "unique", origin, partial FROM pragma_index_list('`+c.table+`')`) {
			got = append(got, fmt.Sprintf("%v %v %v %v", r...))
		}
		slices.Sort(got)
		if !slices.Equal(got, c.indexes) {
			t.Errorf("indexes of %s = %q, want %q", c.table, got, c.indexes)
		}
	}
	// effects_state holds the effects that wait for a person, not the executing ones every call
	// would enter and leave.
	var stateIndex string
	if err := db.QueryRowContext(t.Context(), `SELECT sql FROM sqlite_schema WHERE name = 'effects_state'`).Scan(&stateIndex); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(stateIndex, `WHERE state IN ('failed', 'ambiguous')`) {
		t.Errorf("effects_state is %q, want it partial on failed and ambiguous", stateIndex)
	}
	// Migration 1 declared events with AUTOINCREMENT, which created sqlite_sequence; it cannot
	// be dropped, and nothing may write to it any more.
	var seqTable int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_sequence'`).Scan(&seqTable); err != nil {
		t.Fatal(err)
	}
	if seqTable == 1 {
		if rows := dump(t, db, `SELECT name, seq FROM sqlite_sequence`); len(rows) != 0 {
			t.Errorf("sqlite_sequence holds %v, want nothing", rows)
		}
	}
}

// TestSchema4 checks the shape of a new store, after it has been written to.
func TestSchema4(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	s := open(t, url, nil)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 3 {
		protectedCall(t, s, i, now)
	}
	checkSchema4(t, rawDB(t, strings.TrimPrefix(url, "sqlite:")))
}

// TestMigrateFromSchema3 opens a store that a binary of schema 3 wrote (every kind of effect
// state, events with and without payloads and approval ids, receipts, an approval) with the
// current code: the migration must carry every row over exactly, the chain must verify, and new
// writes must continue the chain and the event ids where schema 3 left them.
func TestMigrateFromSchema3(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	path := strings.TrimPrefix(url, "sqlite:")
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	ctx := t.Context()
	old := openAtVersion(t, url, schema3)
	for i := range 15 {
		protectedCall(t, old, i, now.Add(time.Duration(i)*time.Millisecond))
	}
	// Latch never leaves a gap in the event ids, but a gap shows that the migration copies ids
	// rather than numbering the rows again: AUTOINCREMENT goes on from sqlite_sequence.
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	exec(t, rawDB(t, path), `UPDATE sqlite_sequence SET seq = seq + 1000 WHERE name = 'events'`)
	old = openAtVersion(t, url, schema3)
	for i := 15; i < 30; i++ {
		protectedCall(t, old, i, now.Add(time.Duration(i)*time.Millisecond))
	}
	// One reservation left executing (with its lease), one that failed, one ambiguous and one
	// ambiguous that an operator resolved (which writes no receipt).
	reserve := func(key, act string) {
		t.Helper()
		if res, err := old.Reserve(ctx, &store.ReserveRequest{Now: now, ActionID: act, Action: "billing.refund",
			ActionHash: "sha256:ef", EffectKey: key, Lease: time.Minute}); err != nil || !res.Reserved {
			t.Fatalf("Reserve(%s) = %+v, %v", key, res, err)
		}
	}
	record := func(key, act string, outcome store.State, errText string) {
		t.Helper()
		result := receipt.Committed
		switch outcome {
		case store.Failed:
			result = receipt.Failed
		case store.Ambiguous:
			result = receipt.Ambiguous
		}
		if _, err := old.Record(ctx, &store.RecordRequest{Now: now, EffectKey: key, ActionID: act, Attempt: 1, Outcome: outcome,
			Error: errText, Receipt: &receipt.Receipt{ReceiptID: "rcp_" + act, ActionID: act, Action: "billing.refund",
				EffectKey: key, Result: result, Error: errText, FinishedAt: now}}); err != nil {
			t.Fatalf("Record(%s) = %v", key, err)
		}
	}
	reserve("refund:executing", "act_executing")
	reserve("refund:failed", "act_failed")
	record("refund:failed", "act_failed", store.Failed, "card declined")
	reserve("refund:ambiguous", "act_ambiguous")
	record("refund:ambiguous", "act_ambiguous", store.Ambiguous, "timeout: the provider did not answer")
	reserve("refund:resolved", "act_resolved")
	record("refund:resolved", "act_resolved", store.Ambiguous, "connection reset")
	if _, err := old.Resolve(ctx, &store.ResolveRequest{Now: now, Key: "refund:resolved", To: store.Committed, By: "cli:ana",
		Events: []store.Event{{Kind: store.EventEffectResolved, EffectKey: "refund:resolved", ActionID: "act_resolved",
			Payload: json.RawMessage(`{"note":"checked in the dashboard: ünïcödé, \u2028, 日本"}`)}}}); err != nil {
		t.Fatal(err)
	}
	// An approval requested, granted and spent by a call: events and a receipt with its id.
	apr := &store.Approval{ID: "apr_1", ActionHash: "sha256:12", Action: json.RawMessage(`{"action":"billing.refund"}`),
		ActionName: "billing.refund", Agent: "billing-agent", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if _, err := old.CreateApproval(ctx, &store.ApprovalRequest{Now: now, Approval: apr}); err != nil {
		t.Fatal(err)
	}
	if _, err := old.AnswerApproval(ctx, &store.AnswerRequest{Now: now, ID: "apr_1", Grant: true, Approver: "cli:ana"}); err != nil {
		t.Fatal(err)
	}
	if res, err := old.Reserve(ctx, &store.ReserveRequest{Now: now, ActionID: "act_approved", Action: "billing.refund",
		ActionHash: "sha256:12", EffectKey: "refund:approved", Lease: time.Minute, ApprovalID: "apr_1"}); err != nil || !res.Reserved {
		t.Fatalf("Reserve(approved) = %+v, %v", res, err)
	}
	if _, err := old.Record(ctx, &store.RecordRequest{Now: now, EffectKey: "refund:approved", ActionID: "act_approved", Attempt: 1,
		Outcome: store.Committed, Receipt: &receipt.Receipt{ReceiptID: "rcp_approved", ActionID: "act_approved",
			Action: "billing.refund", EffectKey: "refund:approved", ApprovalID: "apr_1", Result: receipt.Committed, FinishedAt: now}}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	db := rawDB(t, path)
	before := make([][][]any, len(contents))
	for i, q := range contents {
		before[i] = dump(t, db, q)
	}
	var lastEvent int64
	if err := db.QueryRowContext(ctx, `SELECT max(id) FROM events`).Scan(&lastEvent); err != nil {
		t.Fatal(err)
	}
	var autoinc int64
	if err := db.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'events'`).Scan(&autoinc); err != nil || autoinc != lastEvent {
		t.Fatalf("schema 3: sqlite_sequence has %d for events (%v), want the last id %d", autoinc, err, lastEvent)
	}
	head := before[3][0]
	if len(before[0]) != 35 || len(before[1]) < 100 || lastEvent < 1100 || head[1] != int64(36) {
		t.Fatalf("schema 3 store holds %d effects, %d events up to id %d, chain head %v; want 35, 100 or more up to 1100 or more, seq 36 (34 calls, an answer, a resolution)",
			len(before[0]), len(before[1]), lastEvent, head)
	}

	// The current binary reads the schema 3 store as it is: a reader upgraded before the writers.
	r, err := Open(ctx, url, &Config{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open at schema 3: %v", err)
	}
	if rep := verifyChain(t, r); rep.Verified != 36 {
		t.Errorf("read-only at schema 3: %d receipts verified, want 36", rep.Verified)
	}
	aprEvents, err := r.Events(ctx, store.EventFilter{ApprovalID: "apr_1"})
	if err != nil || len(aprEvents) < 3 {
		t.Errorf("read-only at schema 3: events of apr_1 = %d, %v; want its request, grant and use", len(aprEvents), err)
	}
	r.Close()

	// A writer of the current binary migrates it.
	s := open(t, url, nil)
	if v, err := schemaVersion(ctx, db); err != nil || v != latestVersion() || latestVersion() < 4 {
		t.Fatalf("schema version after a writer opened the store = %d, %v; want %d", v, err, latestVersion())
	}
	for i, q := range contents {
		after := dump(t, db, q)
		if len(after) != len(before[i]) {
			t.Errorf("%s: %d rows after the migration, %d before", q, len(after), len(before[i]))
			continue
		}
		for j := range after {
			// Schema 5 appends columns (effects: arguments, note, conflict; approvals: note),
			// NULL or empty for the rows an older binary wrote.
			if len(after[j]) > len(before[i][j]) {
				for _, v := range after[j][len(before[i][j]):] {
					if v != nil && v != "" {
						t.Errorf("%s: row %d: a column schema 5 added holds %#v, want NULL or ''", q, j, v)
					}
				}
				after[j] = after[j][:len(before[i][j])]
			}
			if !reflect.DeepEqual(after[j], before[i][j]) {
				t.Errorf("%s: row %d changed in the migration:\nbefore %#v\nafter  %#v", q, j, before[i][j], after[j])
			}
		}
	}
	checkSchema4(t, db)
	if rep := verifyChain(t, s); rep.Verified != 36 {
		t.Errorf("after the migration: %d receipts verified, want 36", rep.Verified)
	}
	checkReceiptLinks(t, s)
	if evs, err := s.Events(ctx, store.EventFilter{ApprovalID: "apr_1"}); err != nil || !reflect.DeepEqual(evs, aprEvents) {
		t.Errorf("after the migration: events of apr_1 = %v, %v; want those read at schema 3, %v", evs, err, aprEvents)
	}
	if es, err := s.Effects(ctx, store.EffectFilter{State: store.Ambiguous}); err != nil || len(es) != 1 || es[0].Key != "refund:ambiguous" {
		t.Errorf("after the migration: ambiguous effects = %v, %v; want refund:ambiguous", es, err)
	}

	// New writes go on from where schema 3 stopped: the event ids after the last one, the
	// receipt after the head. The key of an effect from before is still taken.
	res, rec := protectedCall(t, s, 1000, now.Add(time.Hour))
	var ids, want []int64
	for i, e := range append(res.Events, rec.Events...) {
		ids = append(ids, e.ID)
		want = append(want, lastEvent+1+int64(i))
	}
	if len(ids) < 3 || !slices.Equal(ids, want) {
		t.Errorf("event ids of a new call = %v, want %v", ids, want)
	}
	var stored []int64
	evs, err := s.Events(ctx, store.EventFilter{ActionID: fmt.Sprintf("act_%032d", 1000)})
	for _, e := range evs {
		stored = append(stored, e.ID)
	}
	if err != nil || !slices.Equal(stored, want) {
		t.Errorf("stored events of the new call have ids %v (%v), want %v", stored, err, want)
	}
	if rec.Document.Seq != 37 || rec.Document.PrevHash != head[2] {
		t.Errorf("new receipt: seq %d after %q, want 37 after the schema 3 head %q", rec.Document.Seq, rec.Document.PrevHash, head[2])
	}
	if rep := verifyChain(t, s); rep.Verified != 37 {
		t.Errorf("after a new call: %d receipts verified, want 37", rep.Verified)
	}
	if res, err := s.Reserve(ctx, &store.ReserveRequest{Now: now.Add(time.Hour), ActionID: "act_again", Action: "billing.charge",
		ActionHash: "sha256:ab", EffectKey: callKey(7), Lease: time.Minute}); err != nil || res.Reserved || res.Refusal == nil {
		t.Errorf("Reserve of a key committed at schema 3 = %+v, %v; want a refusal", res, err)
	}
}

// warmStore opens a store at version (synchronous=normal) without its checkpointer, so that
// only SQLite's own checkpoint at wal_autocheckpoint ever empties the log; then warm protected
// calls give its tables some hundreds of rows (B-trees two levels deep, as in any store in use),
// and the log is copied into the database and emptied: the next commit writes from its start.
func warmStore(t *testing.T, version, warm int) *Store {
	t.Helper()
	s := openAtVersion(t, backend.New(t)+"?synchronous=normal", version)
	t.Cleanup(func() { s.Close() })
	if err := s.wr.ckpt.close(); err != nil {
		t.Fatal(err)
	}
	s.wr.ckpt = nil
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range warm {
		protectedCall(t, s, i, now)
	}
	var busy, logged, copied int
	if writerQuery(t, s, `PRAGMA wal_checkpoint(TRUNCATE)`, &busy, &logged, &copied); busy != 0 {
		t.Fatalf("wal_checkpoint(TRUNCATE) = %d", busy)
	}
	return s
}

// walFramesPerCall measures how many pages one protected call (a reserve and a record, each its
// own commit) appends to the write-ahead log of a store at schema version. Checkpoints would
// let the log start over while it is measured, so the store's background checkpointer is
// stopped, and the writer's own one (wal_autocheckpoint) does not come due within the calls.
func walFramesPerCall(t *testing.T, version int) float64 {
	t.Helper()
	const warm, calls = 200, 200
	if calls*40 >= walCheckpointPages {
		t.Fatal("the calls would reach wal_autocheckpoint")
	}
	// The executing mark's moves (schema 24, one in some 256 calls) are made inside the calls'
	// own transactions: two commits a call still.
	s := warmStore(t, version, warm)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := warm; i < warm+calls; i++ {
		protectedCall(t, s, i, now)
	}
	// A PASSIVE checkpoint reports the frames in the log (and copies them, which no longer
	// matters).
	var busy, logged, copied int
	if writerQuery(t, s, `PRAGMA wal_checkpoint(PASSIVE)`, &busy, &logged, &copied); busy != 0 {
		t.Fatalf("wal_checkpoint(PASSIVE) = %d", busy)
	}
	if s.WriteTransactions() != 2*(warm+calls) {
		t.Fatalf("%d commits for %d calls, want two each", s.WriteTransactions(), warm+calls)
	}
	return float64(logged) / calls
}

// TestFewerFramesPerCall measures the pages a protected call commits to the log at schema 3 and
// at the current schema, on the same calls.
//
// At schema 4 the reservation changes four B-trees (the effect in effects, the events and their
// action_id and effect_key indexes) and the record nine (the effect; the events and their two
// indexes; the receipt and its action_id, effect_key and finished_at indexes; the chain head):
// effects_state holds only failed and ambiguous effects, so a call that commits never enters it.
// Each is at least one frame: 13 is the floor. Schema 3 also wrote sqlite_sequence in both
// commits (exactly two frames), effects_state in both (the executing entry in, then out), the
// unique index on effects.effect_key in the reservation and the one on receipts.receipt_id in the
// record (one leaf each, a little more with their splits): 19 B-trees. On top of the floor come
// the pages that page splits write (the new page, its sibling, their parent, page 1 when the file
// grows), some five frames a call with 4 KiB pages and these rows, the same at either schema but
// for the effect, which at schema 4 is a whole row in a B-tree ordered by random keys: its
// record, which lengthens the row, splits a leaf about once in three calls (some one frame a call
// more). Measured on these calls: 23.5 frames at schema 3, 18.1 at schema 4.
//
// So the saving must be at least 4.5 frames (the two of sqlite_sequence, the two of
// effects_state and the two unique leaves, less the effect's splits), and the current schema
// must stay within its floor (a measure below it is a broken measure) and 19.5 (schema 4's
// floor, schema 3's split overhead of 4.5 frames over its 19 B-trees, one frame for the effect's
// splits, one of slack). Since schema 22 the record no longer writes receipts_action_id and
// receipts_effect_key: the floor is 11 B-trees (TestReceiptLinksFewerFrames). Schema 23 added
// effects_unsettled to both commits (12) and schema 24 took it off again (TestFramesByBTree
// names each B-tree a call writes).
func TestFewerFramesPerCall(t *testing.T) {
	t.Parallel()
	old, cur := walFramesPerCall(t, schema3), walFramesPerCall(t, latestVersion())
	t.Logf("WAL frames per protected call: schema %d %.2f, schema %d %.2f", schema3, old, latestVersion(), cur)
	if cur < 11 || cur > 19.5 {
		t.Errorf("a protected call commits %.2f frames at schema %d, want 11 to 19.5", cur, latestVersion())
	}
	if old-cur < 4.5 {
		t.Errorf("a protected call commits %.2f frames at schema %d and %.2f at schema %d: want at least 4.5 fewer", old, schema3, cur, latestVersion())
	}
}
