// Package worker protects its payment calls with the river wrapper and exports them.
package worker

import (
	"context"

	"example.com/pay"
	"github.com/latchkit/latch"
	latchriver "github.com/latchkit/latch/integrations/river"
)

// ChargeWorker's Work runs under latch: Register gives it to latchriver.Wrap.
type ChargeWorker struct{ C *pay.Client }

func (w *ChargeWorker) Work(ctx context.Context, job *latchriver.Job) error { // want Work:`guarded\(\(\*example.com/pay.Client\).Charge\)`
	return w.C.Charge(ctx, int(job.ID))
}

func Register(g *latch.Guard, c *pay.Client) latchriver.Worker {
	return latchriver.Wrap(g, "charge", &ChargeWorker{C: c}, nil)
}

// RefundWorker is never wrapped: its Work is reported.
type RefundWorker struct{}

func (RefundWorker) Work(ctx context.Context, job *latchriver.Job) error {
	return pay.Refund(ctx, "r") // want `unprotected call to example.com/pay.Refund`
}

// Settle is exported and given to Protect: its calls are protected here, and it carries a fact
// for packages that call it.
func Settle(ctx context.Context, a struct{ C *pay.Client }) (int, error) { // want Settle:`guarded\(\(\*example.com/pay.Client\).Charge\)`
	return 0, a.C.Charge(ctx, 1)
}

func Protected(g *latch.Guard) func(context.Context, struct{ C *pay.Client }) (int, error) {
	return latch.Protect(g, "settle", Settle, nil)
}

// TwiceWorker is wrapped, and also registered bare through the interface: its Work may run
// outside latch, so its calls are reported.
type TwiceWorker struct{ C *pay.Client }

func (w *TwiceWorker) Work(ctx context.Context, job *latchriver.Job) error {
	return w.C.Charge(ctx, 1) // want `unprotected call`
}

func add(workers []latchriver.Worker, w latchriver.Worker) []latchriver.Worker {
	return append(workers, w)
}

func RegisterTwice(g *latch.Guard, c *pay.Client) []latchriver.Worker {
	w := &TwiceWorker{C: c}
	return add([]latchriver.Worker{latchriver.Wrap(g, "charge", w, nil)}, w)
}

// HeldWorker is wrapped, and kept in an interface variable too.
type HeldWorker struct{ C *pay.Client }

func (w HeldWorker) Work(ctx context.Context, job *latchriver.Job) error {
	return w.C.Charge(ctx, 1) // want `unprotected call`
}

var held latchriver.Worker = HeldWorker{}

func RegisterHeld(g *latch.Guard) latchriver.Worker {
	return latchriver.Wrap(g, "charge", HeldWorker{}, nil)
}
