// Package sqlitebare opens a bare SQLite database exactly as latch's SQLite store opens its
// writer — the same driver, WAL, busy_timeout, synchronous, BEGIN IMMEDIATE for every
// transaction, one connection — but creates none of latch's tables. It is the database `latch
// bench` measures latch against, and what tests use to reach a store file below the store.
//
// The opener lives in package store/sqlite, which installs it when it is linked in; it is
// not part of that package's public API.
package sqlitebare

import (
	"database/sql"
	"errors"
)

var open func(url string) (*sql.DB, error)

// Install is called by store/sqlite's init with its opener.
func Install(fn func(url string) (*sql.DB, error)) { open = fn }

// Open opens the SQLite file the store URL ("sqlite:PATH[?synchronous=…]") names. Point it at
// a scratch file, or at a store only to read or to damage it on purpose in a test.
func Open(url string) (*sql.DB, error) {
	if open == nil {
		return nil, errors.New("sqlitebare: the SQLite store is not linked in (import github.com/latchkit/latch/store/sqlite)")
	}
	return open(url)
}
