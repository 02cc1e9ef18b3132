package cli

import (
	"context"

	latch "github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// keepTallyAfter is how many receipts a read command's count must have read beyond the tally
// kept before it opens the store for writing to keep the new one: fewer cost the next count
// less than the open costs this one.
const keepTallyAfter = 1000

// readKeeper keeps `latch stats`' tally of the chain for a command that opened the store
// read-only (st): it reads the kept tally from st, and keeps a new one through a writable open
// of the same store, only when the store is at this binary's schema (a writable open would
// migrate an older one, which the workers using it may not read) and the count read at least
// keepTallyAfter receipts more than the tally it started from.
type readKeeper struct {
	a     *app
	st    store.Store
	start int64 // Through of the tally read, 0 for none
}

func (k *readKeeper) KeptTally(ctx context.Context) (*store.KeptTally, error) {
	tk, ok := k.st.(store.TallyKeeper)
	if !ok {
		return nil, nil
	}
	t, err := tk.KeptTally(ctx)
	if t != nil {
		k.start = t.Through
	}
	return t, err
}

func (k *readKeeper) KeepTally(ctx context.Context, t *store.KeptTally) error {
	sr, ok := k.st.(store.SchemaReporter)
	if !ok || t.Through-k.start < keepTallyAfter {
		return nil
	}
	if at, latest := sr.Schema(); at != latest {
		return nil
	}
	u, err := k.a.storeURL()
	if err != nil {
		return err
	}
	w, err := latch.OpenStore(ctx, u, nil)
	if err != nil {
		return err
	}
	defer w.Close()
	tk, ok := w.(store.TallyKeeper)
	if !ok {
		return nil
	}
	return tk.KeepTally(ctx, t)
}
