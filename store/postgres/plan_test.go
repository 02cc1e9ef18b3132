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
