package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
)

// A scope provider (docs/scopes.md) answers, before anything is reserved, which resources the
// call's principal is assigned. The scenario policy leaves the operator's scopes section out (a
// scope service is never asked; a static map names the operator's principals): G23 gives its
// guard a provider of its own.

const (
	// faultScopeFailsOpen takes a scope provider's error, panic or silence for an answer that
	// puts every resource in scope, as a check that skipped itself when the provider failed
	// would. G23 fails.
	faultScopeFailsOpen = "scope_fails_open"
	// scopeTimeout is how long G23's guard waits for its provider (Config.ScopeTimeout): the
	// one scenario that waits on the wall clock, for the provider that never answers.
	scopeTimeout = 300 * time.Millisecond
	// scopeResource is the resource G23's calls carry when neither the action nor the grant
	// gives one: a call without a resource is out of scope without asking the provider.
	scopeResource = "latch-verify:scope"
)

// errScopeService is what the failing provider returns.
var errScopeService = errors.New("verify: the scope service is unavailable")

// scopeMode is what G23's provider does on its next question.
type scopeMode int32

const (
	scopeAnswers scopeMode = iota // a scope holding the call's resource
	scopeErrors                   // an error
	scopePanics                   // a panic
	scopeHangs                    // no answer until the deadline
)

var scopeModeNames = map[scopeMode]string{scopeErrors: "errors", scopePanics: "panics", scopeHangs: "never answers"}

// scopeProvider is G23's provider: it does what its mode says, and counts the questions.
type scopeProvider struct {
	mode  atomic.Int32
	asked atomic.Int64
}

func (s *scopeProvider) set(m scopeMode) { s.mode.Store(int32(m)) }

func (s *scopeProvider) provide(ctx context.Context, req latch.ScopeRequest) (latch.Scope, error) {
	s.asked.Add(1)
	switch scopeMode(s.mode.Load()) {
	case scopeErrors:
		return latch.Scope{}, errScopeService
	case scopePanics:
		panic("verify: the scope provider panicked")
	case scopeHangs:
		<-ctx.Done()
		return latch.Scope{}, ctx.Err()
	}
	return holding(req.Resource), nil
}

// holding is a scope that holds resource: the resource itself as a pattern, or, for a resource
// that is not a pattern of itself, its first segment and everything below it.
func holding(resource string) latch.Scope {
	first, _, _ := strings.Cut(resource, ":")
	for _, p := range []string{resource, first + ":**"} {
		if policy.CheckPattern(p, ':') == nil && authority.Match(p, resource, ':') {
			return latch.Scope{Resources: []string{p}}
		}
	}
	return latch.Scope{Resources: []string{resource}}
}

// failOpen is a provider of faultScopeFailsOpen: fn's failure — an error, a panic, no answer
// within a quarter of scopeTimeout — becomes a scope holding the call's resource, as if it had
// not been checked.
func failOpen(fn latch.ScopeFunc) latch.ScopeFunc {
	return func(ctx context.Context, req latch.ScopeRequest) (s latch.Scope, err error) {
		ctx, cancel := context.WithTimeout(ctx, scopeTimeout/4)
		defer cancel()
		defer func() {
			if recover() != nil {
				s, err = holding(req.Resource), nil
			}
		}()
		if s, err = fn(ctx, req); err != nil {
			return holding(req.Resource), nil
		}
		return s, nil
	}
}

// g23: with a scope provider that returns an error, one that panics and one that never answers
// (past the guard's scope timeout), a call the policy lets run is refused scope_unavailable:
// nothing is reserved (no effect record for its key, no effect anywhere) and nothing executes.
// Control: the provider answering a scope that holds the call's resource, the call commits and
// its receipt carries the scope's hash.
//
// The call is the first the policy lets run — an allowed action with an effect template, else
// an approved one, else any that can run — with a resource: the action's, the grant's, or
// latch-verify:scope given explicitly.
func (r *runner) g23(ctx context.Context) (outcome, error) {
	pk, why := r.scopePick()
	if pk == nil {
		return notApplicable(why), nil
	}
	var vs []variant
	for i := range 4 {
		v := pk.variant(i)
		if pk.resourceOf(v) == "" {
			w, ok := pk.finish(r.pol(), v.Args, scopeResource, pk.Decision, pk.Reason)
			if !ok {
				return notApplicable(fmt.Sprintf("%s has no resource, and the call cannot carry one (%s) that the policy and a grant allow", pk.Action, scopeResource)), nil
			}
			w.Effect, w.Key = v.Effect, keyOf(v, w)
			v = w
		}
		vs = append(vs, v)
	}
	prov := &scopeProvider{}
	e, err := r.newScopedEnv(ctx, "g23", r.sp, prov.provide)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()

	var seen, bad []string
	for i, m := range []scopeMode{scopeErrors, scopePanics, scopeHangs} {
		v := vs[i]
		prov.set(m)
		before, err := e.snapshot(ctx)
		if err != nil {
			return outcome{}, err
		}
		asked := prov.asked.Load()
		var c counter
		cerr := e.run(ctx, pk, v, c.commit)
		after, err := e.snapshot(ctx)
		if err != nil {
			return outcome{}, err
		}
		rec := noRecord
		if v.Key != "" {
			if rec, err = e.effectState(ctx, v.Key); err != nil {
				return outcome{}, err
			}
		}
		what := "the provider " + scopeModeNames[m]
		seen = append(seen, fmt.Sprintf("%s (asked %d): %s, executions: %d, record %s, effects %d → %d",
			what, prov.asked.Load()-asked, outcomeOf(cerr), c.count(), rec, before.effects, after.effects))
		var se *latch.ScopeError
		switch {
		case c.count() != 0:
			bad = append(bad, "the call executed when "+what)
		case rec != noRecord || after.effects != before.effects:
			bad = append(bad, "the call reserved its effect key when "+what)
		case !errors.As(cerr, &se) || se.Reason != string(latch.ReasonScopeUnavailable):
			bad = append(bad, "the call was not refused scope_unavailable when "+what)
		}
	}

	prov.set(scopeAnswers)
	ctl := vs[3]
	var cc counter
	rc, cerr := e.runReceipt(ctx, pk, ctl, cc.commit)
	hash := ""
	if rc != nil {
		hash = rc.ScopeHash
	}
	detail := fmt.Sprintf("%s on resource %s as %s: %s; control, the provider answering a scope holding %s: %s, executions: %d, receipt scope_hash %q",
		vs[0].describe(), pk.resourceOf(vs[0]), principalText(pk.principal()), strings.Join(seen, "; "),
		pk.resourceOf(ctl), outcomeOf(cerr), cc.count(), hash)
	switch {
	case cerr != nil || cc.count() != 1 || hash == "":
		return controlFailed(pk.Action, detail), nil
	case len(bad) > 0:
		return fail(pk.Action, bad[0], detail), nil
	}
	return pass(pk.Action, detail), nil
}

// scopePick is the call G23 makes: allow with an effect template, else approve with one, else
// whatever can run.
func (r *runner) scopePick() (*pick, string) {
	for _, want := range []policy.Decision{policy.Allow, policy.Approve} {
		if pk, _ := r.pickFor(want, chooseOpts{needEffect: true, n: 4}, ""); pk != nil {
			return pk, ""
		}
	}
	return r.runnable(4)
}

// keyOf is the key of w, a variant remade from v with an explicit resource: w's own when the
// policy's template rendered one, else v's explicit key.
func keyOf(v, w variant) string {
	if v.Effect != "" {
		return v.Key
	}
	return w.Key
}
