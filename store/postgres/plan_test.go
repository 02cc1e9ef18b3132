package postgres

import (
	"fmt"
	"testing"
	"time"
)

// A batch's statements run on generic plans, made once per connection: the array reads of
// effects are never re-planned for each execution (which cost the server more than executing
// them), and the setting ends with the transaction.
func TestBatchGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := Open(ctx, newSchemaURL(t), &Config{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const calls = 10
	for i := range calls {
		c := newCutCall(fmt.Sprintf("plans:%d", i))
		res, err := st.Reserve(ctx, c.reserveReq(time.Now()))
		if err != nil || !res.Reserved {
			t.Fatalf("Reserve %d = %+v, %v", i, res, err)
		}
		if _, err := st.Record(ctx, c.recordReq(time.Now(), res.Effect.Attempt)); err != nil {
			t.Fatalf("Record %d: %v", i, err)
		}
	}
	// One connection: the batches ran on the one the queries below read.
	var generic, custom int64
	err = st.pool.QueryRow(ctx, `SELECT COALESCE(sum(generic_plans), 0), COALESCE(sum(custom_plans), 0)
		FROM pg_prepared_statements WHERE statement LIKE '%.effects WHERE effect_key = ANY($1)%'`).Scan(&generic, &custom)
	if err != nil {
		t.Fatal(err)
	}
	if custom != 0 || generic < 2*calls {
		t.Errorf("the batches' reads of effects ran on %d generic and %d custom plans, want %d or more generic and no custom",
			generic, custom, 2*calls)
	}
	var mode, idle string
	if err := st.pool.QueryRow(ctx, `SELECT current_setting('plan_cache_mode'), current_setting('idle_in_transaction_session_timeout')`).
		Scan(&mode, &idle); err != nil {
		t.Fatal(err)
	}
	if mode != "auto" || idle != "0" {
		t.Errorf("after the batches the session has plan_cache_mode = %s and idle_in_transaction_session_timeout = %s, want the server's defaults (auto, 0): the settings must end with each transaction",
			mode, idle)
	}
}

// A batch's reads find their rows through the index whatever the size of the table when they
// were planned. A batch plans its statements once per connection; planned while the store was
// new, the generic plan of the read of effects by = ANY was a sequential scan, kept for every
// batch after it, so each call read the whole effects table: the server's time a call grew with
// the store. The server's own count of sequential scans on the store's tables, read from the
// one connection the batches ran on, must not move while calls run — in both exec modes (the
// pooler mode plans each execution, and must not pick the scan either).
func TestBatchReadsUseIndexes(t *testing.T) {
	t.Parallel()
	for name, mode := range map[string]string{"prepared": "", "exec": "default_query_exec_mode=exec"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			u := newSchemaURL(t)
			if mode != "" {
				u += "&" + mode
			}
			st, err := Open(ctx, u, &Config{MaxConns: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			call := func(i int) {
				c := newCutCall(fmt.Sprintf("scan:%d", i))
				res, err := st.Reserve(ctx, c.reserveReq(time.Now()))
				if err != nil || !res.Reserved {
					t.Fatalf("Reserve %d = %+v, %v", i, res, err)
				}
				if _, err := st.Record(ctx, c.recordReq(time.Now(), res.Effect.Attempt)); err != nil {
					t.Fatalf("Record %d: %v", i, err)
				}
			}
			// The first batches plan the statements, on a store with nothing in it.
			call(0)
			// The scans of the store's tables so far, as the server counts them. A backend
			// publishes its counts when it goes idle after pg_stat_force_next_flush; the one
			// connection is the one the batches ran on.
			scans := func() (n int64) {
				t.Helper()
				if _, err := st.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
					t.Fatal(err)
				}
				err := st.pool.QueryRow(ctx, `SELECT COALESCE(sum(seq_scan), 0)::bigint FROM pg_stat_user_tables
					WHERE schemaname = $1 AND relname IN ('effects', 'approvals', 'receipts', 'events')`, st.schema).Scan(&n)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			before := scans()
			const calls = 40
			for i := 1; i <= calls; i++ {
				call(i)
			}
			if n := scans() - before; n != 0 {
				t.Errorf("%d calls scanned the store's tables %d times (%.1f a call): a batch's read must take the index, not read the table",
					calls, n, float64(n)/calls)
			}
		})
	}
}
