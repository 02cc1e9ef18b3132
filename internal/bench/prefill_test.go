package bench

import (
	"testing"
	"time"

	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/store"
)

// TestPrefill grows a store of each backend through its bulk path and measures there: the
// chain verifies with every receipt filled, the store holds effects of every final state the
// mix leaves, the calls were measured on an empty store and on the filled one, and each read
// answered with what the store holds.
func TestPrefill(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t, backend, "latch_bench_prefill")
			rep, err := Prefill(t.Context(), &PrefillConfig{Store: url, Receipts: 1500, Workers: []int{1, 2},
				Duration: 100 * time.Millisecond, Runs: 1, PerFill: 400, Reads: 3, ReadBudget: time.Second})
			if err != nil {
				t.Fatalf("Prefill() = %v", err)
			}
			if rep.Filled < 1500 || rep.Filled > 1501 || !rep.Verify.OK || rep.Verify.Receipts != rep.Receipts || rep.Receipts < rep.Filled {
				t.Errorf("filled %d receipts, verified %d (ok %t) of %d; want 1500 or 1501 filled, all verified",
					rep.Filled, rep.Verify.Receipts, rep.Verify.OK, rep.Receipts)
			}
			for _, s := range []store.State{store.Committed, store.Failed, store.Ambiguous} {
				if rep.Effects[s] == 0 {
					t.Errorf("effects = %v; want some %s", rep.Effects, s)
				}
			}
			if rep.Approvals[store.Consumed] == 0 {
				t.Errorf("approvals = %v; want some consumed", rep.Approvals)
			}
			if len(rep.Calls) != 2 {
				t.Fatalf("calls = %+v; want 1 and 2 workers", rep.Calls)
			}
			for _, c := range rep.Calls {
				if len(c.Empty) != 1 || len(c.Filled) != 1 || c.EmptyPerSec <= 0 || c.FilledPerSec <= 0 || c.Ratio <= 0 {
					t.Errorf("calls at %d workers = %+v; want one run of each, measured", c.Workers, c)
				}
			}
			want := map[string]int64{
				"GET /v1/effects?state=ambiguous": rep.Effects[store.Ambiguous],
				"GET /v1/effects?state=failed":    rep.Effects[store.Failed],
				"console /attention":              rep.Effects[store.Ambiguous], // nothing executing, no conflicts
			}
			for _, r := range rep.Reads {
				if r.Runs < 3 {
					t.Errorf("%s timed %d times, want at least 3", r.Name, r.Runs)
				}
				if n, ok := want[r.Name]; ok && int64(r.Rows) != n {
					t.Errorf("%s answered %d rows, want %d", r.Name, r.Rows, n)
				}
			}
		})
	}
}
