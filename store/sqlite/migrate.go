package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	"github.com/latchkit/latch/store"
)

// migrationFiles holds the schema, one file per version: NNNN_name.sql. Migrations are forward
// only: a new version is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// schemaMarker is written in latch_schema so a latch database is told from any other.
const schemaMarker = "latch"

// migrations are the embedded migrations in version order, numbered 1, 2, … without gaps.
var migrations = func() []store.Migration {
	ms, err := store.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		panic("sqlite: " + err.Error())
	}
	return ms
}()

// latestVersion is the schema version this binary writes.
func latestVersion() int { return len(migrations) }

// SchemaVersion is the schema version this binary writes. Its first writer migrates an older
// store to it; a store at a newer version is refused with [store.ErrSchemaTooNew].
func SchemaVersion() int { return latestVersion() }

// querier is what reading the schema version needs: a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion reads the schema version: 0 for an empty database, store.ErrNotLatch for a
// database that has tables but no latch marker.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'latch_schema'`).Scan(&n)
	if err != nil {
		return 0, notLatch(err)
	}
	if n == 0 {
		var others int
		err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite\_%' ESCAPE '\'`).Scan(&others)
		if err != nil {
			return 0, notLatch(err)
		}
		if others > 0 {
			return 0, fmt.Errorf("%w: it has tables but no latch_schema", store.ErrNotLatch)
		}
		return 0, nil
	}
	var marker string
	var v int
	err = q.QueryRowContext(ctx, `SELECT marker, version FROM latch_schema WHERE id = 1`).Scan(&marker, &v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, fmt.Errorf("%w: latch_schema is empty", store.ErrNotLatch)
	case err != nil:
		return 0, err
	case marker != schemaMarker:
		return 0, fmt.Errorf("%w: latch_schema marker is %q", store.ErrNotLatch, marker)
	}
	return v, nil
}

// migrate applies every pending migration up to version target (latestVersion for a Store that
// Open returns; tests stop earlier to build the stores older binaries left), each in its own
// BEGIN IMMEDIATE transaction that re-reads the version first, so processes opening one file at
// once apply each version once.
func (s *Store) migrate(ctx context.Context, target int) error {
	for {
		done, err := s.migrateOne(ctx, target)
		if err != nil || done {
			return err
		}
	}
}

func (s *Store) migrateOne(ctx context.Context, target int) (done bool, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate: %w", notLatch(err))
	}
	defer tx.Rollback()
	v, err := schemaVersion(ctx, tx)
	switch {
	case err != nil:
		return false, err
	case v > latestVersion():
		return false, fmt.Errorf("%w: schema version %d, this binary knows %d: upgrade latch", store.ErrSchemaTooNew, v, latestVersion())
	case v >= target:
		return true, nil
	}
	m := migrations[v]
	if v == 0 {
		_, err := tx.ExecContext(ctx, `CREATE TABLE latch_schema (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	marker  TEXT    NOT NULL,
	version INTEGER NOT NULL
) STRICT;
INSERT INTO latch_schema (id, marker, version) VALUES (1, '`+schemaMarker+`', 0)`)
		if err != nil {
			return false, fmt.Errorf("migrate to %d: %w", m.Version, err)
		}
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migrate to %d (%s): %w", m.Version, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE latch_schema SET version = ? WHERE id = 1`, m.Version); err != nil {
		return false, fmt.Errorf("migrate to %d: %w", m.Version, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate to %d: %w", m.Version, err)
	}
	s.log.Info("store migrated", "store", s.url, "version", m.Version, "migration", m.Name)
	return false, nil
}

// checkReadOnly refuses a read-only open of anything but a latch database at this binary's
// schema version: a read-only open cannot migrate.
func (s *Store) checkReadOnly(ctx context.Context) error {
	v, err := schemaVersion(ctx, s.r)
	if err != nil {
		return err
	}
	s.version = v
	return checkReadOnlyVersion(v, latestVersion())
}

// checkReadOnlyVersion decides whether a read-only open may use a store at version v when this
// binary's schema is latest. An older schema is read as it is (readers can be upgraded before
// the writers that migrate, as on Postgres): every migration so far adds tables and indexes or
// rebuilds a table under the same name with the same columns (4, 20), so the queries here run on
// every version, and a reader of a schema without delegations sees none.
func checkReadOnlyVersion(v, latest int) error {
	switch {
	case v == 0:
		return fmt.Errorf("%w: the file is empty: it is created by the first worker that opens it, or by a latch command that writes", store.ErrNoStore)
	case v > latest:
		return fmt.Errorf("%w: schema version %d, this binary knows %d: upgrade latch", store.ErrSchemaTooNew, v, latest)
	}
	return nil
}
