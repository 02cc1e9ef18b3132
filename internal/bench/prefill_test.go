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
				"GET /v1/effects?state=ambiguous": min(rep.Effects[store.Ambiguous], 100),
				"GET /v1/effects?state=failed":    min(rep.Effects[store.Failed], 100),
				"GET /v1/effects?state=all":       100,                          // a page: the store holds more
				"console /attention":              rep.Effects[store.Ambiguous], // nothing executing, no conflicts
			}
			stats := map[string]int{}
			for _, r := range rep.Reads {
				runs := 3
				if r.Name == "latch stats, first count" {
					runs = 1
				}
				if r.Runs < runs || runs == 1 && r.Runs != 1 {
					t.Errorf("%s timed %d times, want %d", r.Name, r.Runs, runs)
				}
				if n, ok := want[r.Name]; ok && int64(r.Rows) != n {
					t.Errorf("%s answered %d rows, want %d", r.Name, r.Rows, n)
				}
				stats[r.Name] = r.Rows
			}
			// The counts that start from the kept tally count what the first count did.
			if n := stats["latch stats, first count"]; int64(n) < rep.Filled*9/10 || stats["latch stats"] != n {
				t.Errorf("latch stats counted %d receipts first and %d from the tally kept; want the same, about the %d filled",
					n, stats["latch stats"], rep.Filled)
			}
		})
	}
}
