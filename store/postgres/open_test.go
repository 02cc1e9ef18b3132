package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, schema, pgURL string
		wantErr           string
	}{
		{in: "postgres://u@h:5432/db", schema: "public", pgURL: "postgres://u@h:5432/db"},
		{in: "postgresql://u:p@h/db?sslmode=disable&schema=latch", schema: "latch", pgURL: "postgresql://u:p@h/db?sslmode=disable"},
		{in: "postgres://h/db?schema=My%20Schema", schema: "My Schema", pgURL: "postgres://h/db"},
		{in: "mysql://h/db", wantErr: "want postgres://"},
		{in: "postgres://h/db?schema=", wantErr: "empty"},
		{in: "postgres://h/db?schema=a&schema=b", wantErr: "more than once"},
		{in: "postgres://h/db?schema=" + strings.Repeat("x", 64), wantErr: "longer than 63"},
		// A malformed parameter is refused, never dropped: url.URL.Query drops it silently, and
		// a dropped sslmode connects with pgx's default.
		{in: "postgres://h/db?schema=x;", wantErr: `malformed parameter "schema": ';' does not separate parameters`},
		{in: "postgres://h/db?sslmode=require;", wantErr: `malformed parameter "sslmode"`},
		{in: "postgres://h/db?sslmode=require;schema=x", wantErr: `malformed parameter "sslmode"`},
		{in: "postgres://h/db?schema=x&sslmode=verify-full;", wantErr: `malformed parameter "sslmode"`},
		{in: "postgres://h/db?sslmode=%zz", wantErr: `malformed value of parameter "sslmode": bad %-escape`},
		{in: "postgres://h/db?ssl%zzmode=require", wantErr: `malformed parameter name "ssl%zzmode"`},
		{in: "postgres://h/db?sslmode=require&sslmode=disable", wantErr: `parameter "sslmode" given more than once`},
		{in: "postgres://h/db?sslmode=require&schema=x", schema: "x", pgURL: "postgres://h/db?sslmode=require"},
	}
	for _, tt := range tests {
		loc, err := parseURL(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseURL(%q) = %+v, %v, want error containing %q", tt.in, loc, err, tt.wantErr)
			}
			continue
		}
		if err != nil || loc.schema != tt.schema || loc.pgURL != tt.pgURL {
			t.Errorf("parseURL(%q) = %+v, %v, want schema %q, pgx URL %q", tt.in, loc, err, tt.schema, tt.pgURL)
		}
	}
}

// TestOpenMalformedSSLModeRefused opens a real server (which offers no TLS) with a malformed
// sslmode=require: before malformed parameters were refused, the parameter was dropped and the
// store connected without TLS.
func TestOpenMalformedSSLModeRefused(t *testing.T) {
	t.Parallel()
	u := newSchemaURL(t)
	for _, bad := range []string{"sslmode=require;", "sslmode=require%3"} {
		raw := strings.Replace(u, "?", "?"+bad+"&", 1)
		raw = strings.Replace(raw, "sslmode=disable&", "", 1)
		raw = strings.Replace(raw, "&sslmode=disable", "", 1)
		st, err := Open(t.Context(), raw, nil)
		if err == nil {
			st.Close()
			t.Errorf("Open(%s) connected, want the malformed sslmode refused", redact(raw))
		} else if !strings.Contains(err.Error(), `parameter "sslmode"`) {
			t.Errorf("Open(%s) = %v, want an error naming the sslmode parameter", redact(raw), err)
		}
	}
	if _, err := withoutSchema("postgres://u:s3cret@h/db?sslmode=require;"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("withoutSchema(malformed) = %v, want an error without the password", err)
	}
}

func TestOpenErrorHidesPassword(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), "postgres://u:s3cret@127.0.0.1:1/db?schema=", nil)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open(bad URL) = %v, want an error without the password", err)
	}
}

func TestOpenMigratesOnceAndReopens(t *testing.T) {
	t.Parallel()
	u := newSchemaURL(t)
	for i := range 2 {
		st, err := Open(t.Context(), u, nil)
		if err != nil {
			t.Fatalf("Open #%d = %v", i+1, err)
		}
		if v := schemaVersionOf(t, st); v != latestVersion() {
			t.Errorf("Open #%d: schema version %d, want %d", i+1, v, latestVersion())
		}
		st.Close()
	}
}

// A schema name that needs quoting works: every statement quotes it.
func TestOpenQuotedSchema(t *testing.T) {
	t.Parallel()
	u := newNamedSchemaURL(t, `Latch "Test" `+randomHex(4))
	st, err := Open(t.Context(), u, nil)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer st.Close()
	c := newCutCall("k")
	res, err := st.Reserve(t.Context(), c.reserveReq(time.Now()))
	if err != nil || !res.Reserved {
		t.Fatalf("Reserve = %+v, %v, want reserved", res, err)
	}
}

// Statements are prepared and cached per connection unless the URL asks for pgx's exec mode
// (unnamed statements, for transaction-mode poolers): counted in pg_prepared_statements of the
// pool's one connection after a reserve and a record.
func TestStatementCaching(t *testing.T) {
	t.Parallel()
	u := newSchemaURL(t)
	for _, tc := range []struct {
		query    string
		mode     pgx.QueryExecMode
		prepared bool
	}{
		{"", pgx.QueryExecModeCacheStatement, true},
		{"default_query_exec_mode=exec", pgx.QueryExecModeExec, false},
		{"default_query_exec_mode=cache_describe", pgx.QueryExecModeCacheDescribe, false},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			ctx := t.Context()
			url := u
			if tc.query != "" {
				url += "&" + tc.query
			}
			st, err := Open(ctx, url, &Config{MaxConns: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if st.conn.DefaultQueryExecMode != tc.mode {
				t.Errorf("Open(%q): exec mode %v, want %v", tc.query, st.conn.DefaultQueryExecMode, tc.mode)
			}
			c := newCutCall("caching:" + randomHex(4))
			res, err := st.Reserve(ctx, c.reserveReq(time.Now()))
			if err != nil || !res.Reserved {
				t.Fatalf("Reserve = %+v, %v", res, err)
			}
			if _, err := st.Record(ctx, c.recordReq(time.Now(), res.Effect.Attempt)); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if got := n > 0; got != tc.prepared {
				t.Errorf("Open(%q): %d prepared statements on the connection after a reserve and a record, want any: %t",
					tc.query, n, tc.prepared)
			}
		})
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	serverURL(t)
	ctx := t.Context()

	t.Run("NotLatch", func(t *testing.T) {
		t.Parallel()
		u := newSchemaURL(t)
		loc, _ := parseURL(u)
		q := pgxQuote(loc.schema)
		if err := execDirect(ctx, u, `CREATE SCHEMA `+q+`; CREATE TABLE `+q+`.orders (id int)`); err != nil {
			t.Fatal(err)
		}
		for _, ro := range []bool{false, true} {
			if _, err := Open(ctx, u, &Config{ReadOnly: ro}); !errors.Is(err, store.ErrNotLatch) {
				t.Errorf("Open(ReadOnly=%t) of a schema with other tables = %v, want ErrNotLatch", ro, err)
			}
		}
	})

	t.Run("TooNew", func(t *testing.T) {
		t.Parallel()
		u := newSchemaURL(t)
		st, err := Open(ctx, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		loc, _ := parseURL(u)
		if err := execDirect(ctx, u, `UPDATE `+pgxQuote(loc.schema)+`.latch_schema SET version = 99`); err != nil {
			t.Fatal(err)
		}
		for _, ro := range []bool{false, true} {
			if _, err := Open(ctx, u, &Config{ReadOnly: ro}); !errors.Is(err, store.ErrSchemaTooNew) {
				t.Errorf("Open(ReadOnly=%t) of schema version 99 = %v, want ErrSchemaTooNew", ro, err)
			}
		}
	})

	t.Run("ReadOnlyMissing", func(t *testing.T) {
		t.Parallel()
		u := newSchemaURL(t)
		_, err := Open(ctx, u, &Config{ReadOnly: true})
		if !errors.Is(err, store.ErrNoStore) || !strings.Contains(err.Error(), "created by the first writer") {
			t.Errorf("Open(ReadOnly) of a missing schema = %v, want ErrNoStore saying who creates it", err)
		}
		loc, _ := parseURL(u)
		if err := execDirect(ctx, u, `CREATE SCHEMA `+pgxQuote(loc.schema)); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(ctx, u, &Config{ReadOnly: true}); !errors.Is(err, store.ErrNoStore) {
			t.Errorf("Open(ReadOnly) of an empty schema = %v, want ErrNoStore", err)
		}
		// Still empty: a read-only open created nothing.
		var n int
		if err := queryDirect(ctx, u, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1`, []any{loc.schema}, &n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("after read-only opens the schema holds %d relations, want 0", n)
		}
	})
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newSchemaURL(t)
	w, err := Open(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := newCutCall("ro")
	if _, err := w.Reserve(ctx, c.reserveReq(time.Now())); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, u, &Config{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open(ReadOnly) = %v", err)
	}
	defer r.Close()
	if e, err := r.Effect(ctx, c.key); err != nil || e.ActionID != c.actionID {
		t.Errorf("read-only Effect(%s) = %+v, %v, want the reservation", c.key, e, err)
	}
	if _, err := r.Reserve(ctx, newCutCall("ro2").reserveReq(time.Now())); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("read-only Reserve = %v, want store.ErrReadOnly", err)
	}
	if _, err := r.CreateApproval(ctx, &store.ApprovalRequest{Approval: &store.Approval{ID: "apr_x"}}); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("read-only CreateApproval = %v, want store.ErrReadOnly", err)
	}
}

// Six processes open one fresh schema at the same instant: all succeed, and the schema is
// migrated exactly once.
func TestOpenConcurrentProcesses(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	u := newSchemaURL(t)
	at := time.Now().Add(700 * time.Millisecond).UnixNano()
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=open", "LATCH_PG_TEST_URL="+u, fmt.Sprintf("LATCH_PG_TEST_AT=%d", at))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				errs[i] = fmt.Errorf("process %d: %v: %s", i, err, stderr.String())
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	st, err := Open(t.Context(), u, &Config{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open(ReadOnly) after the racers = %v", err)
	}
	defer st.Close()
	if v := schemaVersionOf(t, st); v != latestVersion() {
		t.Errorf("schema version %d, want %d", v, latestVersion())
	}
	if h, err := st.Head(t.Context()); err != nil || h.Seq != 0 {
		t.Errorf("Head() = %+v, %v, want an empty chain (one chain_head row)", h, err)
	}
}

// The same race between goroutines, each with its own pool.
func TestOpenConcurrentPools(t *testing.T) {
	t.Parallel()
	u := newSchemaURL(t)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			st, err := Open(t.Context(), u, &Config{MaxConns: 2})
			if err != nil {
				t.Errorf("Open #%d = %v", i, err)
				return
			}
			st.Close()
		})
	}
	wg.Wait()
}

func schemaVersionOf(t *testing.T, st *Store) int {
	t.Helper()
	var v int
	if err := st.pool.QueryRow(t.Context(), `SELECT version FROM `+st.quoted()+`.latch_schema WHERE id = 1`).Scan(&v); err != nil {
		t.Fatalf("read schema version: %v", err)
	}
	return v
}

func pgxQuote(name string) string { return (&Store{schema: name}).quoted() }

// queryDirect runs one query returning one row on a connection of its own.
func queryDirect(ctx context.Context, raw, sql string, args []any, dest ...any) error {
	loc, err := parseURL(raw)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, loc.pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql, args...).Scan(dest...)
}

// A reader upgraded before the writers reads a schema older than its binary (docs/postgres.md:
// readers first); a writer then migrates it.
func TestReaderOnOlderSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newSchemaURL(t)
	old, err := newStore(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done, err := old.migrateOne(ctx); err != nil || done {
		t.Fatalf("migrateOne = %t, %v", done, err)
	}
	old.version = 1
	old.q = newQueries(old.quoted(), 1) // the statements of a binary that knew schema 1
	c := newCutCall("old")
	if res, err := old.Reserve(ctx, c.reserveReq(time.Now())); err != nil || !res.Reserved {
		t.Fatalf("Reserve on schema 1 = %+v, %v", res, err)
	}
	old.Close()

	r, err := Open(ctx, u, &Config{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open(ReadOnly) of schema 1 = %v", err)
	}
	defer r.Close()
	if v := schemaVersionOf(t, r); v != 1 {
		t.Fatalf("a read-only open migrated the schema to %d", v)
	}
	if e, err := r.Effect(ctx, c.key); err != nil || e.ActionID != c.actionID {
		t.Errorf("Effect on schema 1 = %+v, %v", e, err)
	}
	if ds, err := r.Delegations(ctx); err != nil || len(ds) != 0 {
		t.Errorf("Delegations on schema 1 = %v, %v, want none", ds, err)
	}

	w, err := Open(ctx, u, nil)
	if err != nil {
		t.Fatalf("Open (writer) of schema 1 = %v", err)
	}
	defer w.Close()
	if v := schemaVersionOf(t, w); v != latestVersion() {
		t.Errorf("after a writer opened it the schema is at %d, want %d", v, latestVersion())
	}
	if e, err := w.Effect(ctx, c.key); err != nil || e.ActionID != c.actionID {
		t.Errorf("Effect after migrating = %+v, %v", e, err)
	}
}

// Delegations and revocations are insert-only in the database itself.
func TestDelegationsInsertOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newSchemaURL(t)
	st, err := Open(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := &store.Delegation{ID: "dlg_" + randomHex(16), Parent: "g", Grant: []byte("actions: [x]\n"), CreatedBy: "a", CreatedAt: time.Now()}
	if err := st.CreateDelegation(ctx, d, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RevokeDelegation(ctx, &store.RevokeRequest{Now: time.Now(), ID: d.ID, By: "cli:bob"}); err != nil {
		t.Fatal(err)
	}
	q := st.quoted()
	for _, sql := range []string{
		`UPDATE ` + q + `.delegations SET parent = 'other'`,
		`DELETE FROM ` + q + `.delegations`,
		`DELETE FROM ` + q + `.revocations`,
		`TRUNCATE ` + q + `.revocations`,
	} {
		if err := execDirect(ctx, u, sql); err == nil || !strings.Contains(err.Error(), "insert-only") {
			t.Errorf("%s = %v, want refused as insert-only", sql, err)
		}
	}
}

// Schema 3: the indexes every call writes hold only the rows their queries look for, and
// receipt_id has no index.
func TestSchemaIndexes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openFresh(t)
	rows, err := st.pool.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1`, st.schema)
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		defs[name] = def
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for name, where := range map[string]string{
		"events_approval_id":   "WHERE (approval_id <> ''::text)",
		"receipts_approval_id": "WHERE (approval_id <> ''::text)",
		"effects_state":        "WHERE (state = ANY (ARRAY['failed'::text, 'ambiguous'::text]))",
	} {
		if !strings.HasSuffix(defs[name], where) {
			t.Errorf("index %s = %q, want it partial: %s", name, defs[name], where)
		}
	}
	if def, ok := defs["receipts_receipt_id_key"]; ok {
		t.Errorf("receipt_id is still indexed: %s", def)
	}
	if len(defs) < 10 {
		t.Errorf("only %d indexes in the schema: %v", len(defs), defs)
	}
}
