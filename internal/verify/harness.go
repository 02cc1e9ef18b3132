package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/storeurl"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// The principal every scenario proposes as, and the human who approves.
const (
	verifyAgent    = "latch-verify"
	verifyApprover = "latch-verify-approver"
)

// clock is the injected clock of one scenario: time moves only when the scenario moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// set moves the clock to t exactly (G8 needs it to the microsecond, backwards too).
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// setAfter moves the clock to just after t (never backwards).
func (c *clock) setAfter(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if next := t.Add(time.Millisecond); next.After(c.t) {
		c.t = next
	}
}

// runner holds what every scenario of one Run shares.
type runner struct {
	cfg *Config
	// lifted is the operator's policy with every budget's limit lifted out of reach
	// (liftBudgets): what every scenario but G22 runs, so that a small budget does not refuse
	// the calls another guarantee needs. It is cfg.Policy itself when nothing declares a budget.
	lifted *policy.Policy
	sp     *scenarioPolicy // lifted's scenario policy
	faults faultSet
	sc     *scratch
	start  time.Time // every scenario's clock starts here
	env    string    // the environment every call is made in
	tmp    string    // G4's shared directories and the racers' policy file
	dry    bool      // List's runner: newEnv stops every scenario with errDry
	// backend is the scheme of the operator's store URL (sqlite for ""): the kind of every
	// scratch store, known to List's runner too, which makes none.
	backend string
	envs    int // scratch environments opened so far (newEnv)
}

// errDry stops a scenario of List's dry runner at its first scratch environment: by then it has
// found the policy able to exercise its guarantee.
var errDry = errors.New("verify: dry run")

func newRunner(cfg *Config, faults faultSet, sc *scratch) (*runner, error) {
	lifted := liftBudgets(cfg.Policy)
	sp, err := newScenarioPolicy(lifted, nil, true)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "latch-verify-race-")
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	start := cfg.Now
	if start.IsZero() {
		start = time.Now()
	}
	place := cfg.StoreURL
	if place == "" {
		place = storeurl.DefaultPlace
	}
	return &runner{cfg: cfg, lifted: lifted, sp: sp, faults: faults, sc: sc, start: start.UTC().Truncate(time.Millisecond),
		env: environment(cfg.Policy), tmp: tmp, backend: store.Scheme(place)}, nil
}

// environment is the environment a guard over p defaults to (latch.Open's rule):
// $LATCH_ENVIRONMENT, else the policy's, else production. Grants may name environments, so the
// scenarios choose principals for it, and every guard, the racers' included, is given it.
func environment(p *policy.Policy) string {
	if env := os.Getenv("LATCH_ENVIRONMENT"); env != "" {
		return env
	}
	if p.Environment != "" {
		return p.Environment
	}
	return "production"
}

func (r *runner) close() {
	if r.tmp != "" {
		os.RemoveAll(r.tmp)
	}
}

// pol is the policy the scenarios run.
func (r *runner) pol() *policy.Policy { return r.sp.pol }

// withPrincipal returns ctx carrying principal p.
func withPrincipal(ctx context.Context, p latch.Principal) context.Context {
	return context.WithValue(latch.WithPrincipal(ctx, p), principalKey{}, p)
}

// env is one scenario's scratch store and the guard over it.
type env struct {
	r     *runner
	sp    *scenarioPolicy // the guard's policy, which G4's racers load too
	g     *latch.Guard
	st    store.Store // the backend itself, without any fault wrapper
	url   string
	clock *clock
}

// newEnv opens a guard with the scenario policy sp over a fresh scratch store.
func (r *runner) newEnv(ctx context.Context, name string, sp *scenarioPolicy) (*env, error) {
	return r.newEnvWith(ctx, name, sp, guardOptions{})
}

// newScopedEnv is newEnv with a scope provider for the guard (Config.Scope; nil: none), asked
// within scopeTimeout.
func (r *runner) newScopedEnv(ctx context.Context, name string, sp *scenarioPolicy, scope latch.ScopeFunc) (*env, error) {
	return r.newEnvWith(ctx, name, sp, guardOptions{scope: scope})
}

// guardOptions is what a scenario gives its guard beyond the policy, the store and the clock.
type guardOptions struct {
	scope latch.ScopeFunc // Config.Scope, asked within scopeTimeout; nil: none
	// tune sets the rest of the guard's configuration a scenario needs (its identity provider,
	// RequireApprovedPolicy…), given the scenario's clock.
	tune func(cfg *latch.Config, now func() time.Time)
}

// newEnvWith is newEnv with the guard options o.
func (r *runner) newEnvWith(ctx context.Context, name string, sp *scenarioPolicy, o guardOptions) (*env, error) {
	if r.dry {
		return nil, errDry
	}
	r.envs++
	u, err := r.sc.location(ctx, name)
	if err != nil {
		return nil, err
	}
	c := &clock{t: r.start}
	g, st, err := openGuard(ctx, sp.pol, u, r.env, c.Now, r.faults, o)
	if err != nil {
		return nil, err
	}
	return &env{r: r, sp: sp, g: g, st: st, url: u, clock: c}, nil
}

func (e *env) close() { e.g.Close() }

// openGuard opens the real pipeline over a scratch store, with the faults a test asked for.
func openGuard(ctx context.Context, pol *policy.Policy, url, env string, now func() time.Time, faults faultSet, o guardOptions) (*latch.Guard, store.Store, error) {
	if faults[faultExpiryOffByOne] {
		exact := now
		now = func() time.Time { return exact().Add(-time.Microsecond) }
	}
	cfg := &latch.Config{Policy: pol, StoreURL: url, Environment: env, Now: now}
	if scope := o.scope; scope != nil {
		if faults[faultScopeFailsOpen] {
			scope = failOpen(scope)
		}
		cfg.Scope, cfg.ScopeTimeout = scope, scopeTimeout
	}
	if faults[faultAnonymousPrincipal] {
		cfg.Identity = anonymousIdentity{}
	}
	if o.tune != nil {
		o.tune(cfg, now)
	}
	st, err := latch.OpenStore(ctx, url, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("open scratch store: %w", err)
	}
	cfg.Store = st
	cfg.ApproverRoles = newApproverAccounts(pol, faults)
	if faults.storeFaults() {
		cfg.Store = &faultStore{Store: st, faults: faults}
	}
	g, err := latch.Open(ctx, cfg)
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("open scratch guard: %w", err)
	}
	return g, st, nil
}

// executor is the function a protected call runs.
type executor = func(ctx context.Context, args json.RawMessage) (any, error)

// counter counts the executions of fake executors.
type counter struct{ n atomic.Int64 }

func (c *counter) count() int64 { return c.n.Load() }

// commit acts and succeeds.
func (c *counter) commit(ctx context.Context, args json.RawMessage) (any, error) {
	c.n.Add(1)
	return map[string]any{"verified": true}, nil
}

// actThenFail acts and then returns err, as an executor whose reply was lost does.
func (c *counter) actThenFail(err error) executor {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		c.n.Add(1)
		return nil, err
	}
}

// notExecuted says nothing happened, without acting.
func notExecuted(ctx context.Context, args json.RawMessage) (any, error) {
	return nil, latch.NotExecuted(errors.New("verify: the remote refused before acting"))
}

// exec runs variant v of pk through the pipeline as the pick's principal.
func (e *env) exec(ctx context.Context, pk *pick, v variant, fn executor) (*latch.Receipt, error) {
	return e.g.Execute(withPrincipal(ctx, pk.principal()), v.call(pk.Action), fn)
}

// execApproved is exec presenting an approval.
func (e *env) execApproved(ctx context.Context, approvalID string, pk *pick, v variant, fn executor) (*latch.Receipt, error) {
	return e.g.Execute(latch.WithApproval(withPrincipal(ctx, pk.principal()), approvalID), v.call(pk.Action), fn)
}

// execRecover is exec for an executor that panics: latch records the outcome and re-panics.
func (e *env) execRecover(ctx context.Context, pk *pick, v variant, fn executor) (panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	_, err = e.exec(ctx, pk, v, fn)
	return nil, err
}

// requestApproval makes the call that stores an approval request and has as many entitled
// people grant it as the action's approvers require.
func (e *env) requestApproval(ctx context.Context, pk *pick, v variant) (string, error) {
	id, err := e.ask(ctx, pk, v)
	if err != nil {
		return "", err
	}
	if _, err := e.grantAll(ctx, id, pk.Action, 0); err != nil {
		return "", err
	}
	return id, nil
}

// run makes one call of v done right: with an approval when pk needs one.
func (e *env) run(ctx context.Context, pk *pick, v variant, fn executor) error {
	_, err := e.runReceipt(ctx, pk, v, fn)
	return err
}

// runReceipt is run, returning the call's receipt.
func (e *env) runReceipt(ctx context.Context, pk *pick, v variant, fn executor) (*latch.Receipt, error) {
	if pk.Decision != policy.Approve {
		return e.exec(ctx, pk, v, fn)
	}
	id, err := e.requestApproval(ctx, pk, v)
	if err != nil {
		return nil, err
	}
	return e.execApproved(ctx, id, pk, v, fn)
}

// noRecord is the state effectState reports when there is no effect record.
const noRecord store.State = "absent"

// effectState returns the state of the effect record under key (noRecord when there is none).
func (e *env) effectState(ctx context.Context, key string) (store.State, error) {
	rec, err := e.effectRecord(ctx, key)
	switch {
	case err != nil:
		return "", err
	case rec == nil:
		return noRecord, nil
	}
	return rec.State, nil
}

// effectRecord reads the record under key (nil when there is none).
func (e *env) effectRecord(ctx context.Context, key string) (*store.Effect, error) {
	rec, err := e.st.Effect(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read effect %s: %w", key, err)
	}
	return rec, nil
}

// lastReceipt returns the seq and result of the newest receipt (0, "" when there is none).
func (e *env) lastReceipt(ctx context.Context) (int64, string, error) {
	for r, err := range e.st.Receipts(ctx, store.ReceiptFilter{Last: 1}) {
		if err != nil {
			return 0, "", fmt.Errorf("read receipts: %w", err)
		}
		var doc struct {
			Result string `json:"result"`
		}
		if err := json.Unmarshal(r.Doc, &doc); err != nil {
			return 0, "", fmt.Errorf("read receipt %d: %w", r.Seq, err)
		}
		return r.Seq, doc.Result, nil
	}
	return 0, "", nil
}

// verifyChain runs receipt verification over the store.
func (e *env) verifyChain(ctx context.Context) (receipt.Report, error) {
	head, err := e.st.Head(ctx)
	if err != nil {
		return receipt.Report{}, fmt.Errorf("read chain head: %w", err)
	}
	return receipt.Verify(e.st.Receipts(ctx, store.ReceiptFilter{}), head)
}

// snapshot is everything a call could have written.
type snapshot struct {
	head                       receipt.Head
	receipts                   int
	effects, approvals, events int
	writes                     int64 // committed write transactions, when the store counts them
}

func (e *env) snapshot(ctx context.Context) (snapshot, error) {
	var s snapshot
	var err error
	if s.head, err = e.st.Head(ctx); err != nil {
		return s, fmt.Errorf("read chain head: %w", err)
	}
	for _, err := range e.st.Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			return s, fmt.Errorf("read receipts: %w", err)
		}
		s.receipts++
	}
	effs, err := e.st.Effects(ctx, store.EffectFilter{})
	if err != nil {
		return s, fmt.Errorf("read effects: %w", err)
	}
	aprs, err := e.st.Approvals(ctx, store.ApprovalFilter{})
	if err != nil {
		return s, fmt.Errorf("read approvals: %w", err)
	}
	evs, err := e.st.Events(ctx, store.EventFilter{})
	if err != nil {
		return s, fmt.Errorf("read events: %w", err)
	}
	s.effects, s.approvals, s.events = len(effs), len(aprs), len(evs)
	if wc, ok := e.st.(store.WriteCounter); ok {
		s.writes = wc.WriteTransactions()
	}
	return s, nil
}

func (s snapshot) String() string {
	return fmt.Sprintf("head %d, %d receipts, %d effects, %d approvals, %d events, %d write transactions",
		s.head.Seq, s.receipts, s.effects, s.approvals, s.events, s.writes)
}
