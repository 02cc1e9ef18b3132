package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // database/sql's "sqlite"
)

// Raw runs SQL on a store behind its back, as someone with access to the database would: tests
// of what verification notices edit rows through it.
type Raw struct {
	// Exec runs a statement and returns the rows it affected; Query scans one row into dest.
	// Both take ? placeholders on either backend and fail the test on an error.
	Exec  func(q string, args ...any) int64
	Query func(q string, dest []any, args ...any)
}

// OpenRaw connects to the store at storeURL (a sqlite: or postgres: URL as URL returns), closed
// with t.Cleanup.
func OpenRaw(t testing.TB, storeURL string) *Raw {
	t.Helper()
	if path, ok := strings.CutPrefix(storeURL, "sqlite:"); ok {
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return &Raw{
			Exec: func(q string, args ...any) int64 {
				t.Helper()
				res, err := db.Exec(q, args...)
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				n, _ := res.RowsAffected()
				return n
			},
			Query: func(q string, dest []any, args ...any) {
				t.Helper()
				if err := db.QueryRow(q, args...).Scan(dest...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			},
		}
	}
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	schema := q.Get("schema")
	q.Del("schema")
	u.RawQuery = q.Encode()
	conn, err := pgx.Connect(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), `SET search_path TO `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	pg := func(q string) string { // ? placeholders, as SQLite writes them
		for i := 1; strings.Contains(q, "?"); i++ {
			q = strings.Replace(q, "?", fmt.Sprintf("$%d", i), 1)
		}
		return q
	}
	return &Raw{
		Exec: func(q string, args ...any) int64 {
			t.Helper()
			tag, err := conn.Exec(t.Context(), pg(q), args...)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return tag.RowsAffected()
		},
		Query: func(q string, dest []any, args ...any) {
			t.Helper()
			if err := conn.QueryRow(t.Context(), pg(q), args...).Scan(dest...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		},
	}
}
