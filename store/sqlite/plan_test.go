package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// TestReceiptReadPlans: the receipt reads an operator makes on a store of any size go through
// an index — a window (latch stats --since) through receipts_finished_at, an effect's or an
// action's receipts through the event index that holds the rows linking them (schema 22) — and
// never scan the receipts table, whose size is every
// call the store ever decided.
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
		{"since", store.ReceiptFilter{Since: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, "receipts_finished_at"},
		{"effect key", store.ReceiptFilter{EffectKey: "charge:inv_1"}, "events_effect_key"},
		{"action id", store.ReceiptFilter{ActionID: "act_1"}, "events_action_id"},
		{"approval id", store.ReceiptFilter{ApprovalID: "apr_1"}, "receipts_approval_id"},
	} {
		q, args, err := receiptsQuery(tc.f, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(plan, "; ")
		if strings.Contains(got, "SCAN receipts") || !strings.Contains(got, tc.index) {
			t.Errorf("Receipts(%s) plan = %q; want it through %s, with no scan of receipts", tc.name, got, tc.index)
		}
	}
}
