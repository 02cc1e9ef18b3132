package campaign

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// Step is a point of the pipeline where the crash matrix kills its driver.
type Step string

// The steps of the crash matrix, in pipeline order.
const (
	BeforeReserve Step = "before_reserve" // decided, the reservation not yet sent
	AfterReserve  Step = "after_reserve"  // the reservation committed, the executor not started
	InExecutor    Step = "in_executor"    // the effect ran (ledger written), the executor has not returned
	AfterExecute  Step = "after_execute"  // the executor returned, the outcome not yet sent
	AfterRecord   Step = "after_record"   // the outcome and receipt committed, the caller not yet answered
)

// Steps lists the crash matrix's steps in pipeline order.
var Steps = []Step{BeforeReserve, AfterReserve, InExecutor, AfterExecute, AfterRecord}

// reachedFile is the marker a crash driver writes (and fsyncs) just before it kills itself: the
// parent reads it to know the kill happened at the step and not somewhere else.
func reachedFile(step Step) string { return "reached-" + string(step) }

// killer SIGKILLs the driver process at its step. It wraps the real store (the guard is given it
// through Config.Store, as any program could do): the kill happens between the pipeline and the
// database, exactly before or after the transaction of the step, with nothing mocked.
type killer struct {
	store.Store
	spec *childSpec
}

func (k *killer) Reserve(ctx context.Context, req *store.ReserveRequest) (*store.ReserveResult, error) {
	k.at(BeforeReserve)
	res, err := k.Store.Reserve(ctx, req)
	if err == nil && res.Reserved {
		k.at(AfterReserve)
	}
	return res, err
}

func (k *killer) Record(ctx context.Context, req *store.RecordRequest) (*store.RecordResult, error) {
	if req.EffectKey != "" {
		k.at(AfterExecute)
	}
	res, err := k.Store.Record(ctx, req)
	if err == nil && req.EffectKey != "" {
		k.at(AfterRecord)
	}
	return res, err
}

// at kills the process if step is the driver's step.
func (k *killer) at(step Step) {
	if k.spec.Role != roleCrash || k.spec.Step != step {
		return
	}
	if f, err := os.Create(k.spec.path(reachedFile(step))); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = p.Kill() // SIGKILL: no deferred function, no Close, no flush runs
	}
	panic(fmt.Sprintf("campaign: kill at %s: %v", step, err)) // unreachable once the kill lands
}

// callResult is one line a crash or retry driver prints on stdout.
type callResult struct {
	Key     string `json:"key"`
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// crash runs the crash, retry and loop roles: calls of campaign.pay on the spec's keys (or on
// Prefix-0, Prefix-1, … for ever), each executor appending to the execution ledger before it
// returns.
func (c *childSpec) crash(ctx context.Context) error {
	st, err := latch.OpenStore(ctx, c.URL, nil)
	if err != nil {
		return err
	}
	k := &killer{Store: st, spec: c}
	g, err := openGuard(ctx, k)
	if err != nil {
		st.Close()
		return err
	}
	defer g.Close()
	execs, err := OpenLedger(c.path(executionsFile), true)
	if err != nil {
		return err
	}
	defer execs.Close()
	ctx = latch.WithPrincipal(ctx, principal)
	out := json.NewEncoder(os.Stdout)
	call := func(key string) error {
		_, err := g.Execute(ctx, &latch.Call{Action: ActionPay, Arguments: args(key)},
			func(ctx context.Context, _ json.RawMessage) (any, error) {
				if err := execs.Append(Execution{Key: EffectKey(ActionPay, key), Token: latch.IdempotencyToken(ctx), PID: os.Getpid(), Time: now()}); err != nil {
					return nil, err // unknown whether the line landed: ambiguous, never failed
				}
				k.at(InExecutor)
				return "paid", nil
			})
		r := callResult{Key: key, Outcome: Outcome(err)}
		if err != nil {
			r.Error = err.Error()
		}
		return out.Encode(r)
	}
	if c.Role == roleLoop {
		if err := os.WriteFile(c.path("ready-"+c.Prefix), nil, 0o600); err != nil {
			return err
		}
		if c.Gate != "" {
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Millisecond) {
				if _, err := os.Stat(c.path(c.Gate)); err == nil {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("loop driver: gate %s not opened in 2 minutes", c.Gate)
				}
			}
		}
		for i := 0; ; i++ {
			if err := call(c.Prefix + "-" + strconv.Itoa(i)); err != nil {
				return err
			}
		}
	}
	for _, key := range c.Keys {
		if err := call(key); err != nil {
			return err
		}
	}
	return nil
}
