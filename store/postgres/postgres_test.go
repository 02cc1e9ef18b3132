package postgres

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/storetest"
)

// The tests need a PostgreSQL server: LATCH_TEST_POSTGRES_URL names it (./scripts/test.sh starts
// a private one). Without it they skip, unless LATCH_REQUIRE_POSTGRES=1 (CI), where they fail.

// childEnv makes a re-executed test binary play a role from child instead of running tests.
const childEnv = "LATCH_PG_TEST_CHILD"

var backend = storetest.Backend{
	Name: "postgres",
	New:  newSchemaURL,
	Open: func(ctx context.Context, url string) (store.Store, error) {
		st, err := Open(ctx, url, nil)
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return st, nil
	},
}

func TestMain(m *testing.M) {
	storetest.Child(backend) // first: a re-executed storetest racer does its part and exits
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(child(role))
	}
	goleak.VerifyTestMain(m) // pools, proxies and settle connections all end with their test
}

func TestConformance(t *testing.T) {
	serverURL(t)
	storetest.Run(t, backend)
}

// serverURL returns the test server's URL, or skips (fails under LATCH_REQUIRE_POSTGRES=1).
func serverURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("LATCH_TEST_POSTGRES_URL")
	if u == "" {
		if os.Getenv("LATCH_REQUIRE_POSTGRES") == "1" {
			t.Fatal("LATCH_TEST_POSTGRES_URL is unset and LATCH_REQUIRE_POSTGRES=1: run ./scripts/test.sh, which starts a server")
		}
		t.Skip("LATCH_TEST_POSTGRES_URL is unset: skipping the Postgres tests (./scripts/test.sh starts a server)")
	}
	return u
}

// withSchema returns raw with its schema parameter set to schema.
func withSchema(t testing.TB, raw, schema string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("url.Parse(LATCH_TEST_POSTGRES_URL) = %v", err)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// newSchemaURL returns the URL of a schema that does not exist yet, dropped with t.Cleanup.
func newSchemaURL(t *testing.T) string {
	t.Helper()
	return newNamedSchemaURL(t, "latch_test_"+randomHex(8))
}

func newNamedSchemaURL(t *testing.T, schema string) string {
	t.Helper()
	base := serverURL(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := execDirect(ctx, base, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return withSchema(t, base, schema)
}

// execDirect runs statements on a connection of its own to the server at raw (schema= removed).
func execDirect(ctx context.Context, raw string, sql string, args ...any) error {
	loc, err := parseURL(raw)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, loc.pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// child plays a role in a re-executed test binary and returns its exit code.
func child(role string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch role {
	case "contend":
		return childContend()
	case "open":
		// Open the store at LATCH_PG_TEST_URL at the instant LATCH_PG_TEST_AT (unix nanoseconds),
		// so that every sibling process opens it at once.
		var at int64
		fmt.Sscan(os.Getenv("LATCH_PG_TEST_AT"), &at)
		time.Sleep(time.Until(time.Unix(0, at)))
		st, err := Open(ctx, os.Getenv("LATCH_PG_TEST_URL"), nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer st.Close()
		if _, err := st.Head(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
	return 2
}
