// Package temporalcase is run with the temporal preset on: registered activities are protected.
package temporalcase

import (
	"context"

	"example.com/pay"
	"go.temporal.io/sdk/worker"
)

type Activities struct{ C *pay.Client }

func (a *Activities) Charge(ctx context.Context, cents int) error { // want Charge:`guarded`
	return a.C.Charge(ctx, cents)
}

func refund(ctx context.Context, id string) error { return pay.Refund(ctx, id) }

func register(w worker.Worker, c *pay.Client) {
	w.RegisterActivity(&Activities{C: c})
	w.RegisterActivity(refund)
}

func direct(ctx context.Context, c *pay.Client) error {
	return c.Charge(ctx, 1) // want `unprotected call to \(\*example.com/pay.Client\).Charge:`
}
