package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// Fault kinds the soak injects, as written to the injection ledger.
const (
	FaultNone          = "none"           // the executor runs and returns its result
	FaultExecutorError = "executor_error" // runs, then returns an error: the reply was lost
	FaultNotExecuted   = "not_executed"   // does not run, says so with latch.NotExecuted
	FaultPanic         = "panic"          // runs, then panics
	FaultTimeout       = "timeout"        // runs, then waits for its own deadline and returns it
	FaultLeaseLapse    = "lease_lapse"    // runs past a 40 ms lease while a contender arrives
	FaultStoreError    = "store_error"    // observed: a call failed in the store (cut connections)
	FaultConnCut       = "conn_cut"       // the proxy in front of PostgreSQL dropped connections
)

// blocking lists the faults that can leave an effect executing or ambiguous: what an
// attribution may name.
var blocking = map[string]bool{
	FaultExecutorError: true, FaultPanic: true, FaultTimeout: true, FaultLeaseLapse: true, FaultStoreError: true,
}

// Injection is one line of the injection ledger.
type Injection struct {
	Kind   string `json:"kind"`
	Key    string `json:"key,omitempty"` // the effect key it was injected on (none for conn_cut)
	PID    int    `json:"pid"`
	Time   int64  `json:"t"`
	Detail string `json:"detail,omitempty"`
}

// ReadInjections reads the injection ledger at path.
func ReadInjections(path string) ([]Injection, error) {
	return readLines[Injection](path)
}

// Attribute builds the soak's attribution from its injection ledger: a blocked key is explained
// by the first fault injected on it that can leave a key blocked.
func Attribute(injections []Injection) Attribution {
	by := map[string]string{}
	for _, in := range injections {
		if blocking[in.Kind] && in.Key != "" && by[in.Key] == "" {
			by[in.Key] = in.Kind
		}
	}
	return func(key string) string { return by[key] }
}

// soakRun is what one soak driver process is told.
type soakRun struct {
	Name       string `json:"name"`
	Until      int64  `json:"until"`   // unix nanoseconds: no call starts after it
	Workers    int    `json:"workers"` // goroutines
	Seed       uint64 `json:"seed"`
	StoreFault bool   `json:"store_fault"` // connections are cut: a store error is an injection, not a defect
}

// SoakStats is what a soak driver reports on stdout when it ends.
type SoakStats struct {
	Calls      int            `json:"calls"`
	Outcomes   map[string]int `json:"outcomes"`
	Injected   map[string]int `json:"injected"`
	Unexpected []string       `json:"unexpected"` // calls that ended otherwise than their fault allows
}

func newStats() SoakStats {
	return SoakStats{Outcomes: map[string]int{}, Injected: map[string]int{}}
}

// soaker is one soak driver process.
type soaker struct {
	spec  *childSpec
	run   *soakRun
	g     *latch.Guard
	execs *Ledger
	injs  *Ledger
	mu    sync.Mutex
	stats SoakStats
}

// soak runs the soak role: Workers goroutines of mixed calls until Until.
func (c *childSpec) soak(ctx context.Context) error {
	run := c.Soak
	var g *latch.Guard
	var err error
	for try := 0; try < 20; try++ { // the proxy may cut a connection while the store opens
		st, oerr := latch.OpenStore(ctx, c.URL, nil)
		if err = oerr; err == nil {
			if g, err = openGuard(ctx, st); err == nil {
				break
			}
			st.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	defer g.Close()
	s := &soaker{spec: c, run: run, g: g, stats: newStats()}
	if s.execs, err = OpenLedger(c.path(executionsFile), true); err != nil {
		return err
	}
	defer s.execs.Close()
	if s.injs, err = OpenLedger(c.path(injectionsFile), false); err != nil {
		return err
	}
	defer s.injs.Close()

	ctx = latch.WithPrincipal(ctx, principal)
	var wg sync.WaitGroup
	for w := range run.Workers {
		wg.Go(func() {
			s.worker(ctx, rand.New(rand.NewPCG(run.Seed, uint64(w))), fmt.Sprintf("%s.%d", run.Name, w))
		})
	}
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(s.stats)
}

// worker makes calls until the deadline: most pay an effect, some under an injected fault, some
// repeat a recent key, some contend for keys shared by every process, some go through an
// approval (and replay it), some are denied.
func (s *soaker) worker(ctx context.Context, r *rand.Rand, name string) {
	var recent []string
	n := 0
	for time.Now().UnixNano() < s.run.Until {
		n++
		var key string
		switch p := r.IntN(100); {
		case p < 60 || len(recent) == 0:
			key = name + "-" + strconv.Itoa(n)
			recent = append(recent, key)
			if len(recent) > 32 {
				recent = recent[1:]
			}
		case p < 85: // contended by every process: a new set of 8 keys every 100 ms
			key = fmt.Sprintf("shared-%d-%d", time.Now().UnixMilli()/100, r.IntN(8))
		default:
			key = recent[r.IntN(len(recent))]
		}
		switch p := r.IntN(100); {
		case p < 5:
			s.approved(ctx, name+"-apr-"+strconv.Itoa(n))
		case p < 10:
			s.call(ctx, ActionForbidden, key, FaultNone, nil)
		default:
			s.call(ctx, ActionPay, key, pickFault(r), nil)
		}
	}
}

// pickFault chooses the fault of one call: about one call in five carries one.
func pickFault(r *rand.Rand) string {
	switch p := r.IntN(100); {
	case p < 5:
		return FaultNotExecuted
	case p < 9:
		return FaultExecutorError
	case p < 12:
		return FaultPanic
	case p < 15:
		return FaultTimeout
	case p < 17:
		return FaultLeaseLapse
	}
	return FaultNone
}

// allowed lists, for each fault, the outcomes a call under it may end in besides a refusal
// (another attempt held or settled the key first, so the fault was never injected).
var allowed = map[string][]string{
	FaultNone:          {"committed"},
	FaultExecutorError: {"ambiguous"},
	FaultNotExecuted:   {"not_executed"},
	FaultPanic:         {"panic"},
	FaultTimeout:       {"ambiguous"},
	FaultLeaseLapse:    {"committed"}, // the holder's late outcome settles its own attempt
}

// call makes one call of action on key under fault and accounts for its outcome. storeFailed
// reports that the store, not the executor, decided how the call ended: the reservation or the
// record of the outcome failed (a cut connection).
func (s *soaker) call(ctx context.Context, action, key, fault string, presented *string) (outcome string, storeFailed bool, err error) {
	ekey := EffectKey(action, key)
	lease := time.Duration(0)
	if fault == FaultLeaseLapse {
		lease = 40 * time.Millisecond
	}
	if presented != nil {
		ctx = latch.WithApproval(ctx, *presented)
	}
	ran, contended := false, true
	var execErr error
	defer func() {
		if p := recover(); p != nil {
			outcome, err = "panic", fmt.Errorf("%v", p)
			if fault != FaultPanic || !ran {
				outcome = "unexpected_panic"
			} else if !s.recorded(ekey) {
				// latch re-raises the panic even when the outcome could not be recorded (a cut
				// connection): the key is left executing, and no receipt was written.
				outcome, err = "error", errors.Join(err, errors.New("the panic's outcome was not recorded"))
			}
		}
		// Whether or not a contender saw the lapse, the holder's own outcome settles its attempt.
		_ = contended
		outcome, storeFailed = s.account(action, ekey, fault, ran, execErr, outcome, err)
	}()
	_, err = s.g.Execute(ctx, &latch.Call{Action: action, Arguments: args(key), Options: &latch.Options{Lease: lease}},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			ran = true
			execErr, contended = s.execute(ctx, action, key, ekey, fault)
			return "paid", execErr
		})
	return Outcome(err), false, err
}

// execute is the executor of a soak call: it injects fault (writing it to the injection ledger
// first) and appends every real execution to the execution ledger before it returns. contended
// is false when a lease-lapse contender failed in the store, so that nobody saw the lapse.
func (s *soaker) execute(ctx context.Context, action, key, ekey, fault string) (err error, contended bool) {
	if fault != FaultNone {
		s.inject(fault, ekey, "")
	}
	if fault == FaultNotExecuted {
		return latch.NotExecuted(errors.New("injected: the remote refused")), true
	}
	if err := s.execs.Append(Execution{Key: ekey, Token: latch.IdempotencyToken(ctx), PID: os.Getpid(), Time: now()}); err != nil {
		return err, true
	}
	switch fault {
	case FaultExecutorError:
		return errors.New("injected: the reply was lost"), true
	case FaultPanic:
		panic("injected panic")
	case FaultTimeout:
		tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		<-tctx.Done()
		return tctx.Err(), true
	case FaultLeaseLapse:
		time.Sleep(100 * time.Millisecond)
		// A contender arrives after the lease lapsed: it must be refused, and must not run.
		o, failed, err := s.call(ctx, action, key, FaultNone, nil)
		if failed {
			return nil, false
		}
		if o != "refused_ambiguous" {
			s.unexpected(fmt.Sprintf("%s: contender after a lapsed lease = %s (%v), want refused_ambiguous", ekey, o, err))
		}
	}
	return nil, true
}

// recorded reports whether a call whose executor panicked had its outcome recorded: the key is
// no longer executing. A store that cannot be read counts as not recorded.
func (s *soaker) recorded(ekey string) bool {
	e, err := s.g.Store().Effect(context.Background(), ekey)
	return err == nil && e.State != store.Executing
}

// approved runs the approval flow on a fresh key: the request, a human's grant, the call that
// spends it, and a replay that must be refused.
func (s *soaker) approved(ctx context.Context, key string) {
	o, failed, err := s.call(ctx, ActionApproved, key, FaultNone, nil)
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) {
		if !failed {
			s.unexpected(fmt.Sprintf("approved %s: first call = %s (%v), want approval_required", key, o, err))
		}
		return
	}
	if _, err := s.g.Approve(ctx, req.ApprovalID, "campaign-approver"); err != nil {
		s.observe(EffectKey(ActionApproved, key), "approve", err)
		return
	}
	if o, failed, err := s.call(ctx, ActionApproved, key, FaultNone, &req.ApprovalID); o != "committed" {
		if !failed {
			s.unexpected(fmt.Sprintf("approved %s: call with the granted approval = %s (%v)", key, o, err))
		}
		return
	}
	if o, failed, err := s.call(ctx, ActionApproved, key, FaultNone, &req.ApprovalID); o != "approval_consumed" && !failed {
		s.unexpected(fmt.Sprintf("approved %s: replayed approval = %s (%v), want approval_consumed", key, o, err))
	}
}

// account counts a call's outcome and checks it against its fault. ran and execErr say whether
// the executor ran and what it returned. It returns the outcome as counted and whether the store
// decided it.
func (s *soaker) account(action, ekey, fault string, ran bool, execErr error, outcome string, err error) (string, bool) {
	// The store decided the outcome when the call failed before its executor ran, when the
	// outcome of an ambiguous call went unrecorded, when a NotExecuted call came back with more
	// than the executor's own error (its failure could not be recorded), or when a refusal came
	// back joined with the failure to record it.
	var amb *latch.AmbiguousError
	var joined interface{ Unwrap() []error }
	var storeFailed bool
	switch {
	case outcome == "error":
		storeFailed = true
	case errors.As(err, &amb):
		storeFailed = amb.Unrecorded != nil
	case outcome == "not_executed":
		storeFailed = err != execErr
	default:
		storeFailed = errors.As(err, &joined)
	}
	if storeFailed {
		outcome = "store_error"
	}
	s.mu.Lock()
	s.stats.Calls++
	s.stats.Outcomes[outcome]++
	s.mu.Unlock()
	switch {
	case storeFailed:
		s.observe(ekey, action, err)
	case action == ActionForbidden:
		if outcome != "denied" {
			s.unexpected(fmt.Sprintf("%s: forbidden call = %s (%v)", ekey, outcome, err))
		}
	case action == ActionApproved:
		// judged by approved
	case strings.HasPrefix(outcome, "refused_") && !ran:
		// another attempt held or settled the key: the fault never ran
	case !slices.Contains(allowed[fault], outcome):
		s.unexpected(fmt.Sprintf("%s: call under %s = %s (%v)", ekey, fault, outcome, err))
	}
	return outcome, storeFailed
}

// observe handles a call that failed in the store. With cut connections it is an injection of
// its own (the key may be left reserved, or its outcome unrecorded); without, it is a defect.
func (s *soaker) observe(ekey, what string, err error) {
	if s.run.StoreFault {
		s.inject(FaultStoreError, ekey, what+": "+err.Error())
		return
	}
	s.unexpected(fmt.Sprintf("%s: %s: store error: %v", ekey, what, err))
}

// inject writes an injection to the ledger (before it takes effect) and counts it.
func (s *soaker) inject(kind, ekey, detail string) {
	if err := s.injs.Append(Injection{Kind: kind, Key: ekey, PID: os.Getpid(), Time: now(), Detail: detail}); err != nil {
		s.unexpected("injection ledger: " + err.Error())
	}
	s.mu.Lock()
	s.stats.Injected[kind]++
	s.mu.Unlock()
}

func (s *soaker) unexpected(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.stats.Unexpected) < 50 {
		s.stats.Unexpected = append(s.stats.Unexpected, what)
	}
	s.stats.Outcomes["unexpected"]++
}
