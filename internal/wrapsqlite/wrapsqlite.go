// Package wrapsqlite is a store backend that exists to prove that adding one takes one package
// and no edit anywhere else: it registers the wrapsqlite: scheme (wrapsqlite:PATH is the SQLite
// store at PATH) and hands every store it opens back wrapped in a type of its own, so that a
// test can tell it was this backend, reached through the registry, that opened it. Its scratch
// stores and its access below the store come from the SQLite backend, renamed.
//
// Only tests import it: it passes the conformance suite, and latch.Open, the scratch stores that
// latch verify, latch demo, latch bench and internal/testdb ask for, and the latch command's
// --store all take its URLs without naming it.
package wrapsqlite

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/latchkit/latch/internal/storeraw"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/sqlite"
)

// Scheme is the URL scheme the package registers.
const Scheme = "wrapsqlite"

func init() { store.Register(Scheme, driver{}) }

// Store is a SQLite store opened through this backend. Embedding the SQLite store keeps every
// optional capability of it (delegations, tokens, retention…), so that the conformance suite
// runs all its groups on it.
type Store struct {
	*sqlite.Store
}

// inner is url as the SQLite backend names it.
func inner(url string) (string, error) {
	rest, ok := strings.CutPrefix(url, Scheme+":")
	if !ok {
		return "", fmt.Errorf("%q is not a %s: URL", url, Scheme)
	}
	return "sqlite:" + rest, nil
}

// outer is a SQLite URL as this backend names it.
func outer(url string) string { return Scheme + ":" + strings.TrimPrefix(url, "sqlite:") }

// sqliteDriver is the SQLite backend's registered driver, for its capabilities.
func sqliteDriver() store.Driver {
	d, err := store.Lookup("sqlite:")
	if err != nil {
		panic(err) // unreachable: this package imports store/sqlite, which registers it
	}
	return d
}

type driver struct{}

// opened counts the stores this backend opened.
var opened atomic.Int64

// Opened returns how many stores this backend has opened in this process: a test that hands
// some code only a URL sees whether that code reached the backend.
func Opened() int64 { return opened.Load() }

var (
	_ store.Scratcher = driver{}
	_ storeraw.Opener = driver{}
)

func (driver) Open(ctx context.Context, url string, o *store.OpenOptions) (store.Store, error) {
	u, err := inner(url)
	if err != nil {
		return nil, err
	}
	st, err := sqlite.Open(ctx, u, &sqlite.Config{ReadOnly: o.ReadOnly, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	opened.Add(1)
	return &Store{st}, nil
}

func (driver) NewScratch(ctx context.Context, place string, cfg *store.ScratchConfig) (store.Scratch, error) {
	u, err := inner(place)
	if err != nil {
		return nil, err
	}
	sc, err := sqliteDriver().(store.Scratcher).NewScratch(ctx, u, cfg)
	if err != nil {
		return nil, err
	}
	return scratch{sc}, nil
}

// scratch names the SQLite backend's scratch stores as this backend's.
type scratch struct{ store.Scratch }

func (s scratch) URL(ctx context.Context, name string) (string, error) {
	u, err := s.Scratch.URL(ctx, name)
	if err != nil {
		return "", err
	}
	return outer(u), nil
}

func (driver) OpenRaw(ctx context.Context, url string) (storeraw.DB, error) {
	u, err := inner(url)
	if err != nil {
		return nil, err
	}
	return sqliteDriver().(storeraw.Opener).OpenRaw(ctx, u)
}
