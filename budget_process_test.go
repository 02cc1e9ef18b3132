package latch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// racePolicy gives each agent 1000 of amount a day on payout.send.
const racePolicy = `
schema: latch.policy/v1
actions:
  payout.send:
    effect: "payout:{payout_id}"
    arguments:
      payout_id: {type: string}
      amount: {type: integer}
    decision: allow
    budgets:
      - {metric: amount, limit: 1000, window: P1D, per: agent}
`

// The helper process of TestBudgetProcessRace: a guard that makes Calls payouts of Amount as
// agent racer, each with its own effect key, and prints one line per call: "ok AMOUNT" or
// "refused REASON". TestMain runs it instead of the tests when budgetChildEnv is set.
const budgetChildEnv = "LATCH_TEST_BUDGET_CHILD"

func init() { children[budgetChildEnv] = budgetChild }

func budgetChild(spec string) error {
	var c struct {
		Store, Start, Name string
		Calls              int
		Amount             int64
	}
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		return err
	}
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "racer"})
	p, err := policy.Parse("latch.yaml", []byte(racePolicy))
	if err != nil {
		return err
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: c.Store})
	if err != nil {
		return err
	}
	defer g.Close()
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); { // the others, to race
		if _, err := os.Stat(c.Start); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for i := range c.Calls {
		args := fmt.Sprintf(`{"payout_id":"%s-%d","amount":%d}`, c.Name, i, c.Amount)
		_, err := g.Execute(ctx, &latch.Call{Action: "payout.send", Arguments: json.RawMessage(args)},
			func(context.Context, json.RawMessage) (any, error) { return "paid", nil })
		var be *latch.BudgetError
		switch {
		case err == nil:
			fmt.Fprintf(out, "ok %d\n", c.Amount)
		case errors.As(err, &be):
			fmt.Fprintf(out, "refused %s\n", be.Reason)
		default:
			return fmt.Errorf("payout %d: %w", i, err)
		}
	}
	return nil
}

// TestBudgetProcessRace: four OS processes race payouts of one agent, each under its own effect
// key, against one budget of 1000 a day. The budget is checked and charged inside each
// reservation's transaction, so however the calls interleave across processes exactly 1000 is
// admitted — never more, never less while calls remain — and every other call is refused
// budget_exhausted; the ledger holds exactly the admitted charges.
func TestBudgetProcessRace(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t, backend, "latch_budget")
			p, err := policy.Parse("latch.yaml", []byte(racePolicy))
			if err != nil {
				t.Fatal(err)
			}
			g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: url}) // migrates the store first
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			const procs, calls, amount, limit = 4, 20, 25, 1000 // 2000 asked for, 1000 allowed
			start := filepath.Join(t.TempDir(), "start")
			cmds, outs := startChildren(t, budgetChildEnv, procs, func(i int) any {
				return map[string]any{"Store": url, "Start": start, "Name": fmt.Sprintf("p%d", i), "Calls": calls, "Amount": amount}
			})
			if err := os.WriteFile(start, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			admitted, refused, perProc := int64(0), 0, make([]int, procs)
			for i, lines := range waitChildren(t, cmds, outs) {
				for _, line := range lines {
					var what, v string
					if _, err := fmt.Sscan(line, &what, &v); err != nil {
						t.Fatalf("process %d line %q: %v", i, line, err)
					}
					switch {
					case what == "ok":
						admitted += amount
						perProc[i]++
					case what == "refused" && v == "budget_exhausted":
						refused++
					default:
						t.Errorf("process %d: %s", i, line)
					}
				}
			}
			if admitted != limit || refused != procs*calls-limit/amount {
				t.Errorf("admitted %d in %d calls, refused %d; want exactly %d admitted, %d refused budget_exhausted (per process %v)",
					admitted, int(admitted/amount), refused, limit, procs*calls-limit/amount, perProc)
			}
			rows, err := g.Store().(store.BudgetStore).Charges(t.Context(), store.ChargeFilter{})
			if err != nil {
				t.Fatal(err)
			}
			var charged int64
			for _, r := range rows {
				if r.ReleasedAt.IsZero() {
					charged += r.Amount
				}
			}
			if charged != limit || len(rows) != limit/amount {
				t.Errorf("ledger holds %d in %d rows, want %d in %d", charged, len(rows), limit, limit/amount)
			}
			t.Logf("%s: admitted per process %v", backend, perProc)
			verifyChain(t, g)
		})
	}
}
