// Package sqlite is latch's embedded store: one SQLite file, shared safely by every goroutine and
// every process on one host (docs/guarantees.md#stores).
//
// A store is named by a URL:
//
//	sqlite:PATH                      synchronous=FULL (the default)
//	sqlite:PATH?synchronous=normal   synchronous=NORMAL
//
// PATH is a file path, absolute or relative to the working directory; a '?' in it starts the
// parameters, so a path cannot contain one. Any other parameter is an error. In-memory databases
// (":memory:", "file::memory:", "mode=memory") are refused: they cannot exclude a second process,
// and excluding it is the point.
//
// A writer creates the file (mode 0600, and so its -wal and -shm files) and its missing parent
// directories (mode 0700: approval ids in the store are bearer capabilities; create the
// directory and the file yourself to share them with a group) and
// applies the embedded, forward-only schema migrations, each in its own transaction. A
// read-only open (Config.ReadOnly) does neither: a missing file is store.ErrNoStore, an older
// schema asks for a writer to upgrade it. Either way a file that is not a latch database is
// store.ErrNotLatch and a schema newer than this binary is store.ErrSchemaTooNew.
//
// # Durability
//
// The database runs in WAL mode with synchronous=FULL, so a reservation that returned has reached
// the disk and survives a power loss. synchronous=normal is an explicit opt-in that trades that
// away: a committed transaction survives a crash of the process but can be lost with the last
// moments before a power failure or an operating-system crash, and a lost reservation is an
// effect that can run twice. Use it only where the host's storage makes that impossible or the
// effects are harmless.
//
// # Concurrency
//
// Every read-then-write runs under BEGIN IMMEDIATE: the write lock is taken before the rows are
// read, so two processes never decide from the same state, and the primary key on effect_key
// backs that up. Within one process all writes go through a single connection, so goroutines
// queue in Go rather than spinning in SQLite's busy handler, and the write requests that queue
// while one transaction runs are committed together in the next (group commit, see writer.go):
// each still reads, decides and writes in order, inside its own savepoint, and none is answered
// before the commit. Other processes wait for the lock in line, on a flock(2) of PATH-lock (a
// file the writer creates beside the database, Linux only), and under busy_timeout. Reads use a
// separate pool and never block on writers (WAL). A background connection copies the
// write-ahead log into the database (checkpoints), so that commits do not.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"

	"github.com/latchkit/latch/internal/sqlitebare"
	"github.com/latchkit/latch/store"
)

// busyTimeoutMillis is how long a transaction waits for another process's write lock. A write
// transaction here lasts milliseconds; ten seconds covers a very busy host and a slow disk.
const busyTimeoutMillis = 10000

// walCheckpointPages is how many pages the write-ahead log holds before a commit copies them
// into the database (SQLite's default is 1000). A protected call writes some twenty pages, most
// of them the same few (the tails of the tables and indexes, the chain head), and every
// checkpoint also flushes the database file: checkpointing a tenth as often copies each hot page
// once instead of ten times and takes one flush instead of ten, and its pause hits one call in
// some four hundred instead of one in forty. The log grows to about 40 MiB and is reused.
const walCheckpointPages = 10000

// Config configures Open. The zero value (and nil) opens a writer.
type Config struct {
	// ReadOnly never creates or migrates anything: a missing file is an error wrapping
	// store.ErrNoStore, and every write method returns store.ErrReadOnly.
	ReadOnly bool
	// Logger receives schema migrations. Nil discards.
	Logger *slog.Logger
}

// Store is a latch store in one SQLite file. It implements store.Store and store.WriteCounter.
type Store struct {
	url      string
	path     string
	readOnly bool
	log      *slog.Logger
	w        *sql.DB // the connection the migrations run on while Open runs; nil after it

	wr      *writer      // runs the write requests on w, in batches
	r       *sql.DB      // the reader pool
	writes  atomic.Int64 // committed write transactions (batches)
	version int          // the schema version read at a read-only open (a writer migrates to the latest)

	lookups lookupPool // direct read connections: TokenByHash, Receipts (direct.go)

	// filling counts the fills running (fill.go): only then may a write's context carry a
	// transaction.
	filling atomic.Int32

	// The move of the executing mark running in the background, if any (executing.go).
	markMu           sync.Mutex
	marking, closing bool
	markWG           sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.WriteCounter = (*Store)(nil)
	_ store.EventHead    = (*Store)(nil) // so that the conformance suite's LastEventID checks run on it
)

// synchronous modes a URL may ask for, by their URL spelling.
var synchronousModes = map[string]string{"full": "FULL", "normal": "NORMAL"}

// location is a parsed store URL.
type location struct {
	path        string // absolute
	synchronous string // FULL or NORMAL
}

// parseURL parses "sqlite:PATH[?synchronous=full|normal]".
func parseURL(raw string) (location, error) {
	rest, ok := strings.CutPrefix(raw, "sqlite:")
	if !ok {
		return location{}, errors.New("not a sqlite: URL")
	}
	path, query, _ := strings.Cut(rest, "?")
	loc := location{synchronous: "FULL"}
	memory := errors.New("in-memory databases are refused: they cannot exclude other processes; give a file path")
	switch {
	case strings.TrimSpace(path) == "":
		return location{}, errors.New("empty path: write sqlite:PATH")
	case path == ":memory:" || strings.HasPrefix(path, "file::memory:") || strings.Contains(raw, "mode=memory"):
		return location{}, memory
	case strings.HasPrefix(path, "file:"):
		return location{}, errors.New("a file: URI is not a path: write sqlite:PATH")
	case strings.HasPrefix(path, "//"):
		return location{}, errors.New("write sqlite:PATH, not sqlite://PATH")
	case strings.ContainsRune(path, 0):
		return location{}, errors.New("path contains a NUL byte")
	}
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return location{}, fmt.Errorf("parameters: %w", err)
		}
		for k, vs := range q {
			if k != "synchronous" {
				return location{}, fmt.Errorf("unknown parameter %q (the only one is synchronous=normal)", k)
			}
			if len(vs) != 1 {
				return location{}, errors.New("synchronous given more than once")
			}
			mode, ok := synchronousModes[strings.ToLower(vs[0])]
			if !ok {
				return location{}, fmt.Errorf("synchronous=%s: want full or normal", vs[0])
			}
			loc.synchronous = mode
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return location{}, err
	}
	loc.path = abs
	return loc, nil
}

// uri is path as a SQLite file: URI (the writer connection opens it with SQLITE_OPEN_URI).
func uri(path string) string { return strings.TrimSuffix(dsn(path), "?") }

// dsn builds the driver's data source name: a SQLite file: URI (so that the path is escaped and
// mode=ro reaches SQLite) followed by the driver's own parameters.
func dsn(path string, params ...string) string {
	p := filepath.ToSlash(path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows volume: file:/C:/x
	}
	p = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(p)
	return "file:" + p + "?" + strings.Join(params, "&")
}

// Open opens the store at url ("sqlite:PATH" or "sqlite:PATH?synchronous=normal"). A writer
// creates the file and its directory if needed and applies any pending migration; cfg may be nil.
// The errors to branch on are store.ErrNoStore (read-only, no file), store.ErrNotLatch and
// store.ErrSchemaTooNew.
func Open(ctx context.Context, url string, cfg *Config) (*Store, error) {
	return openAt(ctx, url, cfg, latestVersion())
}

// openAt is Open with the schema version a writer migrates to: tests give an older one to build
// the stores that older binaries left behind.
func openAt(ctx context.Context, url string, cfg *Config, version int) (*Store, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	op := "open " + url
	loc, err := parseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	s := &Store{url: url, path: loc.path, readOnly: c.ReadOnly, log: c.Logger}
	busy := fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMillis)

	if c.ReadOnly {
		fi, err := os.Stat(loc.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%s: %w: it is created by the first worker that opens it, or by a latch command that writes", op, store.ErrNoStore)
		case err != nil:
			return nil, fmt.Errorf("%s: %w", op, err)
		case !fi.Mode().IsRegular():
			return nil, fmt.Errorf("%s: %s is not a regular file", op, loc.path)
		}
		s.r, err = sql.Open("sqlite", dsn(loc.path, "mode=ro", busy, "_pragma=query_only(1)"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		if err := s.checkReadOnly(ctx); err != nil {
			s.r.Close()
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		return s, nil
	}

	if s.w, err = openWriter(loc); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	s.r, err = sql.Open("sqlite", dsn(loc.path, busy, "_pragma=query_only(1)"))
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	s.r.SetMaxIdleConns(4)
	plock, err := openProcLock(loc.path)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	ckpt, err := startCheckpointer(loc)
	if err != nil {
		plock.close()
		s.Close()
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	// The migrations, and the first connection's switch to WAL before them, under the lock the
	// writers of every process take: two processes opening a new file at once would otherwise
	// both hold a shared lock and both want an exclusive one, and SQLite refuses one of them
	// at once (SQLITE_BUSY, without waiting in the busy handler).
	held := plock.lock(busyTimeoutMillis * time.Millisecond)
	err = s.migrate(ctx, version)
	if held {
		plock.unlock()
	}
	if err != nil {
		plock.close()
		ckpt.close()
		s.Close()
		return nil, fmt.Errorf("%s: %w", op, s.readOnlyError(err))
	}
	// The migrations ran on a database/sql connection; every write from here on runs on the
	// writer connection (writer.go), and this one is closed so that one connection writes.
	err = s.w.Close()
	s.w = nil
	var wc *wconn
	if err == nil {
		wc, err = openWConn(loc)
	}
	if err != nil {
		plock.close()
		ckpt.close()
		s.Close()
		return nil, fmt.Errorf("%s: writer connection: %w", op, s.readOnlyError(err))
	}
	s.wr = newWriter(wc, plock, ckpt, &s.writes)
	s.wr.markDue = s.markDue
	s.version = min(version, latestVersion())
	s.wr.legacy, s.wr.version = s.version < notesVersion, s.version
	s.wr.noAnswers = s.version < answersVersion
	return s, nil
}

// openWriter opens the connection the migrations run on, creating the file and its directory if
// needed.
func openWriter(loc location) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(loc.path), 0o700); err != nil {
		return nil, err
	}
	if err := createPrivate(loc.path); err != nil {
		return nil, err
	}
	if err := checkWritable(loc.path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn(loc.path, fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMillis), "_pragma=foreign_keys(1)",
		"_pragma=journal_mode(WAL)", "_pragma=synchronous("+loc.synchronous+")",
		fmt.Sprintf("_pragma=wal_autocheckpoint(%d)", walCheckpointPages), "_txlock=immediate"))
	if err != nil {
		return nil, err
	}
	// One connection, kept while the migrations run on it (openAt then closes it and opens the
	// writer connection, writer.go): its per-connection settings hold for all of them.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

func init() { sqlitebare.Install(openDB) }

// openDB opens the SQLite file a store URL names exactly as a Store opens its writer (the same
// driver, WAL, busy_timeout, synchronous, BEGIN IMMEDIATE for every transaction, one connection)
// but creates none of latch's tables: the bare database `latch bench` measures latch against
// (internal/sqlitebare).
func openDB(url string) (*sql.DB, error) {
	loc, err := parseURL(url)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", url, err)
	}
	db, err := openWriter(loc)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", url, err)
	}
	return db, nil
}

// Close closes the store's connections.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.markMu.Lock()
		s.closing = true
		s.markMu.Unlock()
		s.markWG.Wait()
		var errs []error
		if s.wr != nil {
			errs = append(errs, s.wr.close())
		}
		if s.w != nil {
			errs = append(errs, s.w.Close())
		}
		errs = append(errs, s.lookups.close())
		errs = append(errs, s.r.Close())
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("close %s: %w", s.url, err)
		}
	})
	return s.closeErr
}

// WriteTransactions returns how many write transactions this Store has committed since it was
// opened, migrations excluded.
func (s *Store) WriteTransactions() int64 { return s.writes.Load() }

// notLatch turns SQLite's "file is not a database" into store.ErrNotLatch.
func notLatch(err error) error {
	var se *sqlitedriver.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlitelib.SQLITE_NOTADB {
		return fmt.Errorf("%w: %v", store.ErrNotLatch, err)
	}
	return err
}

// write runs fn as one request of a batch (see writer.go): in a BEGIN IMMEDIATE transaction on
// the writer connection, committed when fn returns nil and, in a batch, with the requests that
// queued with it. An error from fn rolls back what fn wrote, and only that.
func (s *Store) write(ctx context.Context, fn func(t *txn) error) error {
	if s.readOnly {
		return store.ErrReadOnly
	}
	if tc := store.TokenCheckOf(ctx); tc != nil {
		// The caller's API token is read in the write's own transaction, before the write:
		// a revoked one refuses it with nothing written (store.TokenCheck).
		write := fn
		fn = func(t *txn) error {
			if err := t.checkToken(tc); err != nil {
				return err
			}
			return write(t)
		}
	}
	if s.filling.Load() > 0 {
		if t, ok := ctx.Value(fillTxn{}).(*txn); ok {
			return fn(t) // a write method called by Fill: in Fill's transaction (fill.go)
		}
	}
	return s.readOnlyError(s.wr.do(ctx, fn))
}
