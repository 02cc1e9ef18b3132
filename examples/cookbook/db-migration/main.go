// Command db-migration runs a schema migration from two deploy pipelines at once.
//
// Two pipelines (two guards on one store, as two CI runners sharing it would be) start the
// same release and both try to apply migration 0042 to orders-db. The effect key is the
// database and the migration's version, reserved atomically in the store: one pipeline
// applies it, the other is refused while it runs and, once it has, as already committed. A
// migration marked destructive (it drops a column) is put before a person instead of running.
//
// Unguarded (LATCH_EXAMPLE_UNGUARDED=1) both pipelines apply the migration, and the
// destructive one runs unasked: the recipe exits 1.
package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  db.migrate:
    effect: "migrate:{database}:{version}"
    resource: "database:{database}"
    lease: 10m
    arguments:
      database: { type: string }
      version: { type: integer, min: 1 }
      destructive: { type: boolean }
    rules:
      - when: { destructive_eq: false }
        decision: allow
      - decision: approve
`

// Migration is one schema change.
type Migration struct {
	Database    string `json:"database"`
	Version     int    `json:"version"`
	Destructive bool   `json:"destructive"`
}

// database is the fake server: it counts how often each version was applied.
type database struct {
	mu      sync.Mutex
	applied map[int]int
}

func (d *database) apply(_ context.Context, m Migration) (string, error) {
	time.Sleep(100 * time.Millisecond) // ALTER TABLE takes a while
	d.mu.Lock()
	defer d.mu.Unlock()
	d.applied[m.Version]++
	return "applied", nil
}

func main() {
	recipe.Run("db-migration", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		db := &database{applied: map[int]int{}}
		second, err := k.Open(ctx, policyYAML, nil) // the other pipeline's guard
		if err != nil {
			return err
		}
		defer second.Close()
		migrate := []func(context.Context, Migration) (string, error){
			latch.Protect(k.Guard, "db.migrate", db.apply, nil),
			latch.Protect(second, "db.migrate", db.apply, nil),
		}
		if k.Unguarded {
			migrate = []func(context.Context, Migration) (string, error){db.apply, db.apply}
		}
		m := Migration{Database: "orders-db", Version: 42}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range migrate {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pctx := latch.WithPrincipal(ctx, latch.Principal{Agent: "deploy-pipeline"})
				_, errs[i] = migrate[i](pctx, m)
			}()
		}
		wg.Wait()
		ran := 0
		for i, err := range errs {
			k.Say("pipeline %d: migration 42: %s", i+1, recipe.Word(err, "applied"))
			if err == nil {
				ran++
			} else if !k.Unguarded {
				k.Expect(errors.Is(err, latch.ErrInProgress) || errors.Is(err, latch.ErrAlreadyCommitted),
					"pipeline %d was refused %v, want in_progress or committed", i+1, err)
			}
		}
		// The pipeline that lost the race retries once the release settles: already committed.
		_, err = migrate[1](latch.WithPrincipal(ctx, latch.Principal{Agent: "deploy-pipeline"}), m)
		k.Say("pipeline 2 retries migration 42: %s", recipe.Word(err, "applied"))
		if !k.Unguarded {
			k.Expect(recipe.Reason(err) == string(latch.ReasonCommitted), "the retry was refused %q, want committed", recipe.Reason(err))
		}

		drop := Migration{Database: "orders-db", Version: 43, Destructive: true}
		_, err = migrate[0](latch.WithPrincipal(ctx, latch.Principal{Agent: "deploy-pipeline"}), drop)
		k.Say("pipeline 1: migration 43 (drops orders.legacy_total): %s", recipe.Word(err, "applied"))
		db.mu.Lock()
		defer db.mu.Unlock()
		k.Say("orders-db: migration 42 applied %d time(s), 43 applied %d time(s)", db.applied[42], db.applied[43])
		k.Expect(ran == 1, "%d pipelines applied migration 42, want 1", ran)
		k.Expect(db.applied[42] == 1, "migration 42 was applied %d times, want once", db.applied[42])
		k.Expect(db.applied[43] == 0, "the destructive migration ran %d times without a person, want never", db.applied[43])
		return nil
	})
}
