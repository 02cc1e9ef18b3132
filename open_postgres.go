package latch

import (
	"context"
	"errors"

	"github.com/latchkit/latch/store"
)

func openPostgres(ctx context.Context, url string, o StoreOptions) (store.Store, error) {
	return nil, errors.New("latch: open store: postgres backend not built yet")
}
