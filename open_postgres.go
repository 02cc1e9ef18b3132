package latch

import (
	"context"

	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/postgres"
)

func openPostgres(ctx context.Context, url string, o StoreOptions) (store.Store, error) {
	st, err := postgres.Open(ctx, url, &postgres.Config{ReadOnly: o.ReadOnly, Logger: o.Logger})
	if err != nil {
		return nil, err // an untyped nil: a typed nil *Store in an interface is not nil
	}
	return st, nil
}
