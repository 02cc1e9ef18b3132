// Package testdb gives tests a fresh store URL on a real database: a SQLite file in the test's
// temporary directory, or a new schema on the PostgreSQL server that scripts/test.sh starts
// (LATCH_TEST_POSTGRES_URL), dropped when the test ends. It is imported by tests only.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// URL returns a fresh store URL on backend ("sqlite" or "postgres"). prefix names the test's
// package in Postgres schema names, so a schema left behind says whose it was.
func URL(t testing.TB, backend, prefix string) string {
	t.Helper()
	if backend == "sqlite" {
		return "sqlite:" + t.TempDir() + "/state.db"
	}
	return PostgresURL(t, prefix)
}

// PostgresURL returns the URL of a new, empty schema on the test server, dropped with
// t.Cleanup. Without a server the test is skipped, or fails under LATCH_REQUIRE_POSTGRES=1 so
// that CI never counts a skip as a pass.
func PostgresURL(t testing.TB, prefix string) string {
	t.Helper()
	base := os.Getenv("LATCH_TEST_POSTGRES_URL")
	if base == "" {
		if os.Getenv("LATCH_REQUIRE_POSTGRES") == "1" {
			t.Fatal("LATCH_REQUIRE_POSTGRES=1 but LATCH_TEST_POSTGRES_URL is unset: run ./scripts/test.sh, which starts a server")
		}
		t.Skip("LATCH_TEST_POSTGRES_URL is unset (scripts/test.sh sets it)")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("url.Parse(LATCH_TEST_POSTGRES_URL) = %v", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	schema := prefix + "_" + hex.EncodeToString(b[:])
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return u.String()
}
