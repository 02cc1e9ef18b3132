// Package testdb gives tests a fresh store URL on a real database of any registered backend: a
// scratch store the backend makes (store.NewScratch) — a SQLite file in the test's temporary
// directory, a new schema on the PostgreSQL server that scripts/test.sh starts — removed when
// the test ends. It is imported by tests only, and links in this module's backends so that
// every test that uses it can open their URLs.
package testdb

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
	_ "github.com/latchkit/latch/store/postgres" // postgres://
	_ "github.com/latchkit/latch/store/sqlite"   // sqlite:
)

// URL returns the URL of a fresh store of backend, a registered scheme ("sqlite", "postgres").
// prefix names the test's package in what the store is made of (a schema, a directory), so that
// one left behind says whose it was.
//
// A backend whose stores live on a server makes them on the server that
// $LATCH_TEST_<BACKEND>_URL names (LATCH_TEST_POSTGRES_URL). Without one the test is skipped, or
// fails under LATCH_REQUIRE_<BACKEND>=1 (LATCH_REQUIRE_POSTGRES=1) so that CI never counts a
// skip as a pass.
func URL(t testing.TB, backend, prefix string) string {
	t.Helper()
	env := "LATCH_TEST_" + strings.ToUpper(backend) + "_URL"
	place := os.Getenv(env)
	if place == "" {
		place = backend + ":"
	}
	sc, err := store.NewScratch(t.Context(), place, &store.ScratchConfig{Prefix: prefix, Dir: t.TempDir()})
	if err != nil && os.Getenv(env) == "" {
		require := "LATCH_REQUIRE_" + strings.ToUpper(backend)
		if os.Getenv(require) == "1" {
			t.Fatalf("%s=1 but %s is unset (%v): run ./scripts/test.sh, which starts a server", require, env, err)
		}
		t.Skipf("%s is unset (scripts/test.sh sets it): %v", env, err)
	}
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sc.Close(ctx); err != nil {
			t.Errorf("testdb: %v", err)
		}
	})
	u, err := sc.URL(t.Context(), "state")
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	return u
}

// PostgresURL returns the URL of a new, empty schema on the test server: URL(t, "postgres",
// prefix).
func PostgresURL(t testing.TB, prefix string) string {
	t.Helper()
	return URL(t, "postgres", prefix)
}
