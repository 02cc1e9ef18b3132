package latch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"go.uber.org/goleak"
)

// ambiguousCharge runs a charge whose executor loses its reply: its own attempt records the
// effect ambiguous (its holder reported, so nothing it does later can change what happened).
func ambiguousCharge(t *testing.T, g *latch.Guard, invoice string) {
	t.Helper()
	lost := latch.Protect(g, "billing.charge", func(context.Context, Charge) (string, error) {
		return "", errors.New("reply lost")
	}, nil)
	if _, err := lost(agent(t.Context()), Charge{InvoiceID: invoice, Amount: 100}); !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatalf("charge %s = %v, want ambiguous", invoice, err)
	}
}

// resolutionBy returns who the last resolution record of key names, "" when there is none.
func resolutionBy(t *testing.T, g *latch.Guard, key string) string {
	t.Helper()
	by := ""
	for r, err := range g.Store().Receipts(t.Context(), store.ReceiptFilter{EffectKey: key}) {
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Kind, By string }
		if err := json.Unmarshal(r.Doc, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Kind == "resolution" {
			by = doc.By
		}
	}
	return by
}

func eventKinds(t *testing.T, g *latch.Guard, key string) []string {
	t.Helper()
	evs, err := g.Store().Events(t.Context(), store.EventFilter{EffectKey: key})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

// TestSweepReconciles: an ambiguous effect whose action has a reconcile hook is resolved by the
// sweeper alone — "not executed" makes it failed and the next call runs it, "committed" stores
// the hook's result for duplicates — each with a resolution record naming the hook. Before the
// sweeper asked hooks, the effect stayed ambiguous until a call met the key.
func TestSweepReconciles(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			ambiguousCharge(t, e.g, "inv_1")
			ambiguousCharge(t, e.g, "inv_2")
			var asked atomic.Int32
			hook := latch.Reconciler(func(_ context.Context, a *latch.Attempt, c Charge) (latch.Outcome, string, error) {
				asked.Add(1)
				if a.HolderMayAct || a.Number != 1 {
					return latch.OutcomeUnknown, "", fmt.Errorf("attempt %+v", a)
				}
				if c.InvoiceID == "inv_1" {
					return latch.OutcomeNotExecuted, "", nil
				}
				return latch.OutcomeCommitted, "ch_" + c.InvoiceID, nil
			})
			ran := 0
			charge := latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) {
				ran++
				return "ch_new", nil
			}, &latch.Options{Reconcile: hook}) // registers the hook for the sweeper

			rep, err := e.g.Sweep(t.Context())
			if err != nil {
				t.Fatalf("Sweep() = %v", err)
			}
			if len(rep.Reconciled) != 2 || asked.Load() != 2 {
				t.Fatalf("Sweep() reconciled %+v (hook asked %d times), want both effects", rep.Reconciled, asked.Load())
			}
			for _, r := range rep.Reconciled {
				want := map[string]store.State{"charge:inv_1": store.Failed, "charge:inv_2": store.Committed}[r.EffectKey]
				if r.Resolved != want || r.Try != 1 || r.Action != "billing.charge" || r.Refused != "" {
					t.Errorf("reconciliation %+v, want resolved %s on try 1", r, want)
				}
			}
			for key, want := range map[string]store.State{"charge:inv_1": store.Failed, "charge:inv_2": store.Committed} {
				eff, err := e.g.Store().Effect(t.Context(), key)
				if err != nil || eff.State != want || eff.ResolvedBy != "reconcile:billing.charge" {
					t.Fatalf("Effect(%s) = %+v, %v, want %s resolved by reconcile:billing.charge", key, eff, err, want)
				}
				if by := resolutionBy(t, e.g, key); by != "reconcile:billing.charge" {
					t.Errorf("resolution record of %s by %q, want reconcile:billing.charge", key, by)
				}
				kinds := eventKinds(t, e.g, key)
				if !slices.Contains(kinds, store.EventReconcileStarted) || !slices.Contains(kinds, store.EventReconcileResolved) ||
					!slices.Contains(kinds, store.EventEffectResolved) {
					t.Errorf("events of %s = %v, want reconcile_started, reconcile_resolved, effect_resolved", key, kinds)
				}
			}
			verifyChain(t, e.g)

			// Nothing left to ask; the calls go on without a hand resolution.
			if rep, err := e.g.Sweep(t.Context()); err != nil || len(rep.Reconciled) != 0 {
				t.Errorf("second Sweep() = %+v, %v, want nothing asked", rep, err)
			}
			if got, err := charge(agent(t.Context()), Charge{InvoiceID: "inv_1", Amount: 100}); err != nil || got != "ch_new" || ran != 1 {
				t.Errorf("charge inv_1 after the sweep = %q, %v (ran %d), want it run once", got, err, ran)
			}
			_, err = charge(agent(t.Context()), Charge{InvoiceID: "inv_2", Amount: 100})
			res, _ := latch.ResultOf[string](err)
			if !errors.Is(err, latch.ErrAlreadyCommitted) || res != "ch_inv_2" || ran != 1 {
				t.Errorf("charge inv_2 after the sweep = %v (result %q, ran %d), want a duplicate of the hook's ch_inv_2", err, res, ran)
			}
		})
	}
}

// TestSweepLapsedLease: a lease that lapsed is written ambiguous by the sweeper and its hook
// asked; the holder may still act, so "not executed" is not applied (the effect stays ambiguous
// and is asked again later), while "committed" is.
func TestSweepLapsedLease(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			ctx := agent(t.Context())
			for _, inv := range []string{"inv_1", "inv_2"} {
				if _, err := e.g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: fmt.Appendf(nil, `{"invoice_id":%q,"amount":100}`, inv)}); err != nil {
					t.Fatal(err)
				}
			}
			e.clock.Add(latch.DefaultLease + time.Second)
			e.g.RegisterReconcile("billing.charge", latch.Reconciler(func(_ context.Context, a *latch.Attempt, c Charge) (latch.Outcome, any, error) {
				if !a.HolderMayAct {
					return latch.OutcomeUnknown, nil, errors.New("want a holder that may act")
				}
				if c.InvoiceID == "inv_1" {
					return latch.OutcomeNotExecuted, nil, nil
				}
				return latch.OutcomeCommitted, nil, nil
			}))
			rep, err := e.g.Sweep(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Lapsed) != 2 || len(rep.Reconciled) != 2 {
				t.Fatalf("Sweep() = %+v, want both leases lapsed and both asked", rep)
			}
			for _, r := range rep.Reconciled {
				switch r.EffectKey {
				case "charge:inv_1":
					if r.Answer != latch.OutcomeNotExecuted || r.Resolved != "" || r.Refused != "holder_may_act" || r.NextAt.IsZero() {
						t.Errorf("lapsed inv_1: %+v, want not_executed refused holder_may_act, asked again later", r)
					}
				case "charge:inv_2":
					if r.Resolved != store.Committed {
						t.Errorf("lapsed inv_2: %+v, want resolved committed", r)
					}
				}
			}
			if eff, _ := e.g.Store().Effect(t.Context(), "charge:inv_1"); eff.State != store.Ambiguous {
				t.Errorf("inv_1 = %s, want still ambiguous (its holder may act)", eff.State)
			}
			if eff, _ := e.g.Store().Effect(t.Context(), "charge:inv_2"); eff.State != store.Committed || eff.ResolvedBy != "reconcile:billing.charge" {
				t.Errorf("inv_2 = %+v, want committed by the hook", eff)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestSweepHookBounded: a hook that errors, panics or hangs counts as unknown; one that hangs
// is given up at its deadline (the sweep returns), and it is not asked again in this process
// until it returns; the effect stays ambiguous, is asked again only after the backoff, then
// after twice the backoff, and each pass asks at most MaxReconciles hooks.
func TestSweepHookBounded(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			for _, inv := range []string{"err", "panic", "hang"} {
				ambiguousCharge(t, e.g, inv)
			}
			release := make(chan struct{})
			var mu sync.Mutex
			asked := map[string]int{}
			e.g.RegisterReconcile("billing.charge", latch.Reconciler(func(_ context.Context, _ *latch.Attempt, c Charge) (latch.Outcome, any, error) {
				mu.Lock()
				asked[c.InvoiceID]++
				mu.Unlock()
				switch c.InvoiceID {
				case "err":
					return latch.OutcomeNotExecuted, nil, errors.New("provider unreachable")
				case "panic":
					panic("hook bug")
				}
				<-release // hangs, deaf to its context
				return latch.OutcomeUnknown, nil, errors.New("still cannot tell")
			}))
			cfg := &latch.SweepConfig{HookTimeout: 200 * time.Millisecond, Backoff: time.Minute, MaxBackoff: time.Hour}
			start := time.Now()
			rep, err := e.g.SweepWith(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("a sweep with a hanging hook took %v", d)
			}
			if len(rep.Reconciled) != 3 {
				t.Fatalf("reconciled %+v, want 3", rep.Reconciled)
			}
			for _, r := range rep.Reconciled {
				if r.Answer != latch.OutcomeUnknown || r.Resolved != "" || r.Error == "" || r.Try != 1 {
					t.Errorf("%s: %+v, want unknown with its error, try 1", r.EffectKey, r)
				}
				// The hold (deadline and margin) is shorter than the backoff: next in a minute.
				if want := e.clock.Now().Add(time.Minute); !r.NextAt.Equal(want) {
					t.Errorf("%s: next ask at %v, want %v", r.EffectKey, r.NextAt, want)
				}
			}
			if r := rep.Reconciled[slices.IndexFunc(rep.Reconciled, func(r latch.Reconciliation) bool { return r.EffectKey == "charge:hang" })]; !strings.Contains(r.Error, "did not answer within 200ms") {
				t.Errorf("hanging hook's error = %q, want its deadline named", r.Error)
			}
			for _, key := range []string{"charge:err", "charge:panic", "charge:hang"} {
				if eff, _ := e.g.Store().Effect(t.Context(), key); eff.State != store.Ambiguous {
					t.Errorf("%s = %s after an unknown answer, want ambiguous", key, eff.State)
				}
				if !slices.Contains(eventKinds(t, e.g, key), store.EventReconcileStarted) {
					t.Errorf("%s: the unknown answer left no reconcile_started event", key)
				}
			}
			counts := func() map[string]int {
				mu.Lock()
				defer mu.Unlock()
				return map[string]int{"err": asked["err"], "panic": asked["panic"], "hang": asked["hang"]}
			}
			sweep := func(what string, want map[string]int) {
				t.Helper()
				if _, err := e.g.SweepWith(t.Context(), cfg); err != nil {
					t.Fatal(err)
				}
				if got := counts(); !mapsEqual(got, want) {
					t.Errorf("%s: hook asked %v, want %v", what, got, want)
				}
			}
			sweep("at once", map[string]int{"err": 1, "panic": 1, "hang": 1})
			e.clock.Add(59 * time.Second)
			sweep("before the backoff", map[string]int{"err": 1, "panic": 1, "hang": 1})
			e.clock.Add(time.Second)
			// The hanging hook has not returned: this process does not ask about it again.
			sweep("after the backoff", map[string]int{"err": 2, "panic": 2, "hang": 1})
			close(release)
			e.clock.Add(time.Minute)
			// Once it has returned, it is asked again (err and panic are not due: their wait doubled).
			for deadline := time.Now().Add(5 * time.Second); counts()["hang"] < 2 && time.Now().Before(deadline); {
				if _, err := e.g.SweepWith(t.Context(), cfg); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			sweep("a minute later (the wait doubled)", map[string]int{"err": 2, "panic": 2, "hang": 2})
			e.clock.Add(time.Minute)
			sweep("two minutes later", map[string]int{"err": 3, "panic": 3, "hang": 2})

			// At most MaxReconciles a pass; the rest wait, counted.
			e.clock.Add(time.Hour)
			rep, err = e.g.SweepWith(t.Context(), &latch.SweepConfig{MaxReconciles: 1, HookTimeout: time.Second})
			if err != nil || len(rep.Reconciled) != 1 || rep.Deferred != 2 {
				t.Errorf("SweepWith(MaxReconciles 1) = %+v, %v, want 1 asked and 2 deferred", rep, err)
			}
		})
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The helper process of TestSweepProcesses: a sweeper with a hook that writes when each ask
// starts and ends to a ledger. TestMain runs it instead of the tests when sweepChildEnv is set.
const sweepChildEnv = "LATCH_TEST_SWEEP_CHILD"

func init() { children[sweepChildEnv] = sweepChild }

func TestMain(m *testing.M) {
	runChild()
	goleak.VerifyTestMain(m) // guards, sweepers and sink writers all end with their test
}

func sweepChild(spec string) error {
	var c struct {
		Store, Ledger, Start string
		Sweep                time.Duration
	}
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		return err
	}
	ctx := context.Background()
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		return err
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: c.Store})
	if err != nil {
		return err
	}
	defer g.Close()
	ledger, err := os.OpenFile(c.Ledger, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer ledger.Close()
	note := func(what, key string) {
		// One write per line, O_APPEND: lines of several processes never interleave.
		_, _ = fmt.Fprintf(ledger, "%s %s %d %d\n", what, key, os.Getpid(), time.Now().UnixNano())
	}
	g.RegisterReconcile("billing.charge", latch.Reconciler(func(_ context.Context, a *latch.Attempt, ch Charge) (latch.Outcome, any, error) {
		note("start", a.EffectKey)
		time.Sleep(20 * time.Millisecond)
		defer note("end", a.EffectKey)
		n, _ := strconv.Atoi(strings.TrimPrefix(ch.InvoiceID, "inv_"))
		if n%2 == 0 {
			return latch.OutcomeNotExecuted, nil, nil
		}
		return latch.OutcomeUnknown, nil, nil
	}))
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); { // the others, to race
		if _, err := os.Stat(c.Start); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for end := time.Now().Add(c.Sweep); time.Now().Before(end); {
		if _, err := g.SweepWith(ctx, &latch.SweepConfig{HookTimeout: 5 * time.Second}); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// TestSweepProcesses: three OS processes sweep one store with the same hook. Each ambiguous
// effect's hook is asked exactly once (the claim keeps the others out, and an "unknown" is not
// asked again before its backoff), never by two processes at once; "not executed" resolves.
func TestSweepProcesses(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t, backend, "latch_sweep")
			p, err := policy.Parse("latch.yaml", []byte(testPolicy))
			if err != nil {
				t.Fatal(err)
			}
			g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: url})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			const effects = 12
			for i := range effects {
				ambiguousCharge(t, g, fmt.Sprintf("inv_%d", i))
			}
			dir := t.TempDir()
			ledger, start := filepath.Join(dir, "ledger"), filepath.Join(dir, "start")
			spec := map[string]any{"Store": url, "Ledger": ledger, "Start": start, "Sweep": 1500 * time.Millisecond}
			cmds, outs := startChildren(t, sweepChildEnv, 3, func(int) any { return spec })
			if err := os.WriteFile(start, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			waitChildren(t, cmds, outs)
			f, err := os.Open(ledger)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			type span struct {
				pid        string
				start, end int64
			}
			spans := map[string][]*span{}
			pids := map[string]bool{}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var what, key, pid string
				var at int64
				if _, err := fmt.Sscan(sc.Text(), &what, &key, &pid, &at); err != nil {
					t.Fatalf("ledger line %q: %v", sc.Text(), err)
				}
				pids[pid] = true
				if what == "start" {
					spans[key] = append(spans[key], &span{pid: pid, start: at})
					continue
				}
				for _, s := range spans[key] {
					if s.pid == pid && s.end == 0 {
						s.end = at
					}
				}
			}
			for i := range effects {
				key := fmt.Sprintf("charge:inv_%d", i)
				if n := len(spans[key]); n != 1 {
					t.Errorf("%s: hook asked %d times across the processes, want once", key, n)
				}
				for a, s := range spans[key] {
					for _, o := range spans[key][a+1:] {
						if s.start < o.end && o.start < s.end {
							t.Errorf("%s: asked by %s and %s at once", key, s.pid, o.pid)
						}
					}
				}
				want := store.Ambiguous
				if i%2 == 0 {
					want = store.Failed
				}
				if eff, err := g.Store().Effect(t.Context(), key); err != nil || eff.State != want {
					t.Errorf("%s = %+v, %v, want %s", key, eff, err, want)
				}
			}
			t.Logf("%d sweeping processes asked hooks", len(pids))
			verifyChain(t, g)
		})
	}
}
