// Package postgres is latch's store for many hosts: one PostgreSQL schema, shared by every worker
// that can reach the database (docs/postgres.md).
//
// A store is named by a URL:
//
//	postgres://user:pass@host:5432/db?sslmode=verify-full&schema=latch
//	postgresql://…                      the same
//
// Every pgx connection parameter is accepted. schema= names the schema latch keeps its tables in
// (default public; a dedicated schema is recommended) and is removed before the URL reaches pgx.
// Every statement names its tables schema-qualified, so search_path plays no part.
//
// Statements are prepared on first use and cached per connection (pgx's cache_statement mode):
// a parse and a plan each time cost the server more than most of latch's statements do. Behind a
// transaction-mode pooler that cannot carry prepared statements from one transaction to the
// next (PgBouncer before 1.21, or without max_prepared_statements), add
// default_query_exec_mode=exec to the URL: unnamed statements, which live only as long as the
// transaction that sent them. Any other default_query_exec_mode in the URL is used as given.
//
// # Concurrency
//
// Atomicity comes only from unique indexes and compare-and-set with checked row counts (docs/guarantees.md#atomicity),
// at READ COMMITTED: a write method is one short transaction that reads the rows the pure
// decider in package store needs, asks it what to write, and writes with INSERT … ON CONFLICT DO
// NOTHING or UPDATE … WHERE <the row is still what was read>. A write that matches no row means
// another transaction got there first: the transaction is rolled back, the rows are read again and
// the decider asked again. No session advisory lock, no row lock held across an execution, no
// reliance on SERIALIZABLE: nothing here depends on the session, so transaction-mode poolers work.
//
// # Lock order
//
// Every transaction takes its row locks in one order, so that no two can wait on each other in
// a cycle (PostgreSQL would end one of them after deadlock_timeout, a stall of a second by
// default):
//
//  1. the chain head (chain_head, one row), locked with SELECT … FOR UPDATE before anything else
//     by every transaction that may append a receipt: Reserve (a refused reservation appends
//     its blocked receipt), CreateApproval (a refused probe does too) and Record, alone or in a
//     group-commit batch, whether or not it turns out to append;
//  2. the budgets a reservation (or a probe) charges: a transaction-scoped advisory lock per
//     (budget, metric), in ascending order of its key, taken before the held amounts are read, so
//     that reservations charging one budget on different effect keys decide one after the other
//     (released at commit: nothing is left on the session);
//  3. effect rows, in effect-key order (an INSERT … ON CONFLICT DO NOTHING of a key that another
//     transaction has inserted but not committed waits for it as an UPDATE waits for a row lock),
//     each followed by the ledger rows of the attempt it writes, when the write makes that
//     attempt failed (released) or committed again (held again);
//  4. approval rows, in approval-id order;
//  5. rows inserted under fresh ids (events, receipts, approval requests, delegations, budget
//     charges), which nobody else writes.
//
// Transactions that take no head lock hold one row at most and wait for nothing else while they
// hold it: ExtendLease and Resolve an effect row, AnswerApproval an approval row, Revoke the
// delegation it names (its foreign key), RevokeToken a token row; Delegate and CreateToken insert
// under fresh ids. So
// among the transactions
// that lock several rows, the head orders everything: one of them holds it, the others wait for
// it before they hold anything. A new write method must keep to this order; the head-first rule
// costs a batch that appends nothing one row lock, and makes every writer of one schema take its
// turn on the head (within a process one batch runs at a time anyway). TestContentionNoDeadlock
// races processes over the same keys and reads pg_stat_database.deadlocks.
//
// # Lost commits
//
// An error during or after COMMIT, other than the server's own error reply, leaves the outcome
// unknown: the commit may have landed and only its reply been lost. The store never guesses. It
// reads back, on a fresh connection, what the transaction wrote: first what no other transaction
// can have written or can change (its receipt by seq and hash, its events by id, rows inserted
// under a fresh id), else the rows it updated, compared whole. There as written: the write
// landed, and its result is returned. Not there: the transaction is read, decided and issued
// once more, and if the first attempt was still committing and lands after all, the re-issue
// waits on its locks, finds it, and returns its result instead of writing twice. A second lost
// commit, or a re-read that fails, is an error, never a reservation the store does not hold.
//
// # Schema
//
// Migrations are embedded, numbered and forward-only. A writer applies pending ones at open, each
// in its own transaction under a transaction-scoped advisory lock, so any number of processes may
// open a fresh database at once. A database newer than the binary is refused (store.ErrSchemaTooNew),
// as is a schema holding tables but no latch marker (store.ErrNotLatch). A read-only open creates
// and migrates nothing, and accepts a schema older than the binary so readers can be upgraded
// before writers.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkit/latch/store"
)

// Config configures Open. The zero value (and nil) opens a writer with pgx's default pool size.
type Config struct {
	// ReadOnly never creates or migrates anything: a missing schema or missing tables is an error
	// wrapping store.ErrNoStore, and every write method returns store.ErrReadOnly.
	ReadOnly bool
	// Logger receives migrations and lost commits. Nil discards.
	Logger *slog.Logger
	// MaxConns caps the connection pool; 0 keeps pgx's default (or the URL's pool_max_conns).
	MaxConns int32
	// ClockSkewThreshold is how far the host's clock may be from the database's before the
	// store reports it (a clock_skew_detected event and a warning): above 0, at most
	// MaxClockSkewThreshold; 0 means DefaultClockSkewThreshold. A clock_skew_threshold= URL
	// parameter takes precedence.
	ClockSkewThreshold time.Duration
	// Now is the host's clock the skew check reads; nil is time.Now.
	Now func() time.Time
}

// Store is a latch store in one PostgreSQL schema. It implements store.Store,
// store.DelegationStore and store.WriteCounter.
type Store struct {
	url      string // as given, for messages (the password is redacted)
	schema   string
	readOnly bool
	log      *slog.Logger
	pool     *pgxpool.Pool
	conn     *pgx.ConnConfig // for the fresh connection that settles a lost commit
	q        queries
	version  int // the schema version at open: latestVersion for a writer, maybe older for a reader
	writes   atomic.Int64
	skew     *skewWatch // clock skew detection (skew.go)
	batch    *batcher   // Reserve and Record in flight together share a transaction (batch.go)

	// filling counts the fills running (fill.go): only then may a write's context carry a
	// transaction.
	filling atomic.Int32
}

var (
	_ store.Store           = (*Store)(nil)
	_ store.WriteCounter    = (*Store)(nil)
	_ store.DelegationStore = (*Store)(nil)
	_ store.EventHead       = (*Store)(nil) // so that the conformance suite's LastEventID checks run on it
)

// location is a parsed store URL.
type location struct {
	pgURL  string // the URL pgx sees: schema= and clock_skew_threshold= removed
	schema string
	skew   time.Duration // clock_skew_threshold=, 0 when not given
}

// maxIdentifier is PostgreSQL's identifier length (NAMEDATALEN-1). A longer schema name would be
// truncated silently and name a different schema from the one configured.
const maxIdentifier = 63

// parseURL splits "postgres://…[?schema=NAME]" into what pgx reads and the schema. Its errors
// quote what the URL said only through shown, so that no part of the password is repeated.
func parseURL(raw string) (location, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return location{}, errors.New("unparsable URL") // url's own error repeats the password
	}
	pw, _ := u.User.Password()
	show := func(s string) string { return shown(s, pw) }
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return location{}, fmt.Errorf("scheme %s: want postgres:// or postgresql://", show(u.Scheme))
	}
	q, err := parseQuery(u.RawQuery, show)
	if err != nil {
		return location{}, err
	}
	loc := location{schema: "public"}
	if vs, ok := q["schema"]; ok {
		switch {
		case len(vs) != 1:
			return location{}, errors.New("schema given more than once")
		case vs[0] == "":
			return location{}, errors.New("schema= is empty")
		case len(vs[0]) > maxIdentifier:
			return location{}, fmt.Errorf("schema %s is longer than %d bytes", show(vs[0]), maxIdentifier)
		case strings.ContainsRune(vs[0], 0):
			return location{}, errors.New("schema contains a NUL byte")
		}
		loc.schema = vs[0]
		q.Del("schema")
	}
	if vs, ok := q[skewParam]; ok {
		d, err := time.ParseDuration(vs[0])
		if err != nil {
			return location{}, fmt.Errorf("%s %s: want a duration such as 2s or 500ms", skewParam, show(vs[0]))
		}
		if err := checkSkewThreshold(d); err != nil {
			return location{}, err
		}
		loc.skew = d
		q.Del(skewParam)
	}
	u.RawQuery = q.Encode()
	loc.pgURL = u.String()
	return loc, nil
}

// shown quotes s, a part of a store URL, for an error message — unless it contains the URL's
// password, which an error must never repeat (a parameter named like the password, a scheme
// spelled like it): then it says so instead of quoting.
func shown(s, password string) string {
	if password != "" && strings.Contains(s, password) {
		return "(not shown: it contains the password)"
	}
	return strconv.Quote(s)
}

// parseQuery parses a URL's parameters strictly. url.URL.Query drops a malformed parameter
// without a word — "sslmode=require;" (a ';' is not a separator) or a bad %-escape — and a
// dropped sslmode connects with the default, which may not use TLS: every malformed parameter is
// refused instead, and so is a parameter given twice, since pgx would take the first and a reader
// of the URL may take the last. A refusal names the parameter (through show), never its value.
func parseQuery(raw string, show func(string) string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err == nil {
		for k, vs := range q {
			if len(vs) > 1 {
				return nil, fmt.Errorf("parameter %s given more than once", show(k))
			}
		}
		return q, nil
	}
	for _, part := range strings.Split(raw, "&") {
		key, value, _ := strings.Cut(part, "=")
		name, kerr := url.QueryUnescape(key)
		if kerr != nil {
			name = key
		}
		switch {
		case strings.Contains(part, ";"):
			return nil, fmt.Errorf("malformed parameter %s: ';' does not separate parameters, '&' does", show(strings.TrimRight(strings.SplitN(name, ";", 2)[0], " ")))
		case kerr != nil:
			return nil, fmt.Errorf("malformed parameter name %s: bad %%-escape", show(name))
		}
		if _, verr := url.QueryUnescape(value); verr != nil {
			return nil, fmt.Errorf("malformed value of parameter %s: bad %%-escape", show(name))
		}
	}
	return nil, errors.New("malformed parameters")
}

// withoutSchema returns raw, a store URL, without its schema= parameter: the server, database and
// connection parameters as pgx reads them, for the connections of the driver's scratch stores
// and raw access (driver.go). It refuses what Open refuses.
func withoutSchema(raw string) (string, error) {
	loc, err := parseURL(raw)
	if err != nil {
		return "", fmt.Errorf("store URL %s: %w", redact(raw), err)
	}
	return loc.pgURL, nil
}

// schemaURL returns raw, a store URL, naming schema instead of its own schema (or public).
func schemaURL(raw, schema string) (string, error) {
	if _, err := parseURL(raw); err != nil {
		return "", fmt.Errorf("store URL %s: %w", redact(raw), err)
	}
	return withParam(raw, "schema", schema), nil
}

// withParam returns raw, a store URL parseURL accepts, with parameter key set to value.
func withParam(raw, key, value string) string {
	u, _ := url.Parse(raw)
	q, _ := parseQuery(u.RawQuery, strconv.Quote)
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// redact returns raw with any password replaced, for error messages and logs.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres URL"
	}
	return u.Redacted()
}

// Open opens the store at url (postgres://… or postgresql://…, optional schema=NAME). A writer
// creates the schema if needed and applies any pending migration; cfg may be nil.
func Open(ctx context.Context, url string, cfg *Config) (*Store, error) {
	s, err := newStore(ctx, url, cfg)
	if err != nil {
		return nil, err
	}
	if s.readOnly {
		err = s.checkReadOnly(ctx)
	} else {
		err = s.migrate(ctx)
	}
	if err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("open %s: %w", s.url, err)
	}
	s.checkSkew(ctx, skewAtOpen)
	return s, nil
}

// newStore parses url and cfg and sets up the pool, without touching the database.
func newStore(ctx context.Context, url string, cfg *Config) (*Store, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	op := "open " + redact(url)
	if c.MaxConns < 0 {
		return nil, fmt.Errorf("%s: MaxConns %d is negative", op, c.MaxConns)
	}
	loc, err := parseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	threshold := loc.skew
	if threshold == 0 {
		threshold = c.ClockSkewThreshold
	}
	if threshold == 0 {
		threshold = DefaultClockSkewThreshold
	} else if err := checkSkewThreshold(threshold); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	pc, err := pgxpool.ParseConfig(loc.pgURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if c.MaxConns > 0 {
		pc.MaxConns = c.MaxConns
		if pc.MinConns > pc.MaxConns {
			pc.MinConns = pc.MaxConns
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return &Store{
		url: redact(url), schema: loc.schema, readOnly: c.ReadOnly, log: c.Logger,
		pool: pool, conn: pc.ConnConfig, q: newQueries(pgx.Identifier{loc.schema}.Sanitize(), latestVersion()),
		batch: newBatcher(), skew: &skewWatch{threshold: threshold, now: c.Now, log: c.Logger},
	}, nil
}

// Close closes the store's connection pool. It waits for connections in use to be released.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// WriteTransactions returns how many write transactions this Store has committed since it was
// opened, migrations excluded. A lost commit that a re-read shows landed counts once.
func (s *Store) WriteTransactions() int64 { return s.writes.Load() }
