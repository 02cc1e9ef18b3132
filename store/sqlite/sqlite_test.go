package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	sqlitedriver "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/storetest"
)

// backend is this package as the conformance suite sees it.
var backend = storetest.Backend{
	Name: "sqlite",
	New: func(t *testing.T) string {
		return "sqlite:" + filepath.Join(t.TempDir(), "state.db")
	},
	Open: func(ctx context.Context, url string) (store.Store, error) {
		s, err := Open(ctx, url, nil)
		if err != nil {
			return nil, err
		}
		return s, nil
	},
}

func TestMain(m *testing.M) {
	storetest.Child(backend)
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, backend)
}

// open opens the store at url and closes it with the test.
func open(t *testing.T, url string, cfg *Config) *Store {
	t.Helper()
	s := openClose(t, url, cfg)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return s
}

// openClose opens the store at url; the test closes it.
func openClose(t *testing.T, url string, cfg *Config) *Store {
	t.Helper()
	s, err := Open(t.Context(), url, cfg)
	if err != nil {
		t.Fatalf("Open(%q) = %v", url, err)
	}
	return s
}

// rawDB opens path with the driver alone, outside the store.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func TestURLRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		url, want string
	}{
		{"", "not a sqlite: URL"},
		{"postgres://localhost/latch", "not a sqlite: URL"},
		{"sqlite:", "empty path"},
		{"sqlite:   ", "empty path"},
		{"sqlite:?synchronous=normal", "empty path"},
		{"sqlite::memory:", "in-memory"},
		{"sqlite:file::memory:", "in-memory"},
		{"sqlite:file::memory:?cache=shared", "in-memory"},
		{"sqlite:" + dir + "/a.db?mode=memory", "in-memory"},
		{"sqlite:file:" + dir + "/a.db", "not a path"},
		{"sqlite://" + dir + "/a.db", "not sqlite://PATH"},
		{"sqlite:" + dir + "/a.db?cache=shared", `unknown parameter "cache"`},
		{"sqlite:" + dir + "/a.db?_txlock=deferred", `unknown parameter "_txlock"`},
		{"sqlite:" + dir + "/a.db?synchronous=off", "want full or normal"},
		{"sqlite:" + dir + "/a.db?synchronous=normal&synchronous=full", "more than once"},
		{"sqlite:" + dir + "/a\x00.db", "NUL"},
	}
	for _, c := range cases {
		for _, ro := range []bool{false, true} {
			s, err := Open(t.Context(), c.url, &Config{ReadOnly: ro})
			if err == nil {
				s.Close()
				t.Errorf("Open(%q, ReadOnly=%t) = nil error, want %q", c.url, ro, c.want)
				continue
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "open ") {
				t.Errorf("Open(%q, ReadOnly=%t) = %v, want an error mentioning %q", c.url, ro, err, c.want)
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused URLs left files: %v", entries)
	}
}

func TestReadOnlyMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, ".latch", "state.db")
	s, err := Open(t.Context(), "sqlite:"+path, &Config{ReadOnly: true})
	if !errors.Is(err, store.ErrNoStore) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open(missing, ReadOnly) = %v, want ErrNoStore", err)
	}
	if !strings.Contains(err.Error(), "created by the first worker that opens it") {
		t.Errorf("error %q does not say how a store comes to exist", err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a read-only open created %s (stat: %v)", filepath.Dir(path), err)
	}

	// An empty file (a zero-length database) is no store either, and stays empty.
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), "sqlite:"+empty, &Config{ReadOnly: true}); !errors.Is(err, store.ErrNoStore) {
		t.Errorf("Open(empty file, ReadOnly) = %v, want ErrNoStore", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Errorf("a read-only open wrote to an empty file: %v, %v", fi, err)
	}
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	w := openClose(t, url, nil)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	req := &store.ReserveRequest{Now: now, ActionID: "act_1", Action: "billing.charge", ActionHash: "sha256:ab", EffectKey: "charge:inv_1", Lease: time.Minute}
	if _, err := w.Reserve(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil { // a clean close removes the -wal and -shm files
		t.Fatal(err)
	}

	r := open(t, url, &Config{ReadOnly: true})
	e, err := r.Effect(t.Context(), "charge:inv_1")
	if err != nil || e.State != store.Executing {
		t.Fatalf("Effect() on a read-only store = %+v, %v", e, err)
	}
	if _, err := r.Reserve(t.Context(), req); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Reserve() on a read-only store = %v, want store.ErrReadOnly", err)
	}
	if _, err := r.Resolve(t.Context(), &store.ResolveRequest{Now: now, Key: "charge:inv_1", To: store.Failed, By: "cli:ana"}); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Resolve() on a read-only store = %v, want store.ErrReadOnly", err)
	}
	if n := r.WriteTransactions(); n != 0 {
		t.Errorf("WriteTransactions() = %d on a read-only store", n)
	}

	// A writer opened beside the reader: the reader sees its commits.
	w2 := open(t, url, nil)
	if _, err := w2.Record(t.Context(), &store.RecordRequest{Now: now.Add(time.Second), EffectKey: "charge:inv_1", ActionID: "act_1",
		Attempt: 1, Outcome: store.Committed, Receipt: &receipt.Receipt{ReceiptID: "rcp_1", ActionID: "act_1", Result: "committed"}}); err != nil {
		t.Fatal(err)
	}
	if e, err := r.Effect(t.Context(), "charge:inv_1"); err != nil || e.State != store.Committed {
		t.Errorf("Effect() on the reader after the writer committed = %+v, %v", e, err)
	}
	if h, err := r.Head(t.Context()); err != nil || h.Seq != 1 {
		t.Errorf("Head() on the reader = %+v, %v, want seq 1", h, err)
	}
}

func TestReadOnlyVersion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v, latest int
		want      error
		text      string
	}{
		{1, 1, nil, ""},
		{2, 2, nil, ""},
		{0, 1, store.ErrNoStore, "created by the first worker"},
		{3, 2, store.ErrSchemaTooNew, "upgrade latch"},
		{1, 2, nil, ""},
		{1, 3, nil, ""},
	}
	for _, c := range cases {
		err := checkReadOnlyVersion(c.v, c.latest)
		switch {
		case c.text == "" && err != nil:
			t.Errorf("checkReadOnlyVersion(%d, %d) = %v, want nil", c.v, c.latest, err)
		case c.text != "" && (err == nil || !strings.Contains(err.Error(), c.text)):
			t.Errorf("checkReadOnlyVersion(%d, %d) = %v, want an error mentioning %q", c.v, c.latest, err, c.text)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("checkReadOnlyVersion(%d, %d) = %v, want %v", c.v, c.latest, err, c.want)
		}
	}
}

func TestNotLatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign.db")
	db := rawDB(t, foreign)
	exec(t, db, `CREATE TABLE jobs (id INTEGER PRIMARY KEY, payload TEXT)`)
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a database\n"), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{foreign, garbage} {
		for _, ro := range []bool{false, true} {
			s, err := Open(t.Context(), "sqlite:"+path, &Config{ReadOnly: ro})
			if !errors.Is(err, store.ErrNotLatch) {
				if s != nil {
					s.Close()
				}
				t.Errorf("Open(%s, ReadOnly=%t) = %v, want ErrNotLatch", filepath.Base(path), ro, err)
			}
		}
	}
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil || n != 1 {
		t.Errorf("the foreign database now has %d schema objects (%v), want its 1 table untouched", n, err)
	}
}

func TestSchemaTooNew(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	s := openClose(t, url, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, strings.TrimPrefix(url, "sqlite:"))
	exec(t, db, fmt.Sprintf(`UPDATE latch_schema SET version = %d`, latestVersion()+1))
	for _, ro := range []bool{false, true} {
		s, err := Open(t.Context(), url, &Config{ReadOnly: ro})
		if !errors.Is(err, store.ErrSchemaTooNew) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open(newer schema, ReadOnly=%t) = %v, want ErrSchemaTooNew", ro, err)
		}
	}
}

func TestPragmas(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		query string
		want  int
	}{{"", 2}, {"?synchronous=full", 2}, {"?synchronous=FULL", 2}, {"?synchronous=normal", 1}} {
		s := open(t, backend.New(t)+c.query, nil)
		var sync, busy, fk int
		var journal string
		for q, dst := range map[string]any{
			"PRAGMA synchronous": &sync, "PRAGMA busy_timeout": &busy, "PRAGMA foreign_keys": &fk, "PRAGMA journal_mode": &journal,
		} {
			writerQuery(t, s, q, dst)
		}
		if sync != c.want || busy != busyTimeoutMillis || fk != 1 || journal != "wal" {
			t.Errorf("URL suffix %q: synchronous=%d busy_timeout=%d foreign_keys=%d journal_mode=%s; want %d %d 1 wal",
				c.query, sync, busy, fk, journal, c.want, busyTimeoutMillis)
		}
	}
}

// TestBeginImmediate checks that a write transaction holds SQLite's write lock from its BEGIN,
// before it reads: another connection cannot start a write meanwhile.
func TestBeginImmediate(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	s := open(t, url, nil)
	// A write request that, once it has begun (the writer's BEGIN IMMEDIATE), lets another
	// connection try to write, before it reads anything.
	err := s.write(t.Context(), func(*txn) error {
		other := rawDB(t, strings.TrimPrefix(url, "sqlite:")+"?_pragma=busy_timeout(0)")
		_, err := other.ExecContext(t.Context(), `BEGIN IMMEDIATE`)
		var se *sqlitedriver.Error
		if !errors.As(err, &se) || se.Code()&0xff != sqlitelib.SQLITE_BUSY {
			t.Errorf("BEGIN IMMEDIATE beside an open write transaction = %v, want SQLITE_BUSY", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// writerQuery runs a query for one row on the store's writer connection.
func writerQuery(t *testing.T, s *Store, q string, dest ...any) {
	t.Helper()
	err := s.wr.onConn(func(c *wconn) error {
		found, err := c.queryRow(q, nil, func(sc scanner) error { return sc.Scan(dest...) })
		if err == nil && !found {
			err = errors.New("no row")
		}
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestConcurrentFirstOpen opens one new file from many Stores at once: each migrates or waits,
// none fails, and the schema is applied once. Separate Stores lock each other as separate
// processes do.
func TestConcurrentFirstOpen(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	const n = 8
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(t.Context(), url, nil)
		})
	}
	close(start)
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Errorf("Open %d = %v", i, errs[i])
			continue
		}
		t.Cleanup(func() { s.Close() })
	}
	if t.Failed() {
		return
	}
	var v int
	if err := stores[0].r.QueryRowContext(t.Context(), `SELECT version FROM latch_schema`).Scan(&v); err != nil || v != latestVersion() {
		t.Errorf("schema version = %d, %v; want %d", v, err, latestVersion())
	}
	// And they exclude each other on one key.
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	won := make([]bool, n)
	for i := range n {
		wg.Go(func() {
			res, err := stores[i].Reserve(t.Context(), &store.ReserveRequest{Now: now, ActionID: fmt.Sprintf("act_%d", i),
				Action: "billing.charge", ActionHash: "sha256:ab", EffectKey: "charge:inv_1", Lease: time.Minute})
			if err != nil {
				t.Errorf("Reserve %d = %v", i, err)
				return
			}
			won[i] = res.Reserved
		})
	}
	wg.Wait()
	if got := slices.Index(won, true); got < 0 || slices.Index(won[got+1:], true) >= 0 {
		t.Errorf("reservations won: %v, want exactly one", won)
	}
}

// TestPaths opens stores at a relative path and at paths with characters a file: URI escapes,
// creating missing directories (private: approval ids are capabilities).
func TestPaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, rel := range []string{".latch/state.db", "a dir/with #hash/and%25percent/state.db", "x/../y/state.db"} {
		s := openClose(t, "sqlite:"+rel, nil)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(dir, rel)
		if _, err := os.Stat(want); err != nil {
			t.Errorf("Open(sqlite:%s) did not create %s: %v", rel, want, err)
		}
		r := open(t, "sqlite:"+rel, &Config{ReadOnly: true})
		if _, err := r.Head(t.Context()); err != nil {
			t.Errorf("Head() on sqlite:%s = %v", rel, err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, ".latch"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("created directory mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}
}

// TestDurability checks what a store wrote is there when the file is opened again, by a writer
// and by a reader, and the chain verifies.
func TestDurability(t *testing.T) {
	t.Parallel()
	url := backend.New(t) + "?synchronous=normal"
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := openClose(t, url, nil)
	for i := range 20 {
		key := fmt.Sprintf("charge:inv_%d", i)
		act := fmt.Sprintf("act_%d", i)
		if _, err := s.Reserve(t.Context(), &store.ReserveRequest{Now: now, ActionID: act, Action: "billing.charge", ActionHash: "sha256:ab", EffectKey: key, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Record(t.Context(), &store.RecordRequest{Now: now, EffectKey: key, ActionID: act, Attempt: 1, Outcome: store.Committed,
			Result: json.RawMessage(`{"n":1}`), Receipt: &receipt.Receipt{ReceiptID: fmt.Sprintf("rcp_%d", i), ActionID: act, EffectKey: key, Result: "committed"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		s := openClose(t, url, &Config{ReadOnly: ro})
		es, err := s.Effects(t.Context(), store.EffectFilter{State: store.Committed})
		if err != nil || len(es) != 20 {
			t.Errorf("ReadOnly=%t: Effects(committed) = %d, %v; want 20", ro, len(es), err)
		}
		head, err := s.Head(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		rep, err := receipt.Verify(s.Receipts(t.Context(), store.ReceiptFilter{}), head)
		if err != nil || !rep.OK || rep.Verified != 20 {
			t.Errorf("ReadOnly=%t: Verify() = %+v, %v; want 20 verified", ro, rep, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogger checks that migrations are logged, once.
func TestLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	url := backend.New(t)
	for range 2 {
		if err := openClose(t, url, &Config{Logger: log}).Close(); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(buf.String(), "store migrated"); n != latestVersion() {
		t.Errorf("log has %d migrations, want %d:\n%s", n, latestVersion(), buf.String())
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestReaderOfOlderSchema: a reader opens a store a writer of an older binary left at schema 1
// (before delegations) without migrating it, reads it, and sees no delegations; a writer then
// migrates it to the latest.
func TestReaderOfOlderSchema(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	s := openClose(t, url, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, strings.TrimPrefix(url, "sqlite:"))
	exec(t, db, `DROP TABLE approval_answers`)
	exec(t, db, `DROP TRIGGER revocations_insert_only_update`)
	exec(t, db, `DROP TRIGGER revocations_insert_only_delete`)
	exec(t, db, `DROP TRIGGER delegations_insert_only_update`)
	exec(t, db, `DROP TRIGGER delegations_insert_only_delete`)
	exec(t, db, `DROP TABLE revocations`)
	exec(t, db, `DROP TABLE delegations`)
	exec(t, db, `DROP TABLE tokens`)
	exec(t, db, `DROP TABLE checkpoints`)
	exec(t, db, `DROP TABLE store_identity`)
	exec(t, db, `DROP TABLE accounts`)
	exec(t, db, `DROP TABLE holds`)
	exec(t, db, `DROP TABLE prunes`)
	exec(t, db, `DROP TABLE carried`)
	exec(t, db, `DROP TABLE request_keys`)
	exec(t, db, `DROP TABLE console_sessions`)
	exec(t, db, `DROP TABLE reconcile_claims`)
	exec(t, db, `DROP TABLE budget_charges`)
	exec(t, db, `DROP TABLE suspensions`)
	exec(t, db, `DROP TABLE standing_approvals`)
	exec(t, db, `DROP TABLE receipt_tally`)
	exec(t, db, `DROP INDEX approvals_action_hash`)
	exec(t, db, `DROP INDEX effects_attention`)
	exec(t, db, `DROP TABLE executing_window`)
	exec(t, db, `DROP TABLE executing_parked`)
	exec(t, db, `DROP TABLE receipt_spans`)
	for _, col := range []string{"effects DROP COLUMN arguments", "effects DROP COLUMN note", "effects DROP COLUMN conflict",
		"approvals DROP COLUMN note", "approvals DROP COLUMN previous_denied", "approvals DROP COLUMN previous_denied_by",
		"approvals DROP COLUMN precondition_hash", "approvals DROP COLUMN precondition_at"} {
		exec(t, db, `ALTER TABLE `+col)
	}
	exec(t, db, `UPDATE latch_schema SET version = 1`)
	exec(t, db, `INSERT INTO approvals (approval_id, status, action_hash) VALUES ('apr_1', 'pending', 'sha256:00')`)

	r, err := Open(t.Context(), url, &Config{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open of schema 1: %v", err)
	}
	if ds, err := r.Delegations(t.Context()); err != nil || len(ds) != 0 {
		t.Errorf("Delegations on schema 1 = %v, %v; want none", ds, err)
	}
	if _, err := r.Effects(t.Context(), store.EffectFilter{}); err != nil {
		t.Errorf("Effects on schema 1: %v", err)
	}
	if ts, err := r.Tokens(t.Context()); err != nil || len(ts) != 0 {
		t.Errorf("Tokens on schema 1 = %v, %v; want none", ts, err)
	}
	if as, err := r.Approvals(t.Context(), store.ApprovalFilter{}); err != nil || len(as) != 1 || as[0].Answers != nil {
		t.Errorf("Approvals on schema 1 = %v, %v; want apr_1 without answers", as, err)
	}
	if _, err := r.TokenByHash(t.Context(), "sha256:00"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TokenByHash on schema 1: %v, want ErrNotFound", err)
	}
	if as, err := r.Accounts(t.Context()); err != nil || len(as) != 0 {
		t.Errorf("Accounts on schema 1 = %v, %v; want none", as, err)
	}
	if _, err := r.Account(t.Context(), "alice"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Account on schema 1: %v, want ErrNotFound", err)
	}
	if _, err := r.Session(t.Context(), store.SessionHash("secret")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Session on schema 1: %v, want ErrNotFound", err)
	}
	if hs, err := r.Holds(t.Context()); err != nil || len(hs) != 0 {
		t.Errorf("Holds on schema 1 = %v, %v; want none", hs, err)
	}
	if cs, err := r.ReconcileClaims(t.Context()); err != nil || len(cs) != 0 {
		t.Errorf("ReconcileClaims on schema 1 = %v, %v; want none", cs, err)
	}
	if cs, err := r.Charges(t.Context(), store.ChargeFilter{}); err != nil || len(cs) != 0 {
		t.Errorf("Charges on schema 1 = %v, %v; want none", cs, err)
	}
	if ss, err := r.Suspensions(t.Context(), "act_1"); err != nil || len(ss) != 0 {
		t.Errorf("Suspensions on schema 1 = %v, %v; want none", ss, err)
	}
	if ss, err := r.Standings(t.Context(), store.StandingFilter{}); err != nil || len(ss) != 0 {
		t.Errorf("Standings on schema 1 = %v, %v; want none", ss, err)
	}
	if _, err := r.Standing(t.Context(), "sta_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Standing on schema 1: %v, want ErrNotFound", err)
	}
	if rep, err := store.VerifyChain(t.Context(), r); err != nil || rep.Start != nil {
		t.Errorf("VerifyChain on schema 1 = %+v, %v; want it read without the retention tables", rep, err)
	}
	if v, _ := schemaVersion(t.Context(), db); v != 1 {
		t.Errorf("a reader migrated the store to %d", v)
	}
	r.Close()

	w := open(t, url, nil)
	if v, _ := schemaVersion(t.Context(), db); v != latestVersion() {
		t.Errorf("after a writer opened it, schema = %d, want %d", v, latestVersion())
	}
	if _, err := w.Delegations(t.Context()); err != nil {
		t.Errorf("Delegations after migration: %v", err)
	}
}
