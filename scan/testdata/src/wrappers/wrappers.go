// Package wrappers holds the cases of the asynq wrapper, the configured wrappers and the
// temporal preset.
package wrappers

import (
	"context"

	"example.com/jobs"
	"example.com/pay"
	"github.com/hibiken/asynq"
	"github.com/latchkit/latch"
	latchasynq "github.com/latchkit/latch/integrations/asynq"
	"go.temporal.io/sdk/worker"
)

// A function literal converted to asynq.HandlerFunc and given to latchasynq.Handler: protected.
func asynqHandler(g *latch.Guard, c *pay.Client) asynq.Handler {
	return latchasynq.Handler(g, "charge", asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		return c.Charge(ctx, len(t.Payload))
	}), nil)
}

// The same literal given to the mux bare: with no asynq_middleware preset, reported.
func asynqBare(mux *asynq.ServeMux, c *pay.Client) {
	mux.HandleFunc("charge", func(ctx context.Context, t *asynq.Task) error {
		return c.Charge(ctx, 1) // want `unprotected call`
	})
}

// A configured wrapper (jobs.Run, arg 1): protected.
func configured(c *pay.Client) error {
	return jobs.Run("charge", func(ctx context.Context) error {
		return c.Charge(ctx, 1)
	})
}

// The configured wrapper's other argument position does not protect.
func configuredWrongArg(c *pay.Client) error {
	return jobs.Run(string(rune(must(c.Charge(context.Background(), 1)))), nil) // want `unprotected call`
}

func must(err error) int { return 0 }

// A configured begin wrapper (jobs.Reserve, kind begin), checked in the if's init: protected.
func configuredBegin(ctx context.Context, c *pay.Client) error {
	if _, err := jobs.Reserve(ctx, "charge"); err != nil {
		return err
	}
	return c.Charge(ctx, 1)
}

// Temporal registration counts only with the temporal preset, which this configuration does
// not turn on: the activity's call is reported.
type Activities struct{ C *pay.Client }

func (a *Activities) Charge(ctx context.Context, cents int) error {
	return a.C.Charge(ctx, cents) // want `unprotected call`
}

func registerActivities(w worker.Worker, c *pay.Client) {
	w.RegisterActivity(&Activities{C: c})
}
