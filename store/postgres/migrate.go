package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

// migrationFiles holds the schema, one file per version: NNNN_name.sql, {schema} standing for the
// quoted schema name. Migrations are forward only.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// schemaMarker is written in latch_schema so a latch schema is told from any other.
const schemaMarker = "latch"

// minReadVersion is the oldest schema a read-only open of this binary can read. Readers accept
// any version from here to latestVersion, so a new reader works before a writer has migrated
// (docs/postgres.md: upgrade readers first). A migration that readers of the previous binary
// version could not read must raise it.
const minReadVersion = 1

// migrations are the embedded migrations in version order, numbered 1, 2, … without gaps.
var migrations = func() []store.Migration {
	ms, err := store.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		panic("postgres: " + err.Error())
	}
	return ms
}()

// latestVersion is the schema version this binary writes.
func latestVersion() int { return len(migrations) }

// SchemaVersion is the schema version this binary writes. Its first writer migrates an older
// store to it; a store at a newer version is refused with [store.ErrSchemaTooNew].
func SchemaVersion() int { return latestVersion() }

// queryRower is what reading the schema needs: a pool, a connection or a transaction.
type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// schemaState is what a schema holds.
type schemaState struct {
	exists  bool // the schema exists
	tables  int  // relations in it
	version int  // latch schema version; 0 without the marker
	marker  bool // latch_schema exists
}

// inspect reads the state of the store's schema. A schema with tables but no latch marker is
// store.ErrNotLatch; one newer than this binary is store.ErrSchemaTooNew.
func (s *Store) inspect(ctx context.Context, q queryRower) (schemaState, error) {
	var st schemaState
	err := q.QueryRow(ctx, `SELECT n.oid IS NOT NULL,
			(SELECT count(*) FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'p', 'v', 'm', 'f')),
			EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.relnamespace = n.oid AND c.relname = 'latch_schema' AND c.relkind IN ('r', 'p'))
		FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = $1`, s.schema).Scan(&st.exists, &st.tables, &st.marker)
	if err != nil {
		return st, fmt.Errorf("inspect schema %s: %w", s.schema, err)
	}
	switch {
	case st.marker:
		var marker string
		err := q.QueryRow(ctx, `SELECT marker, version FROM `+s.quoted()+`.latch_schema WHERE id = 1`).Scan(&marker, &st.version)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return st, fmt.Errorf("%w: schema %s: latch_schema is empty", store.ErrNotLatch, s.schema)
		case err != nil:
			return st, fmt.Errorf("inspect schema %s: %w", s.schema, err)
		case marker != schemaMarker:
			return st, fmt.Errorf("%w: schema %s: latch_schema marker is %q", store.ErrNotLatch, s.schema, marker)
		case st.version > latestVersion():
			return st, fmt.Errorf("%w: schema %s is at version %d, this binary knows %d: upgrade latch", store.ErrSchemaTooNew, s.schema, st.version, latestVersion())
		}
	case st.tables > 0:
		return st, fmt.Errorf("%w: schema %s has tables but no latch_schema: give latch its own schema with ?schema=NAME", store.ErrNotLatch, s.schema)
	}
	return st, nil
}

// quoted is the schema name quoted as an identifier.
func (s *Store) quoted() string { return pgx.Identifier{s.schema}.Sanitize() }

// lockKey is the advisory lock migrations of this schema take: one key per schema name.
func (s *Store) lockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("latch migrate " + s.schema))
	return int64(h.Sum64())
}

// migrate applies every pending migration, each in its own transaction under a
// transaction-scoped advisory lock that it re-reads the version beneath, so processes opening one
// fresh database at once create the schema and apply each version exactly once.
func (s *Store) migrate(ctx context.Context) error {
	st, err := s.inspect(ctx, s.pool)
	if err != nil {
		return err
	}
	for st.version < latestVersion() {
		done, err := s.migrateOne(ctx)
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	s.version = latestVersion()
	return nil
}

func (s *Store) migrateOne(ctx context.Context) (done bool, err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.lockKey()); err != nil {
		return false, fmt.Errorf("migrate: lock: %w", err)
	}
	st, err := s.inspect(ctx, tx)
	switch {
	case err != nil:
		return false, err
	case st.version == latestVersion():
		return true, nil
	}
	m := migrations[st.version]
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("migrate schema %s to %d (%s): %w", s.schema, m.Version, m.Name, err)
	}
	if !st.exists {
		// Only when missing: CREATE SCHEMA IF NOT EXISTS still needs CREATE on the database.
		if _, err := tx.Exec(ctx, `CREATE SCHEMA `+s.quoted()); err != nil {
			return fail(err)
		}
	}
	if !st.marker {
		_, err := tx.Exec(ctx, `CREATE TABLE `+s.quoted()+`.latch_schema (
	id      integer PRIMARY KEY CHECK (id = 1),
	marker  text    NOT NULL,
	version integer NOT NULL
);
INSERT INTO `+s.quoted()+`.latch_schema (id, marker, version) VALUES (1, '`+schemaMarker+`', 0)`)
		if err != nil {
			return fail(err)
		}
	}
	if _, err := tx.Exec(ctx, strings.ReplaceAll(m.SQL, "{schema}", s.quoted())); err != nil {
		return fail(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s.quoted()+`.latch_schema SET version = $1 WHERE id = 1`, m.Version); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	s.log.Info("store migrated", "store", s.url, "schema", s.schema, "version", m.Version, "migration", m.Name)
	return false, nil
}

// checkReadOnly refuses a read-only open of anything but a latch schema this binary can read,
// without creating or changing anything.
func (s *Store) checkReadOnly(ctx context.Context) error {
	const creator = "it is created by the first writer that opens it (a worker, or a latch command that writes)"
	st, err := s.inspect(ctx, s.pool)
	switch {
	case err != nil:
		return err
	case !st.exists:
		return fmt.Errorf("%w: schema %s does not exist: %s", store.ErrNoStore, s.schema, creator)
	case !st.marker:
		return fmt.Errorf("%w: schema %s has no latch tables: %s", store.ErrNoStore, s.schema, creator)
	case st.version < minReadVersion:
		return fmt.Errorf("schema %s is at version %d, older than this binary can read (%d): open it once with a writer to migrate it", s.schema, st.version, minReadVersion)
	}
	s.version = st.version
	s.q = newQueries(s.quoted(), st.version)
	if st.version < latestVersion() {
		s.log.Info("store schema is older than this binary; reading it without migrating", "store", s.url, "schema", s.schema, "version", st.version, "latest", latestVersion())
	}
	return nil
}
