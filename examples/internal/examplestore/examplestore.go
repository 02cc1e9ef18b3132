// Package examplestore gives each example program its own store, reset at the start of a run so
// the examples are repeatable: a SQLite file under .latch/examples/<name>/ by default, or, when
// $LATCH_STORE names a Postgres server, the schema latch_example_<name> on it.
package examplestore

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	// The examples run on Postgres when $LATCH_STORE names a server: a program opens
	// postgres:// stores once it links the Postgres store in, with this one import.
	_ "github.com/latchkit/latch/store/postgres"
)

// Dir is the example's working directory, for its store and its fake remotes' ledgers.
func Dir(name string) string { return filepath.Join(".latch", "examples", name) }

// URL is the store URL of the example, without resetting it (a second process uses it).
func URL(name string) string {
	if u := os.Getenv("LATCH_STORE"); isPostgres(u) {
		pu, err := url.Parse(u)
		if err != nil {
			return u // latch.Open reports the bad URL
		}
		q := pu.Query()
		q.Set("schema", schema(name))
		pu.RawQuery = q.Encode()
		return pu.String()
	}
	return "sqlite:" + filepath.Join(Dir(name), "state.db")
}

// Reset empties the example's directory and store and returns the store URL.
func Reset(ctx context.Context, name string) (string, error) {
	if err := os.RemoveAll(Dir(name)); err != nil {
		return "", err
	}
	if err := os.MkdirAll(Dir(name), 0o700); err != nil {
		return "", err
	}
	if u := os.Getenv("LATCH_STORE"); isPostgres(u) {
		pu, err := url.Parse(u)
		if err != nil {
			return "", fmt.Errorf("LATCH_STORE: %w", err)
		}
		q := pu.Query()
		q.Del("schema")
		pu.RawQuery = q.Encode()
		conn, err := pgx.Connect(ctx, pu.String())
		if err != nil {
			return "", fmt.Errorf("reset example store: %w", err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema(name)}.Sanitize()+" CASCADE"); err != nil {
			return "", fmt.Errorf("reset example store: %w", err)
		}
	}
	return URL(name), nil
}

func isPostgres(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

func schema(name string) string { return "latch_example_" + strings.ReplaceAll(name, "-", "_") }
