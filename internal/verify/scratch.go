package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/latchkit/latch/internal/storeraw"
	"github.com/latchkit/latch/internal/storeurl"
	"github.com/latchkit/latch/store"
)

// scratch hands out fresh, empty stores of the operator's backend, made by the backend itself
// (store.NewScratch), and removes them all at the end. Only the kind and place of the operator's
// URL are used: the operator's store is never opened.
type scratch struct {
	kind string // the scheme of the scratch stores' URLs
	sc   store.Scratch
	mu   sync.Mutex
	urls map[string]bool // what location handed out: only those are edited
}

// newScratch makes the scratch of the operator's store URL ("" is the default, SQLite). A URL
// whose backend is not linked in, or makes no scratch stores, is a *UsageError.
func newScratch(ctx context.Context, storeURL string) (*scratch, error) {
	place := storeURL
	if place == "" {
		place = storeurl.DefaultPlace
	}
	sc, err := store.NewScratch(ctx, place, &store.ScratchConfig{Prefix: "latch_verify"})
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		return nil, fmt.Errorf("verify: %w", err) // the scratch directory: verify could not run
	case err != nil:
		return nil, &UsageError{Msg: err.Error()} // the URL: a malformed parameter must not be dropped (sslmode=require;)
	}
	return &scratch{kind: store.Scheme(place), sc: sc, urls: map[string]bool{}}, nil
}

// location returns the URL of a new, empty store named for a scenario.
func (s *scratch) location(ctx context.Context, name string) (string, error) {
	u, err := s.sc.URL(ctx, name)
	if err != nil {
		return "", fmt.Errorf("verify: %w", err)
	}
	s.mu.Lock()
	s.urls[u] = true
	s.mu.Unlock()
	return u, nil
}

// stmt is one statement of edit: tables as {name}, parameters as ?, a receipt document as a
// docValue; each backend writes them its own way.
type stmt struct {
	sql  string
	args []any
}

// docValue is a receipt document as a stmt argument: SQLite keeps it as TEXT, Postgres as bytea.
type docValue = storeraw.Doc

// alterReceipt overwrites the stored document of receipt seq in the store at u, behind latch's
// back, as someone editing the database would.
func (s *scratch) alterReceipt(ctx context.Context, u string, seq int64, doc []byte) error {
	n, err := s.edit(ctx, u, stmt{"UPDATE {receipts} SET doc = ? WHERE seq = ?", []any{docValue(doc), seq}})
	if err != nil {
		return fmt.Errorf("alter receipt: %w", err)
	}
	if n[0] != 1 {
		return fmt.Errorf("alter receipt: %d rows changed, want 1", n[0])
	}
	return nil
}

// edit runs statements on the store at u, one this scratch made, in one transaction, behind
// latch's back, and returns how many rows each changed. A backend that offers no such access
// (internal/storeraw) makes it an error: the scenario cannot be run there.
func (s *scratch) edit(ctx context.Context, u string, stmts ...stmt) ([]int64, error) {
	s.mu.Lock()
	ours := s.urls[u]
	s.mu.Unlock()
	if !ours {
		return nil, fmt.Errorf("edit store: %s is not a scratch store", store.Redact(u))
	}
	db, err := storeraw.Open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("edit store: %w", err)
	}
	defer db.Close()
	raw := make([]storeraw.Stmt, len(stmts))
	for i, st := range stmts {
		raw[i] = storeraw.Stmt{SQL: st.sql, Args: st.args}
	}
	n, err := db.Exec(ctx, raw...)
	if err != nil {
		return nil, fmt.Errorf("edit store: %w", err)
	}
	return n, nil
}

// close removes every store handed out.
func (s *scratch) close(ctx context.Context) error {
	if err := s.sc.Close(ctx); err != nil {
		return fmt.Errorf("verify: remove scratch stores: %w", err)
	}
	return nil
}
