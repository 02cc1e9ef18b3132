package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchkit/latch/store"
)

// fillTxn is the context key under which Fill hands its transaction to the write methods it
// calls: their writes run in it, instead of in a batch or a transaction of their own.
type fillTxn struct{}

var _ store.Filler = (*Store)(nil)

// Fill makes the writes of calls through the store's own write methods in one transaction
// (store.Filler): each method's write runs in it as it runs in a transaction of its own — the
// chain head locked first, the same reads, deciders and statements — so what is written is
// exactly what the methods write one call at a time.
func (s *Store) Fill(ctx context.Context, calls []store.FillCall) error {
	if err := store.CheckFills(calls); err != nil {
		return err
	}
	s.filling.Add(1)
	defer s.filling.Add(-1)
	_, err := s.write(ctx, "fill", func(ctx context.Context, t *txn) error {
		return store.WriteFills(context.WithValue(ctx, fillTxn{}, t), s, calls)
	})
	return err
}

// fillTxnOf is the transaction of the Fill whose write methods ctx is given to, or nil.
func (s *Store) fillTxnOf(ctx context.Context) *txn {
	if s.filling.Load() == 0 {
		return nil
	}
	t, _ := ctx.Value(fillTxn{}).(*txn)
	return t
}

// fill runs one write method's transaction function inside the fill's transaction t, with a
// witness of its own (the method's result). A refusal is returned as the method returns it
// alone; any other error fails the method, and with it the fill, whose transaction is rolled
// back whole (a failed statement aborts a Postgres transaction anyway).
func (t *txn) fill(ctx context.Context, op string, fn func(ctx context.Context, t *txn) error) (*witness, error) {
	sub := &txn{Tx: t.Tx, s: t.s}
	if err := fn(ctx, sub); err != nil {
		var r refused
		if errors.As(err, &r) {
			return nil, r.err
		}
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return &sub.w, nil
}
