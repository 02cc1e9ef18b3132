package testdb

import (
	"testing"

	"github.com/latchkit/latch/internal/storeraw"
)

// Raw runs SQL on a store behind its back, as someone with access to the database would: tests
// of what verification notices edit rows through it.
type Raw struct {
	// Exec runs a statement and returns the rows it affected; Query scans one row into dest.
	// Both take ? placeholders on either backend, name the store's tables plainly or as {name},
	// and fail the test on an error.
	Exec  func(q string, args ...any) int64
	Query func(q string, dest []any, args ...any)
}

// OpenRaw connects to the database of the store at storeURL (a URL as URL returns) through its
// backend (internal/storeraw), closed with t.Cleanup.
func OpenRaw(t testing.TB, storeURL string) *Raw {
	t.Helper()
	db, err := storeraw.Open(t.Context(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &Raw{
		Exec: func(q string, args ...any) int64 {
			t.Helper()
			n, err := db.Exec(t.Context(), storeraw.Stmt{SQL: q, Args: args})
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return n[0]
		},
		Query: func(q string, dest []any, args ...any) {
			t.Helper()
			if err := db.QueryRow(t.Context(), q, args, dest...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		},
	}
}
