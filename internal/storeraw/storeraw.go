// Package storeraw reaches below a store, to its database, for the few things that must act
// behind latch's back: `latch verify` edits scratch stores as someone with database access would
// (and checks that latch notices), tests damage stores on purpose, and `latch bench` measures the
// bare transactions a call needs without latch. The backends of this module implement its
// interfaces on the store.Driver they register, and callers find them by a store URL's scheme
// (Open, OpenBaseline), so no caller names a backend.
//
// It is internal because none of it is a promise: a backend outside this module need not offer
// any of it, and the tools that use it say so plainly when its backend does not.
package storeraw

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/latchkit/latch/store"
)

// ErrUnsupported is wrapped by the errors of Open, OpenBaseline and the contention helpers when
// the backend of a URL does not offer what was asked.
var ErrUnsupported = errors.New("not offered by this store backend")

// Stmt is one SQL statement for DB.Exec. It names tables as {name} and its parameters as ?;
// each backend writes them its own way. An argument of type Doc is a receipt document, which
// each backend stores in its own column type.
type Stmt struct {
	SQL  string
	Args []any
}

// Doc is a receipt document as a Stmt argument.
type Doc []byte

// DB is a connection to a store's database below the store.
type DB interface {
	// Exec runs stmts in one transaction and returns how many rows each changed.
	Exec(ctx context.Context, stmts ...Stmt) ([]int64, error)
	// QueryRow runs q (tables as {name} or plain, parameters as ?) and scans its first row into
	// dest.
	QueryRow(ctx context.Context, q string, args []any, dest ...any) error
	// Close closes the connection.
	Close() error
}

// Opener is implemented by a store.Driver that can open its stores' databases directly.
type Opener interface {
	// OpenRaw connects to the database of the store at url. Plain table names in statements
	// name the store's own tables.
	OpenRaw(ctx context.Context, url string) (DB, error)
}

// Open connects to the database of the store at url, below the store.
func Open(ctx context.Context, url string) (DB, error) {
	d, err := store.Lookup(url)
	if err != nil {
		return nil, err
	}
	o, ok := d.(Opener)
	if !ok {
		return nil, fmt.Errorf("raw access to %s stores: %w", store.Scheme(url), ErrUnsupported)
	}
	return o.OpenRaw(ctx, url)
}

// Baseline is a bare database of a store's kind, holding none of latch's tables, on which a
// benchmark runs the transactions a protected call needs without latch.
type Baseline interface {
	// Call runs the transactions of one call for key: one committing an insert of the key as
	// executing; one committing its update to committed and the insert of a receipt of doc.
	Call(ctx context.Context, key, doc string) error
	// Close removes the baseline.
	Close() error
}

// Baseliner is implemented by a store.Driver that can make a Baseline beside a store, with the
// driver and settings its stores use.
type Baseliner interface {
	// OpenBaseline creates a baseline beside the store at url (on the same disk or server),
	// which it never touches.
	OpenBaseline(ctx context.Context, url string) (Baseline, error)
}

// OpenBaseline creates a Baseline beside the store at url.
func OpenBaseline(ctx context.Context, url string) (Baseline, error) {
	d, err := store.Lookup(url)
	if err != nil {
		return nil, err
	}
	b, ok := d.(Baseliner)
	if !ok {
		return nil, fmt.Errorf("baseline of %s stores: %w", store.Scheme(url), ErrUnsupported)
	}
	return b.OpenBaseline(ctx, url)
}

// DeadlockCounter is implemented by a store.Driver whose database counts the deadlocks it
// broke, so that a race of processes can report how many it caused.
type DeadlockCounter interface {
	// Tagged returns url with its sessions marked as tag's, so that WaitUntagged can wait for
	// them to end.
	Tagged(url, tag string) (string, error)
	// Deadlocks returns the database's deadlock counter.
	Deadlocks(ctx context.Context, url string) (int64, error)
	// WaitUntagged waits, at most for d, until no session marked as tag's remains: a session
	// reports its counters when it ends.
	WaitUntagged(ctx context.Context, url, tag string, d time.Duration) error
}

// Deadlocks returns the DeadlockCounter of the backend of url; ok is false when it counts none.
func Deadlocks(url string) (DeadlockCounter, bool) {
	d, err := store.Lookup(url)
	if err != nil {
		return nil, false
	}
	c, ok := d.(DeadlockCounter)
	return c, ok
}

// tableRef is a table named in a statement: {receipts}.
var tableRef = regexp.MustCompile(`\{([a-z_]+)\}`)

// Tables rewrites each {name} of q with table(name).
func Tables(q string, table func(name string) string) string {
	return tableRef.ReplaceAllStringFunc(q, func(m string) string { return table(m[1 : len(m)-1]) })
}

// Numbered rewrites the ? parameters of q as $1, $2, …
func Numbered(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
