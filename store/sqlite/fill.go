package sqlite

import (
	"context"
	"fmt"

	"github.com/latchkit/latch/store"
)

// fillTxn is the context key under which Fill hands its transaction to the write methods it
// calls: write runs their requests in it instead of queueing them for a batch of their own.
type fillTxn struct{}

var _ store.Filler = (*Store)(nil)

// Fill makes the writes of calls through the store's own write methods in one BEGIN IMMEDIATE
// transaction (store.Filler): each method's request runs in it as it would run in a batch of
// its own, so what is written — effects, approvals, events, receipts and the chain head — is
// exactly what the methods write one call at a time.
func (s *Store) Fill(ctx context.Context, calls []store.FillCall) error {
	if err := store.CheckFills(calls); err != nil {
		return err
	}
	s.filling.Add(1)
	defer s.filling.Add(-1)
	return s.write(ctx, func(t *txn) error {
		if err := store.WriteFills(context.WithValue(ctx, fillTxn{}, t), s, calls); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		return nil
	})
}
