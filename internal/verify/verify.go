// Package verify is the guarantee catalogue behind `latch verify` (docs/verify.md): it runs latch's own
// failure scenarios against the operator's policy, in a scratch store of the operator's backend,
// and says which guarantees hold, which cannot be exercised by that policy and why.
//
// Each guarantee is a scenario driven through the real pipeline — latch.Open with the operator's
// policy, a scratch store and an injected clock — with fake executors that count their calls.
// Guarantees whose meaning latch shares with the reference catalogue carry its number (G1 … G32);
// latch's own carry the prefix L (L1 …). An id never changes meaning once released. Nothing sleeps (time moves by advancing the clock), nothing reaches the network, and the
// operator's store is never opened: only its backend kind is read from its URL. G4 races real OS
// processes, and G22 makes a call from another one: the running binary is re-executed, and the
// re-executed copy must call Child first thing in main (or TestMain) to play its part.
//
// Every guarantee has a positive control, the same scenario done right, which must succeed: a
// pipeline that refuses everything would otherwise pass every refusal check. A failed control is
// a FAIL with reason "control failed", never a pass. A guarantee the policy cannot exercise (no
// action needs approval, no allowed action names an effect…) is N/A with the reason, and N/A is
// never counted as a pass.
//
// Actions are chosen deterministically: action names are sorted, and the first action (and rule)
// that can produce the decision a scenario needs is used, with arguments synthesized to satisfy
// that rule's conditions and checked with policy.Evaluate so that the intended rule is the one
// that fires.
//
// A policy's authority section stays in every scenario. Each call is then proposed as a
// principal one of its grants names (the first grant, in policy order, under which the action can
// decide what the scenario needs), with arguments that satisfy the grant's constraints too,
// checked with authority.Evaluate. G8 (expired authority refused) and G9 (delegation cannot
// escalate) exercise the section itself: a grant's expires_at to the microsecond, and children
// created beneath a delegable grant in the scratch store. A grant that names tasks is proposed on
// a task made from its first pattern; G24 exercises the tasks themselves.
//
// Budgets are charged in every scenario, at limits lifted out of reach so that a small budget
// does not refuse the calls another guarantee needs; G22 exhausts the policy's budgets as written.
// The policy's scopes section is left out (a scope service is never asked): G23 gives its guard
// scope providers of its own.
package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/latchkit/latch/policy"
)

// Config configures Run. Only Policy is required.
type Config struct {
	// Policy is the operator's policy. An observe-mode policy is refused: verify grades
	// enforcement.
	Policy *policy.Policy
	// StoreURL is the operator's configured store. Only its backend kind is used: sqlite (or "")
	// runs every scenario in a scratch SQLite file in a temporary directory; postgres:// runs them
	// in private schemas named latch_verify_<random> on that server, created and dropped by Run.
	// The operator's store itself is never opened.
	StoreURL string
	// Only selects guarantees by id (G1, g3, L1…; comma-separated entries are split). Empty runs
	// all.
	Only []string
	// faults injects named faults, to show that each guarantee is able to fail: set by this
	// package's tests only (export_test.go), never in production.
	faults []string
	// Executable is the binary re-executed as a G4 racer (and G22's call from another process);
	// default os.Executable(). It must call Child first thing in main.
	Executable string
	// LatchHTTP says the operator's executors call their remotes through latchhttp, the HTTP
	// classifier: G12 exercises it against a server on 127.0.0.1 (verify cannot see executors;
	// without it G12 is N/A).
	LatchHTTP bool
	// Now is the instant every scenario's clock starts at; default the wall clock when Run
	// starts. Grants expire: a test that verifies a policy with expiring grants pins it.
	Now time.Time
}

// Status is the verdict on one guarantee.
type Status string

// Statuses.
const (
	Pass          Status = "PASS"
	Fail          Status = "FAIL"
	NotApplicable Status = "N/A" // the policy cannot exercise the guarantee; never counted as a pass
)

// Result is the verdict on one guarantee.
type Result struct {
	ID       string        // G1, G17, L1… (Catalogue lists them)
	Title    string        // "duplicate effect refused"
	Status   Status        // PASS, FAIL or N/A
	Action   string        // the action the scenario used ("" when none)
	Reason   string        // why it failed ("control failed" when the control did) or is N/A; "" for PASS
	Detail   string        // what was observed
	Duration time.Duration // wall time the scenario took
}

// Report is the outcome of Run.
type Report struct {
	Results       []Result // in catalogue order, only the selected guarantees
	Passed        int
	Failed        int
	NotApplicable int
	Applicable    int    // Passed + Failed
	PolicyHash    string // the operator's policy
	Backend       string // the scheme of the scratch stores (sqlite, postgres…): the operator's backend
}

// OK reports whether at least one guarantee was applicable and every applicable one passed.
func (r *Report) OK() bool { return r.Applicable > 0 && r.Failed == 0 }

// UsageError is a refusal of the configuration itself (no policy, an observe-mode policy, an
// unknown guarantee id or fault, an unsupported store URL): `latch verify` exits 2 on it.
type UsageError struct {
	Msg string
}

func (e *UsageError) Error() string { return "verify: " + e.Msg }

// Exit codes of `latch verify` (docs/verify.md).
const (
	ExitPass     = 0 // every applicable guarantee passed
	ExitFail     = 1 // at least one failed
	ExitUsage    = 2 // nothing applicable, or bad usage (*UsageError)
	ExitInternal = 3 // verify itself could not run (scratch store, racer processes…)
)

// ExitCode maps what Run returned to the exit status of `latch verify`.
func ExitCode(r *Report, err error) int {
	var ue *UsageError
	switch {
	case errors.As(err, &ue):
		return ExitUsage
	case err != nil:
		return ExitInternal
	case r == nil || r.Applicable == 0:
		return ExitUsage
	case r.Failed > 0:
		return ExitFail
	}
	return ExitPass
}

// guarantee is one entry of the catalogue.
type guarantee struct {
	id    string
	title string
	run   func(r *runner, ctx context.Context) (outcome, error)
}

// catalogue is the table of docs/verify.md, in order: the ids latch shares with the reference
// numbering (G…) by number, then latch's own (L…). Each run function is a hook of its own so that
// a guarantee can be deepened without touching the others. An id never changes meaning once
// released: a guarantee that is withdrawn leaves its id unused, and a new meaning takes a new id.
// The two exceptions (docs/verify.md) gave a G id back its reference meaning: the lapsed lease
// first released as G12 is L1, and the revoked delegation first released as G20 is L6.
//
// Every run function decides whether the policy can exercise its guarantee (N/A with a reason)
// before it opens its first scratch environment (runner.newEnv): List relies on that, running
// each function in a dry runner whose newEnv stops it there.
var catalogue = []guarantee{
	{"G1", "mutated approval refused", (*runner).g1},
	{"G2", "replayed approval refused", (*runner).g2},
	{"G3", "duplicate effect refused", (*runner).g3},
	{"G4", "one winner under concurrency", (*runner).g4},
	{"G5", "ambiguous blocks a blind retry", (*runner).g5},
	{"G6", "unknown action refused", (*runner).g6},
	{"G7", "no principal refused", (*runner).g7},
	{"G8", "expired authority refused", (*runner).g8},
	{"G9", "delegation cannot escalate", (*runner).g9},
	{"G10", "unknown errors are ambiguous", (*runner).g10},
	{"G11", "altered receipt detected", (*runner).g11},
	{"G12", "byte written is ambiguous", (*runner).g12},
	{"G13", "clock skew is named", (*runner).g13},
	{"G14", "token changes across a renewal", (*runner).g14},
	{"G15", "renewal past the ceiling refused", (*runner).g15},
	{"G16", "moved precondition refused", (*runner).g16},
	{"G17", "unentitled approver refused", (*runner).g17},
	{"G18", "requester cannot approve", (*runner).g18},
	{"G19", "one principal counts once", (*runner).g19},
	{"G20", "revoked credential refused before exp", (*runner).g20},
	{"G21", "unapproved policy decides nothing", (*runner).g21},
	{"G22", "held budget refuses next reserve", (*runner).g22},
	{"G23", "a failing scope provider refuses", (*runner).g23},
	{"G24", "grant refused off its task", (*runner).g24},
	{"G25", "a hop narrows or it is refused", (*runner).g25},
	{"G26", "both receipts name one hop", (*runner).g26},
	{"G27", "a swapped upstream is denied", (*runner).g27},
	{"G28", "truncation past a checkpoint fails", (*runner).g28},
	{"G29", "a prune adds no new chain break", (*runner).g29},
	{"G30", "a held range refuses to prune", (*runner).g30},
	{"G31", "every receipt schema verifies", (*runner).g31},
	{"G32", "an honest prune keeps its checkpoints", (*runner).g32},
	{"L1", "lapsed lease never retried", (*runner).l1},
	{"L2", "late outcome settles only its own", (*runner).l2},
	{"L3", "reused key with other arguments named", (*runner).l3},
	{"L4", "state edit outside latch detected", (*runner).l4},
	{"L5", "misspelt argument fails closed", (*runner).l5},
	{"L6", "revoked delegation refused", (*runner).l6},
}

// IDs returns the ids of the catalogue in order.
func IDs() []string {
	ids := make([]string, len(catalogue))
	for i, g := range catalogue {
		ids[i] = g.id
	}
	return ids
}

// outcome is what a scenario observed; Run adds the id, title and duration.
type outcome struct {
	status Status
	action string
	reason string
	detail string
}

func pass(action, detail string) outcome {
	return outcome{status: Pass, action: action, detail: detail}
}

func fail(action, reason, detail string) outcome {
	return outcome{status: Fail, action: action, reason: reason, detail: detail}
}

// controlFailedReason is the reason of every FAIL whose positive control did not succeed.
const controlFailedReason = "control failed"

func controlFailed(action, detail string) outcome {
	return outcome{status: Fail, action: action, reason: controlFailedReason, detail: detail}
}

func notApplicable(reason string) outcome {
	return outcome{status: NotApplicable, reason: reason}
}

// verdict runs one guarantee's scenario for Run.
func (r *runner) verdict(ctx context.Context, g guarantee) (outcome, error) {
	envs := r.envs
	o, err := g.run(r, ctx)
	if err == nil {
		// A cancelled run is not a verdict: whatever the scenario saw, it did not finish.
		err = ctx.Err()
	}
	if err == nil && o.status == NotApplicable && r.envs != envs {
		// List judges applicability by stopping each scenario at its first scratch
		// environment: an N/A found after one would be listed applicable.
		err = fmt.Errorf("found N/A (%s) after opening a scratch store, where List cannot see it", o.reason)
	}
	if err != nil {
		return outcome{}, fmt.Errorf("verify %s: %w", g.id, err)
	}
	return o, nil
}

// checkConfig refuses a configuration Run and List cannot use, as *UsageError, and returns a
// copy of it with the guarantees it selects.
func checkConfig(cfg *Config) (Config, map[string]bool, error) {
	if cfg == nil || cfg.Policy == nil {
		return Config{}, nil, &UsageError{Msg: "no policy"}
	}
	if cfg.Policy.Mode == policy.ModeObserve {
		return Config{}, nil, &UsageError{Msg: "the policy is in observe mode: verify grades enforcement; run it against the policy with mode: enforce"}
	}
	selected, err := selectIDs(cfg.Only)
	if err != nil {
		return Config{}, nil, err
	}
	return *cfg, selected, nil
}

// Run runs the selected guarantees against cfg.Policy in scratch stores and reports on each. A
// returned error means verify itself could not run (exit 3), or, as a *UsageError, that the
// configuration is unusable (exit 2); a guarantee that does not hold is a FAIL in the report, not
// an error. When only removing the scratch stores failed, the report is returned with the error.
func Run(ctx context.Context, cfg *Config) (rep *Report, err error) {
	if _, ok := os.LookupEnv(childEnv); ok {
		// A re-executed racer whose main did not call Child would otherwise run verify again,
		// and re-execute itself again.
		return nil, errors.New("verify: run inside a G4 racer process: call verify.Child() first in main")
	}
	c, selected, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	faults, err := parseFaults(c.faults)
	if err != nil {
		return nil, err
	}
	sc, err := newScratch(ctx, c.StoreURL)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := sc.close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = fmt.Errorf("verify: remove scratch stores: %w", cerr)
		}
	}()

	r, err := newRunner(&c, faults, sc)
	if err != nil {
		return nil, err
	}
	defer r.close()
	rep = &Report{PolicyHash: c.Policy.Hash, Backend: sc.kind}
	for _, g := range catalogue {
		if !selected[g.id] {
			continue
		}
		start := time.Now()
		o, err := r.verdict(ctx, g)
		if err != nil {
			return nil, err
		}
		rep.Results = append(rep.Results, Result{
			ID: g.id, Title: g.title, Status: o.status, Action: o.action, Reason: o.reason,
			Detail: o.detail, Duration: time.Since(start),
		})
		switch o.status {
		case Pass:
			rep.Passed++
		case Fail:
			rep.Failed++
		default:
			rep.NotApplicable++
		}
	}
	rep.Applicable = rep.Passed + rep.Failed
	return rep, nil
}

// selectIDs turns Only into a set of catalogue ids; empty selects all.
func selectIDs(only []string) (map[string]bool, error) {
	sel := make(map[string]bool, len(catalogue))
	var want []string
	for _, o := range only {
		for _, id := range strings.Split(o, ",") {
			if id = strings.ToUpper(strings.TrimSpace(id)); id != "" {
				want = append(want, id)
			}
		}
	}
	ids := IDs()
	if len(want) == 0 {
		for _, id := range ids {
			sel[id] = true
		}
		return sel, nil
	}
	for _, id := range want {
		if !slices.Contains(ids, id) {
			return nil, &UsageError{Msg: fmt.Sprintf("unknown guarantee %q (expected one of %s)", id, strings.Join(ids, ", "))}
		}
		sel[id] = true
	}
	return sel, nil
}
