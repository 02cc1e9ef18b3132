package app

import (
	"context"

	"example.com/pay"
	"github.com/latchkit/latch"
)

type Args struct{ Cents int }

func direct(ctx context.Context, c *pay.Client) error {
	return c.Charge(ctx, 1) // want `unprotected call to \(\*example.com/pay.Client\).Charge \(moves money\)`
}

func protected(g *latch.Guard, c *pay.Client) func(context.Context, Args) (int, error) {
	return latch.Protect(g, "charge", func(ctx context.Context, a Args) (int, error) {
		return 0, c.Charge(ctx, a.Cents)
	}, nil)
}

func other(ctx context.Context, o *pay.Other) error { return o.Charge(ctx, 1) }
