package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/latchkit/latch/internal/storeraw"
	"github.com/latchkit/latch/store"
)

// Importing the package registers the sqlite: scheme with package store, so that store.Open
// (and latch.Open) open sqlite:PATH URLs.
func init() { store.Register("sqlite", driver{}) }

// driver is the store.Driver of sqlite: URLs. Besides opening stores it makes scratch stores
// (store.Scratcher), shows a URL with its path made absolute (store.Describer), and reaches
// below a store for verify, tests and bench (package internal/storeraw).
type driver struct{}

var (
	_ store.Scratcher    = driver{}
	_ store.Describer    = driver{}
	_ storeraw.Opener    = driver{}
	_ storeraw.Baseliner = driver{}
)

func (driver) Open(ctx context.Context, url string, o *store.OpenOptions) (store.Store, error) {
	st, err := Open(ctx, url, &Config{ReadOnly: o.ReadOnly, Logger: o.Logger})
	if err != nil {
		return nil, err // an untyped nil: a typed nil *Store in an interface is not nil
	}
	return st, nil
}

// Describe shows a store URL with its path made absolute: two processes that log two relative
// paths may be using one file, or two.
func (driver) Describe(u string) string {
	rest, _ := strings.CutPrefix(u, "sqlite:")
	path, _, _ := strings.Cut(rest, "?")
	if abs, err := filepath.Abs(path); err == nil && path != "" {
		return "sqlite:" + abs
	}
	return u
}

// NewScratch makes scratch stores as files in a new directory under cfg.Dir (or the system's
// temporary directory), removed by Close. Only the parameters of place are kept (sqlite:?synchronous=normal
// gives scratch files that trade durability for speed, as cfg.Volatile does); its path is
// ignored, so a scratch store is never beside the operator's.
func (driver) NewScratch(ctx context.Context, place string, cfg *store.ScratchConfig) (store.Scratch, error) {
	rest, ok := strings.CutPrefix(place, "sqlite:")
	if !ok {
		return nil, fmt.Errorf("scratch store: %q is not a sqlite: URL", place)
	}
	_, query, _ := strings.Cut(rest, "?")
	if cfg.Volatile && !strings.Contains(query, "synchronous") {
		query = strings.TrimPrefix(query+"&synchronous=normal", "&")
	}
	if query != "" {
		if _, err := parseURL("sqlite:scratch.db?" + query); err != nil {
			return nil, fmt.Errorf("scratch store: %s: %w", place, err)
		}
		query = "?" + query
	}
	dir, err := os.MkdirTemp(cfg.Dir, cfg.Prefix+"_")
	if err != nil {
		return nil, fmt.Errorf("scratch store: %w", err)
	}
	return &scratch{dir: dir, query: query, names: map[string]bool{}}, nil
}

// scratch keeps one SQLite file per store in its directory.
type scratch struct {
	dir   string
	query string
	mu    sync.Mutex
	names map[string]bool
}

func (s *scratch) URL(ctx context.Context, name string) (string, error) {
	base := store.ScratchName(name)
	if base == "" {
		base = "store"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil {
		return "", errors.New("scratch store: closed")
	}
	n := base
	for i := 2; s.names[n]; i++ {
		n = base + "_" + strconv.Itoa(i)
	}
	s.names[n] = true
	return "sqlite:" + filepath.Join(s.dir, n+".db") + s.query, nil
}

func (s *scratch) Close(ctx context.Context) error {
	s.mu.Lock()
	s.names = nil
	s.mu.Unlock()
	return os.RemoveAll(s.dir)
}

// OpenRaw opens the file of the store at url with the database/sql driver the store uses, as
// someone editing the database would. The file must exist.
func (driver) OpenRaw(ctx context.Context, url string) (storeraw.DB, error) {
	loc, err := parseURL(url)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", url, err)
	}
	if _, err := os.Stat(loc.path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open %s: %w", url, store.ErrNoStore)
	}
	db, err := sql.Open("sqlite", dsn(loc.path, fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMillis)))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", url, err)
	}
	return rawConn{db}, nil
}

// rawConn is a storeraw.DB on a store's file.
type rawConn struct{ db *sql.DB }

// plain is a table as a statement on the store's own file names it.
func plain(name string) string { return name }

func (r rawConn) Exec(ctx context.Context, stmts ...storeraw.Stmt) ([]int64, error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	n := make([]int64, 0, len(stmts))
	for _, st := range stmts {
		q := storeraw.Tables(st.SQL, plain)
		args := make([]any, len(st.Args))
		for i, a := range st.Args {
			if d, ok := a.(storeraw.Doc); ok {
				a = string(d) // receipts.doc is TEXT
			}
			args[i] = a
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
		c, err := res.RowsAffected()
		if err != nil {
			return nil, err
		}
		n = append(n, c)
	}
	return n, tx.Commit()
}

func (r rawConn) QueryRow(ctx context.Context, q string, args []any, dest ...any) error {
	q = storeraw.Tables(q, plain)
	if err := r.db.QueryRowContext(ctx, q, args...).Scan(dest...); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

func (r rawConn) Close() error { return r.db.Close() }

// OpenBaseline creates a bare database in a new directory beside the store file url names (on
// the same disk), opened exactly as a store opens its writer, with two tables: what a protected
// call writes, without latch.
func (driver) OpenBaseline(ctx context.Context, url string) (storeraw.Baseline, error) {
	loc, err := parseURL(url)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", url, err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(loc.path), ".latch-bench-baseline-")
	if err != nil {
		return nil, err
	}
	u := "sqlite:" + filepath.Join(dir, "baseline.db") + "?synchronous=" + strings.ToLower(loc.synchronous)
	b := &baseline{dir: dir}
	if b.db, err = openDB(u); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for _, q := range []string{
		`CREATE TABLE effects (effect_key TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at INTEGER NOT NULL) STRICT`,
		`CREATE TABLE receipts (seq INTEGER PRIMARY KEY, doc TEXT NOT NULL) STRICT`,
	} {
		if _, err := b.db.ExecContext(ctx, q); err != nil {
			b.Close()
			return nil, err
		}
	}
	for q, st := range map[string]**sql.Stmt{
		`INSERT INTO effects (effect_key, state, updated_at) VALUES (?, 'executing', ?)`: &b.ins,
		`UPDATE effects SET state = 'committed', updated_at = ? WHERE effect_key = ?`:    &b.upd,
		`INSERT INTO receipts (doc) VALUES (?)`:                                          &b.rec,
	} {
		if *st, err = b.db.PrepareContext(ctx, q); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// baseline is a storeraw.Baseline in its own SQLite file.
type baseline struct {
	db       *sql.DB
	dir      string
	ins, upd *sql.Stmt
	rec      *sql.Stmt
}

func (b *baseline) Call(ctx context.Context, key, doc string) error {
	// Statements run without the caller's cancellation, as the store's writes do: the driver
	// watches a cancellable context with a goroutine per statement.
	ctx = context.WithoutCancel(ctx)
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, b.ins).ExecContext(ctx, key, time.Now().UnixNano()); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if tx, err = b.db.BeginTx(ctx, nil); err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, b.upd).ExecContext(ctx, time.Now().UnixNano(), key); err != nil {
		tx.Rollback()
		return err
	}
	if _, err := tx.StmtContext(ctx, b.rec).ExecContext(ctx, doc); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (b *baseline) Close() error {
	var err error
	if b.db != nil {
		err = b.db.Close()
	}
	return errors.Join(err, os.RemoveAll(b.dir))
}
