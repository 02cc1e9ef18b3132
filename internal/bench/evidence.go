package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// EvidencePolicy decides the calls of a chain grown with state (ChainConfig.State): refunds up
// to 100000 run, larger ones wait for one approver; every call names an effect key.
const EvidencePolicy = `schema: latch.policy/v1
approvers:
  roles:
    bench-leads: [latch-bench-lead]
actions:
  bench.charge:
    effect: "charge:{invoice_id}"
    rules:
      - when: { amount_lte: 100000 }
        decision: allow
      - decision: approve
    approvers: { roles: [bench-leads] }
`

// The shares of a chain grown with state, per 100 rounds (each round is one or more calls and
// the state changes they lead to):
//
//	70 a call that commits (1 receipt, an effect row)
//	 5 a call that commits, then the same call again, refused as a duplicate (2 receipts)
//	 8 a call whose executor says NotExecuted (failed), then its renewal, which commits (2)
//	 7 a call that ends ambiguous, then a person's resolution, committed or failed (2)
//	10 a call that needs approval (the request), the approver's grant, and the call with the
//	   approval, which commits (3 receipts, an approval row)
//
// About 135 receipts per 100 rounds; every receipt names an effect key or an approval, so the
// state replay reads and parses each of them.
func evidenceRound(ctx context.Context, g *latch.Guard, run string, i int64) error {
	pctx := latch.WithPrincipal(ctx, Principal)
	args := func(amount int) *latch.Call {
		b := []byte(`{"invoice_id":"` + run + "_" + strconv.FormatInt(i, 10) + `","amount":` + strconv.Itoa(amount) +
			`,"currency":"EUR","customer":"cus_1","capture":true}`)
		return &latch.Call{Action: Action, Arguments: b}
	}
	commit := func(context.Context, json.RawMessage) (any, error) { return map[string]any{"id": "ch_1"}, nil }
	key := "charge:" + run + "_" + strconv.FormatInt(i, 10)
	switch r := i % 100; {
	case r < 70:
		_, err := g.Execute(pctx, args(24900), commit)
		return err
	case r < 75:
		if _, err := g.Execute(pctx, args(24900), commit); err != nil {
			return err
		}
		if _, err := g.Execute(pctx, args(24900), commit); !errors.Is(err, latch.ErrDuplicateEffect) {
			return fmt.Errorf("duplicate of %s: %v, want ErrDuplicateEffect", key, err)
		}
		return nil
	case r < 83:
		_, err := g.Execute(pctx, args(24900), func(context.Context, json.RawMessage) (any, error) {
			return nil, latch.NotExecuted(errors.New("card declined"))
		})
		if !errors.Is(err, latch.ErrNotExecuted) {
			return fmt.Errorf("not executed %s: %v", key, err)
		}
		_, err = g.Execute(pctx, args(24900), commit)
		return err
	case r < 90:
		_, err := g.Execute(pctx, args(24900), func(context.Context, json.RawMessage) (any, error) {
			return nil, errors.New("connection reset")
		})
		if !errors.Is(err, latch.ErrAmbiguous) {
			return fmt.Errorf("ambiguous %s: %v", key, err)
		}
		to := store.Committed
		if r%2 == 0 {
			to = store.Failed
		}
		_, err = g.Resolve(ctx, key, to, "cli:latch-bench-lead") // a member of the action's roles, as resolving requires
		return err
	default:
		_, err := g.Execute(pctx, args(250000), commit)
		var ar *latch.ApprovalRequiredError
		if !errors.As(err, &ar) {
			return fmt.Errorf("approval for %s: %v, want an approval request", key, err)
		}
		if _, err := g.Answer(ctx, &store.AnswerRequest{ID: ar.ApprovalID, Grant: true, Approver: "latch-bench-lead",
			Note: "bench"}); err != nil {
			return err
		}
		_, err = g.Execute(latch.WithApproval(pctx, ar.ApprovalID), args(250000), commit)
		return err
	}
}

// appendEvidence grows the chain of storeURL through the real pipeline, by rounds of
// evidenceRound from fillWorkers goroutines, until its head reaches n receipts (it may pass n by
// the few receipts of the rounds in flight).
func appendEvidence(ctx context.Context, storeURL string, n int64) error {
	p, err := policy.Parse("bench-evidence.yaml", []byte(EvidencePolicy))
	if err != nil {
		return err
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: storeURL})
	if err != nil {
		return err
	}
	defer g.Close()
	st := g.Store()
	run := runID()
	// The head is read every `every` rounds: often enough that a short chain is not overshot by
	// much, rarely enough not to cost a long one anything.
	every := max(1, min(1000, n/200))
	var next atomic.Int64
	var done atomic.Bool
	errs := make([]error, fillWorkers)
	var wg sync.WaitGroup
	for w := range fillWorkers {
		wg.Go(func() {
			for !done.Load() && ctx.Err() == nil {
				i := next.Add(1)
				if i%every == 0 {
					head, err := st.Head(ctx)
					if err != nil {
						errs[w] = err
						return
					}
					if head.Seq >= n {
						done.Store(true)
						return
					}
				}
				if err := evidenceRound(ctx, g, run, i); err != nil {
					errs[w] = err
					done.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}
