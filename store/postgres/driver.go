package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkit/latch/internal/storeraw"
	"github.com/latchkit/latch/store"
)

// Importing the package registers the postgres: and postgresql: schemes with package store, so
// that store.Open (and latch.Open) open postgres:// URLs:
//
//	import _ "github.com/latchkit/latch/store/postgres"
func init() {
	store.Register("postgres", driver{})
	store.Register("postgresql", driver{})
}

// driver is the store.Driver of postgres:// and postgresql:// URLs. Besides opening stores it
// makes scratch stores as fresh schemas (store.Scratcher) and reaches below a store for verify,
// tests and bench (package internal/storeraw).
type driver struct{}

var (
	_ store.Scratcher          = driver{}
	_ storeraw.Opener          = driver{}
	_ storeraw.Baseliner       = driver{}
	_ storeraw.DeadlockCounter = driver{}
)

func (driver) Open(ctx context.Context, url string, o *store.OpenOptions) (store.Store, error) {
	st, err := Open(ctx, url, &Config{ReadOnly: o.ReadOnly, Logger: o.Logger})
	if err != nil {
		return nil, err // an untyped nil: a typed nil *Store in an interface is not nil
	}
	return st, nil
}

// randomHex returns 2n lowercase hex characters from the system CSPRNG.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b)
}

// NewScratch makes scratch stores as fresh schemas on the server of place, each named
// <prefix>_<random>[_<name>], and drops them all at Close. Only the server, database and
// connection parameters of place are used: its own schema is never touched.
func (driver) NewScratch(ctx context.Context, place string, cfg *store.ScratchConfig) (store.Scratch, error) {
	if !strings.Contains(place, "://") {
		return nil, fmt.Errorf("scratch store: %w: %s names no server (write postgres://HOST/DB)", store.ErrNoScratch, redact(place))
	}
	server, err := withoutSchema(place) // refuses a malformed parameter rather than drop it (sslmode=require;)
	if err != nil {
		return nil, fmt.Errorf("scratch store: %w", err)
	}
	return &scratch{place: place, server: server, prefix: cfg.Prefix}, nil
}

// scratch keeps one schema per store on one server.
type scratch struct {
	place  string // the URL the scratch stores' URLs are made from
	server string // place without schema=, for pgx
	prefix string
	mu     sync.Mutex
	made   []string
	closed bool
}

func (s *scratch) URL(ctx context.Context, name string) (string, error) {
	schema := s.prefix + "_" + randomHex(6)
	if n := store.ScratchName(name); n != "" {
		schema += "_" + n
	}
	schema = schema[:min(len(schema), maxIdentifier)]
	u, err := schemaURL(s.place, schema)
	if err != nil {
		return "", fmt.Errorf("scratch store: %w", err)
	}
	c, err := pgx.Connect(ctx, s.server)
	if err != nil {
		return "", fmt.Errorf("scratch store: connect to %s: %w", redact(s.server), err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("scratch store: closed")
	}
	// CREATE SCHEMA, not IF NOT EXISTS: a schema that already exists is not ours to use.
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", fmt.Errorf("scratch store: create schema %s: %w", schema, err)
	}
	s.made = append(s.made, schema)
	return u, nil
}

func (s *scratch) Close(ctx context.Context) error {
	s.mu.Lock()
	made := s.made
	s.made, s.closed = nil, true
	s.mu.Unlock()
	if len(made) == 0 {
		return nil
	}
	ctx = context.WithoutCancel(ctx) // what was made is removed even when the caller gave up
	c, err := pgx.Connect(ctx, s.server)
	if err != nil {
		return fmt.Errorf("drop scratch schemas %s: %w", strings.Join(made, ", "), err)
	}
	defer c.Close(ctx)
	var errs []error
	for _, schema := range made {
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			errs = append(errs, fmt.Errorf("drop scratch schema %s: %w", schema, err))
		}
	}
	return errors.Join(errs...)
}

// OpenRaw connects to the server of the store at url with its search_path at the store's
// schema, as someone editing the database would.
func (driver) OpenRaw(ctx context.Context, url string) (storeraw.DB, error) {
	loc, err := parseURL(url)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", redact(url), err)
	}
	c, err := pgx.Connect(ctx, loc.pgURL)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", redact(url), err)
	}
	if _, err := c.Exec(ctx, `SET search_path TO `+pgx.Identifier{loc.schema}.Sanitize()); err != nil {
		c.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("open %s: %w", redact(url), err)
	}
	return &rawDB{c: c, schema: loc.schema}, nil
}

// rawDB is a storeraw.DB on one connection.
type rawDB struct {
	c      *pgx.Conn
	schema string
}

// sql writes q for the server: {name} as the store's table, ? as $1, $2, …
func (r *rawDB) sql(q string) string {
	return storeraw.Numbered(storeraw.Tables(q, func(name string) string { return pgx.Identifier{r.schema, name}.Sanitize() }))
}

func (r *rawDB) Exec(ctx context.Context, stmts ...storeraw.Stmt) ([]int64, error) {
	tx, err := r.c.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	n := make([]int64, 0, len(stmts))
	for _, st := range stmts {
		q := r.sql(st.SQL)
		args := make([]any, len(st.Args))
		for i, a := range st.Args {
			if d, ok := a.(storeraw.Doc); ok {
				a = []byte(d) // receipts.doc is bytea
			}
			args[i] = a
		}
		tag, err := tx.Exec(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
		n = append(n, tag.RowsAffected())
	}
	return n, tx.Commit(ctx)
}

func (r *rawDB) QueryRow(ctx context.Context, q string, args []any, dest ...any) error {
	q = r.sql(q)
	if err := r.c.QueryRow(ctx, q, args...).Scan(dest...); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

func (r *rawDB) Close() error { return r.c.Close(context.Background()) }

// OpenBaseline creates a scratch schema with two tables on the server of the store at url, with
// a pool as a store's: what a protected call writes, without latch. The store's own schema is
// never touched.
func (driver) OpenBaseline(ctx context.Context, url string) (storeraw.Baseline, error) {
	u, err := withoutSchema(url)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return nil, err
	}
	b := &baseline{pool: pool, schema: "latch_bench_" + randomHex(6)}
	s := pgx.Identifier{b.schema}.Sanitize()
	for _, q := range []string{
		`CREATE SCHEMA ` + s,
		`CREATE TABLE ` + s + `.effects (effect_key text PRIMARY KEY, state text NOT NULL, updated_at bigint NOT NULL)`,
		`CREATE TABLE ` + s + `.receipts (seq bigserial PRIMARY KEY, doc text NOT NULL)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// baseline is a storeraw.Baseline in its own schema.
type baseline struct {
	pool   *pgxpool.Pool
	schema string
}

func (b *baseline) Call(ctx context.Context, key, doc string) error {
	s := pgx.Identifier{b.schema}.Sanitize()
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+s+`.effects (effect_key, state, updated_at) VALUES ($1, 'executing', $2)`, key, time.Now().UnixNano())
		return err
	})
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE `+s+`.effects SET state = 'committed', updated_at = $1 WHERE effect_key = $2`, time.Now().UnixNano(), key); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+s+`.receipts (doc) VALUES ($1)`, doc)
		return err
	})
}

func (b *baseline) Close() error {
	_, err := b.pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{b.schema}.Sanitize()+` CASCADE`)
	b.pool.Close()
	return err
}

// Tagged returns url with application_name=tag, which names its sessions in pg_stat_activity.
func (driver) Tagged(url, tag string) (string, error) {
	if _, err := parseURL(url); err != nil {
		return "", fmt.Errorf("store URL %s: %w", redact(url), err)
	}
	return withParam(url, "application_name", tag), nil
}

// Deadlocks reads pg_stat_database.deadlocks of the database of the store at url.
func (driver) Deadlocks(ctx context.Context, url string) (int64, error) {
	c, err := connectServer(ctx, url)
	if err != nil {
		return 0, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var n int64
	if err := c.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		return 0, fmt.Errorf("read pg_stat_database.deadlocks: %w", err)
	}
	return n, nil
}

// WaitUntagged waits until no session with application_name tag is left in the database of
// the store at url, at most for d.
func (driver) WaitUntagged(ctx context.Context, url, tag string, d time.Duration) error {
	c, err := connectServer(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var n int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND application_name = $1`, tag).Scan(&n)
		if err != nil {
			return fmt.Errorf("read pg_stat_activity: %w", err)
		}
		if n == 0 {
			return nil
		}
	}
	return nil
}

// connectServer opens a connection of its own to the database of the store at url.
func connectServer(ctx context.Context, url string) (*pgx.Conn, error) {
	u, err := withoutSchema(url)
	if err != nil {
		return nil, err
	}
	return pgx.Connect(ctx, u)
}
