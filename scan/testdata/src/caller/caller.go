// Package caller calls another package's protected functions directly.
package caller

import (
	"context"

	"example.com/pay"
	latchriver "github.com/latchkit/latch/integrations/river"
	"worker"
)

func direct(ctx context.Context, c *pay.Client) error {
	w := &worker.ChargeWorker{C: c}
	if err := w.Work(ctx, &latchriver.Job{ID: 1}); err != nil { // want `unprotected call to \(\*worker.ChargeWorker\).Work \(it makes consequential calls, \(\*example.com/pay.Client\).Charge, that expect to run under latch\)`
		return err
	}
	_, err := worker.Settle(ctx, struct{ C *pay.Client }{c}) // want `unprotected call to worker.Settle`
	return err
}

// Through the interface the wrapper returns: not a static call, not seen.
func wrapped(ctx context.Context, w latchriver.Worker) error {
	return w.Work(ctx, &latchriver.Job{ID: 2})
}
