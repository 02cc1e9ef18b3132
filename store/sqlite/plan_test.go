package sqlite

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// TestReceiptReadPlans: the receipt reads an operator makes on a store of any size go through
// what holds only what they select — a window (latch stats --since) through the spans of the
// chain and then the receipts of the spans it touches by seq, an effect's or an action's
// receipts through the event index that holds the rows linking them (schema 22) — and never
// scan the receipts table, whose size is every call the store ever decided.
func TestReceiptReadPlans(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	open(t, "sqlite:"+path, nil) // migrated to the latest schema
	db := rawDB(t, path)
	for _, tc := range []struct {
		name  string
		f     store.ReceiptFilter
		index string
	}{
		{"since", store.ReceiptFilter{Since: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, "SEARCH s USING INDEX receipt_spans_max_finished (max_finished>?); SEARCH r USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"},
		{"effect key", store.ReceiptFilter{EffectKey: "charge:inv_1"}, "events_effect_key"},
		{"action id", store.ReceiptFilter{ActionID: "act_1"}, "events_action_id"},
		{"approval id", store.ReceiptFilter{ApprovalID: "apr_1"}, "receipts_approval_id"},
	} {
		q, args, err := receiptsQuery(tc.f, true, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := queryPlan(t, db, q, args)
		t.Logf("%s: %s", tc.name, got)
		if strings.Contains(got, "SCAN receipts") || strings.Contains(got, "SCAN r;") || strings.Contains(got, "SCAN s;") || !strings.Contains(got, tc.index) {
			t.Errorf("Receipts(%s) plan = %q; want it through %s, with no scan of receipts", tc.name, got, tc.index)
		}
	}
}

// queryPlan is SQLite's plan of q with args (EXPLAIN QUERY PLAN), its steps joined by "; ".
func queryPlan(t *testing.T, db *sql.DB, q string, args []any) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("plan of %s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// TestEffectReadPlans: the effect lists an operator and the sweeper read on a store of any size
// go through what holds only what they select — the ambiguous effects and the outcome conflicts
// from effects_attention alone (it carries every column: no lookup in the table), the executing
// ones through executing_parked and the event rows since the executing mark (a range of the
// events table's rowids), what may need a person through all three (two parts in key order,
// merged), the failed ones through effects_state — or, a page of all effects, through the
// primary key from where the page starts; none scans the effects or the events table, whose
// sizes are every effect and event the store ever held, and none sorts.
func TestEffectReadPlans(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, "sqlite:"+path, nil) // migrated to the latest schema
	db := rawDB(t, path)
	for _, tc := range []struct {
		name  string
		f     store.EffectFilter
		index string
	}{
		{"unsettled", store.EffectFilter{Unsettled: true}, "MERGE (UNION ALL); LEFT; SCAN effects USING COVERING INDEX effects_attention; RIGHT"},
		{"unsettled page", store.EffectFilter{Unsettled: true, After: "k", Limit: 10}, "SEARCH effects USING COVERING INDEX effects_attention (effect_key>?)"},
		{"unsettled, executing", store.EffectFilter{Unsettled: true}, "SCAN executing_parked; UNION ALL; SEARCH events USING INTEGER PRIMARY KEY (rowid>?)"},
		{"executing", store.EffectFilter{State: store.Executing}, "SCAN executing_parked; UNION ALL; SEARCH events USING INTEGER PRIMARY KEY (rowid>?)"},
		{"ambiguous", store.EffectFilter{State: store.Ambiguous}, "SCAN effects USING COVERING INDEX effects_attention"},
		{"failed", store.EffectFilter{State: store.Failed, After: "k", Limit: 10}, "USING INDEX effects_state"},
		{"all, a page", store.EffectFilter{After: "k", Limit: 10}, "USING PRIMARY KEY (effect_key>?)"},
		{"committed, a page", store.EffectFilter{State: store.Committed, After: "k", Limit: 10}, "USING PRIMARY KEY (effect_key>?)"},
	} {
		q, args := s.effectsQuery(tc.f)
		got := queryPlan(t, db, q, args)
		t.Logf("%s: %s", tc.name, got)
		if strings.Contains(got, "SCAN effects") && !strings.Contains(got, "USING") || strings.Contains(got, "SCAN events") ||
			strings.Contains(got, "TEMP B-TREE") || !strings.Contains(got, tc.index) {
			t.Errorf("Effects(%s) plan = %q; want it %s, with no scan of the table and no sort", tc.name, got, tc.index)
		}
	}
}
