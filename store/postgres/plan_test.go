package postgres

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
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

// A call is two batches, and each statement of a batch is a round of the server's executor
// (bind, a portal, a snapshot, its reply): the batch's settings ride on its lock of the chain
// head instead of a statement of their own. Counted on the wire: the Execute messages and simple
// queries the store sends, one worker on one connection, in both exec modes.
func TestBatchStatementsACall(t *testing.T) {
	t.Parallel()
	for name, mode := range map[string]string{"prepared": "", "exec": "default_query_exec_mode=exec"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			u := newSchemaURL(t)
			if mode != "" {
				u += "&" + mode
			}
			pu, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			counter := newStatementCounter(t, pu.Host)
			pu.Host = counter.addr()
			st, err := Open(ctx, pu.String(), &Config{MaxConns: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			call := func(i int) {
				c := newCutCall(fmt.Sprintf("statements:%d", i))
				res, err := st.Reserve(ctx, c.reserveReq(time.Now()))
				if err != nil || !res.Reserved {
					t.Fatalf("Reserve %d = %+v, %v", i, res, err)
				}
				if _, err := st.Record(ctx, c.recordReq(time.Now(), res.Effect.Attempt)); err != nil {
					t.Fatalf("Record %d: %v", i, err)
				}
			}
			for i := range 3 { // the statements prepared
				call(i)
			}
			const calls = 20
			before := counter.statements.Load()
			for i := 3; i < 3+calls; i++ {
				call(i)
			}
			// Reserve: BEGIN, the head locked with the settings, the effect read, its insert, the
			// events, COMMIT. Record: the same with the compare-and-set for the insert, and the
			// receipt.
			const want = 13
			if got := float64(counter.statements.Load()-before) / calls; got != want {
				t.Errorf("%.2f statements a call, want %d", got, want)
			}
		})
	}
}

// statementCounter is a TCP proxy to a PostgreSQL server that counts the statements clients run
// through it: each Execute message of the extended protocol and each simple Query.
type statementCounter struct {
	ln         net.Listener
	target     string
	statements atomic.Int64
	wg         sync.WaitGroup
	mu         sync.Mutex
	conns      []net.Conn
}

func newStatementCounter(t *testing.T, target string) *statementCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &statementCounter{ln: ln, target: target}
	c.wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, client, server)
			c.mu.Unlock()
			c.wg.Go(func() {
				defer client.Close()
				_, _ = io.Copy(client, server)
			})
			c.wg.Go(func() {
				defer server.Close()
				c.count(client, server)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		c.mu.Lock()
		for _, conn := range c.conns {
			conn.Close()
		}
		c.mu.Unlock()
		c.wg.Wait()
	})
	return c
}

func (c *statementCounter) addr() string { return c.ln.Addr().String() }

// count forwards the client's messages to the server, counting Execute ('E') and Query ('Q').
// The first messages have no type byte: an SSL or GSS encryption request (answered with one
// byte, then the next untyped message), and the startup message.
func (c *statementCounter) count(client, server net.Conn) {
	untyped := true
	for {
		var typ byte
		if !untyped {
			var b [1]byte
			if _, err := io.ReadFull(client, b[:]); err != nil {
				return
			}
			typ = b[0]
		}
		var head [4]byte
		if _, err := io.ReadFull(client, head[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(head[:])-4)
		if _, err := io.ReadFull(client, body); err != nil {
			return
		}
		msg := append(head[:], body...)
		if untyped {
			// 80877103: SSLRequest, 80877104: GSSENCRequest; anything else is the startup message.
			if code := binary.BigEndian.Uint32(body[:4]); code != 80877103 && code != 80877104 {
				untyped = false
			}
		} else {
			msg = append([]byte{typ}, msg...)
			if typ == 'E' || typ == 'Q' {
				c.statements.Add(1)
			}
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// A batch inserts a new effect row with a plain INSERT: a row there already is an error that
// fails the batch, as it must. With ON CONFLICT DO NOTHING the insert was a speculative one,
// which first looks the key up in the primary key's index (and writes one more WAL record to
// confirm the row). The server counts the lookups of effects_pkey: a call reads the effect in
// each of its two batches and finds the row to compare-and-set in the second — three, not four.
func TestBatchEffectLookups(t *testing.T) {
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
			lookups := func() (n int64) {
				t.Helper()
				if _, err := st.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
					t.Fatal(err)
				}
				err := st.pool.QueryRow(ctx, `SELECT idx_scan FROM pg_stat_user_indexes
					WHERE schemaname = $1 AND indexrelname = 'effects_pkey'`, st.schema).Scan(&n)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			before := lookups()
			const calls = 20
			for i := range calls {
				c := newCutCall(fmt.Sprintf("lookups:%d", i))
				res, err := st.Reserve(ctx, c.reserveReq(time.Now()))
				if err != nil || !res.Reserved {
					t.Fatalf("Reserve %d = %+v, %v", i, res, err)
				}
				if _, err := st.Record(ctx, c.recordReq(time.Now(), res.Effect.Attempt)); err != nil {
					t.Fatalf("Record %d: %v", i, err)
				}
			}
			if got := float64(lookups()-before) / calls; got != 3 {
				t.Errorf("%.2f lookups of effects_pkey a call, want 3 (two reads and the compare-and-set)", got)
			}
		})
	}
}

// TestEffectReadPlans: the effect lists an operator and the sweeper read go through an index
// that holds only what they select — what may need a person, the executing and the ambiguous
// effects through effects_unsettled, a page of failed ones through effects_state — or, a page of
// all effects, through the primary key from where the page starts; none is a sequential scan of
// the effects table (every effect the store ever held) and none sorts. The planner is told
// sequential scans cost more than any other path, as they would on a table of millions, so that
// the plan shows whether an index can serve the read at all.
func TestEffectReadPlans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := Open(ctx, newSchemaURL(t), &Config{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tc := range []struct {
		name  string
		f     store.EffectFilter
		index string
	}{
		{"unsettled", store.EffectFilter{Unsettled: true}, "effects_unsettled"},
		{"unsettled page", store.EffectFilter{Unsettled: true, After: "k", Limit: 10}, "effects_unsettled"},
		{"executing", store.EffectFilter{State: store.Executing}, "effects_unsettled"},
		{"ambiguous", store.EffectFilter{State: store.Ambiguous}, "effects_"},
		{"failed, a page", store.EffectFilter{State: store.Failed, After: "k", Limit: 10}, "effects_state"},
		{"all, a page", store.EffectFilter{After: "k", Limit: 10}, "effects_pkey"},
		{"committed, a page", store.EffectFilter{State: store.Committed, After: "k", Limit: 10}, "effects_pkey"},
	} {
		q, args := st.effectsQuery(tc.f)
		tx, err := st.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		if _, err = tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off`); err == nil {
			var rows pgx.Rows
			if rows, err = tx.Query(ctx, "EXPLAIN "+q, args...); err == nil {
				var line string
				_, err = pgx.ForEachRow(rows, []any{&line}, func() error { plan = append(plan, line); return nil })
			}
		}
		tx.Rollback(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := strings.Join(plan, "\n")
		if strings.Contains(got, "Seq Scan") || strings.Contains(got, "Sort") || !strings.Contains(got, tc.index) {
			t.Errorf("Effects(%s) plan:\n%s\nwant it through %s, with no sequential scan and no sort", tc.name, got, tc.index)
		}
	}
}
