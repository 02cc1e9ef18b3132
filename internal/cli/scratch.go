package cli

import (
	"context"
	"fmt"

	"github.com/latchkit/latch/internal/storeurl"
	"github.com/latchkit/latch/store"
)

// scratchStores gives the demo throwaway stores of the configured backend, made by the backend
// (store.NewScratch): SQLite files in a temporary directory by default, or, when --store or
// $LATCH_STORE names another backend (a Postgres server, say), fresh stores beside it there. The
// configured store itself is never touched. cleanup removes them all.
func (a *app) scratchStores(ctx context.Context, names ...string) (urls []string, cleanup func(), err error) {
	place := a.storeFlag
	if place == "" {
		place = a.getenv("LATCH_STORE")
	}
	if place == "" {
		place = storeurl.DefaultPlace
	}
	sc, err := store.NewScratch(ctx, place, &store.ScratchConfig{Prefix: "latch_demo", Dir: a.getenv("TMPDIR"), Volatile: true})
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() {
		if err := sc.Close(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(a.stderr, "latch demo: scratch stores not removed: %v\n", err)
		}
	}
	for _, n := range names {
		u, err := sc.URL(ctx, n)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		urls = append(urls, u)
	}
	return urls, cleanup, nil
}
