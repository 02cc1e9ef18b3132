package latch_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

const scopePolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    resource: "invoice:{invoice_id}"
    rules:
      - when: { amount_lte: 100 }
        decision: allow
      - when: { amount_lte: 1000 }
        decision: approve
      - decision: deny
  report.read:
    decision: allow
`

// scopeEnvOn is a guard on backend with the policy doc and the scope settings of cfg.
func scopeEnvOn(t *testing.T, backend, doc string, cfg latch.Config) *env {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse policy: %v", err)
	}
	url := "sqlite:" + t.TempDir() + "/state.db"
	if backend != "sqlite" {
		url = testdb.URL(t, backend, "latch_scope")
	}
	c := newClock()
	cfg.Policy, cfg.StoreURL, cfg.Now = p, url, c.Now
	g, err := latch.Open(t.Context(), &cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return &env{g: g, clock: c, url: url}
}

// provider is a scope provider whose answer a test sets, counting its questions.
type provider struct {
	mu    sync.Mutex
	asked []latch.ScopeRequest
	fn    func(context.Context, latch.ScopeRequest) (latch.Scope, error)
}

func scopeOf(patterns ...string) func(context.Context, latch.ScopeRequest) (latch.Scope, error) {
	return func(context.Context, latch.ScopeRequest) (latch.Scope, error) {
		return latch.Scope{Resources: patterns}, nil
	}
}

func (p *provider) set(fn func(context.Context, latch.ScopeRequest) (latch.Scope, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fn = fn
}

func (p *provider) scope(ctx context.Context, req latch.ScopeRequest) (latch.Scope, error) {
	p.mu.Lock()
	p.asked = append(p.asked, req)
	fn := p.fn
	p.mu.Unlock()
	return fn(ctx, req)
}

func (p *provider) questions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.asked)
}

func chargeCall(invoice string, amount int) *latch.Call {
	return &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(fmt.Sprintf(`{"invoice_id":%q,"amount":%d}`, invoice, amount))}
}

// refusedOnScope checks a call refused on its scope with reason: the error, a denied receipt
// that says why (with scopeHash, "" for none), no effect record, and (by the caller's
// executor) nothing run.
func refusedOnScope(t *testing.T, e *env, rc *latch.Receipt, err error, key, reason, scopeHash string) {
	t.Helper()
	var se *latch.ScopeError
	if !errors.As(err, &se) || se.Reason != reason || !errors.Is(err, latch.ErrDenied) || !errors.Is(err, latch.ErrScope) {
		t.Fatalf("error = %v (%T), want a *ScopeError %s matching ErrDenied and ErrScope", err, err, reason)
	}
	if r := latch.RefusalOf(err); r.Kind != latch.KindDenied || string(r.Reason) != reason {
		t.Errorf("RefusalOf = %s %s, want denied %s", r.Kind, r.Reason, reason)
	}
	if rc == nil {
		t.Fatal("no receipt for a call refused on its scope")
	}
	if rc.Result != receipt.Denied || rc.Decision != "deny" || rc.DecisionReason != reason || rc.ScopeHash != scopeHash {
		t.Errorf("receipt = result %s decision %s reason %s scope_hash %q; want denied deny %s %q", rc.Result, rc.Decision,
			rc.DecisionReason, rc.ScopeHash, reason, scopeHash)
	}
	if rc.Error != err.Error() {
		t.Errorf("receipt error = %q, want the call's error %q", rc.Error, err.Error())
	}
	if key != "" {
		if eff, err := e.g.Store().Effect(t.Context(), key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("effect %s after a scope refusal = %+v, %v; want none (nothing reserved)", key, eff, err)
		}
	}
}

func mustHash(t *testing.T, patterns ...string) string {
	t.Helper()
	h, err := latch.ScopeHash(latch.Scope{Resources: patterns})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestScopeRefusesBeforeReserving: with a guard-wide provider, a call whose resource is in the
// principal's scope runs and its receipt carries the scope's hash (never its content); one
// outside it, one with no resource, and one whose provider fails, panics, overruns its timeout
// or returns garbage is refused before anything is reserved — no effect record, no executor —
// with a denied receipt. On both stores.
func TestScopeRefusesBeforeReserving(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			prov := &provider{fn: scopeOf("invoice:A-*", "invoice:Z-1")}
			e := scopeEnvOn(t, backend, scopePolicy, latch.Config{Scope: prov.scope, ScopeTimeout: 200 * time.Millisecond})
			ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker", User: "alice"})
			var ran atomic.Int32
			exec := func(context.Context, json.RawMessage) (any, error) { ran.Add(1); return "ok", nil }
			want := mustHash(t, "invoice:Z-1", "invoice:A-*", "invoice:A-*") // order and repeats do not count

			rc, err := e.g.Execute(ctx, chargeCall("A-1", 50), exec)
			if err != nil {
				t.Fatalf("in-scope call: %v", err)
			}
			if rc.Result != string(store.Committed) || rc.ScopeHash != want || ran.Load() != 1 {
				t.Errorf("in-scope call: result %s scope_hash %q ran %d; want committed %q 1", rc.Result, rc.ScopeHash, ran.Load(), want)
			}
			if strings.Contains(string(rc.Doc), "A-*") || !strings.Contains(string(rc.Doc), `"scope_hash":"`+want+`"`) {
				t.Errorf("receipt document %s: want the scope's hash and never its patterns", rc.Doc)
			}
			if got := prov.asked[0]; got.Action != "billing.charge" || got.Resource != "invoice:A-1" || got.Principal.Agent != "billing-worker" ||
				got.Principal.User != "alice" || got.Environment != "production" || got.Task != "" {
				t.Errorf("provider asked %+v", got)
			}

			rc, err = e.g.Execute(ctx, chargeCall("B-1", 50), exec)
			refusedOnScope(t, e, rc, err, "charge:B-1", "out_of_scope", want)
			if !strings.Contains(err.Error(), `resource invoice:B-1 is not in the principal's scope`) || strings.Contains(err.Error(), "A-*") {
				t.Errorf("out_of_scope error = %q: want the resource named, the scope not", err)
			}

			asked := prov.questions()
			rc, err = e.g.Execute(ctx, &latch.Call{Action: "report.read"}, exec)
			refusedOnScope(t, e, rc, err, "", "out_of_scope", "")
			if prov.questions() != asked {
				t.Error("the provider was asked about a call with no resource")
			}

			prov.set(scopeOf())
			rc, err = e.g.Execute(ctx, chargeCall("A-2", 50), exec)
			refusedOnScope(t, e, rc, err, "charge:A-2", "out_of_scope", mustHash(t))

			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			for _, tc := range []struct {
				name string
				fn   func(context.Context, latch.ScopeRequest) (latch.Scope, error)
				says string
			}{
				{"error", func(context.Context, latch.ScopeRequest) (latch.Scope, error) {
					return latch.Scope{Resources: []string{"invoice:**"}}, errors.New("directory down")
				}, "the scope provider failed: directory down"},
				{"panic", func(context.Context, latch.ScopeRequest) (latch.Scope, error) { panic("nil map") }, "the scope provider panicked: nil map"},
				{"timeout, honouring ctx", func(ctx context.Context, _ latch.ScopeRequest) (latch.Scope, error) {
					<-ctx.Done()
					return latch.Scope{Resources: []string{"invoice:**"}}, nil
				}, "did not answer within 200ms"},
				{"timeout, ignoring ctx", func(context.Context, latch.ScopeRequest) (latch.Scope, error) {
					<-release
					return latch.Scope{Resources: []string{"invoice:**"}}, nil
				}, "did not answer within 200ms"},
				{"bad pattern", scopeOf("invoice:**", "invoice:**:x"), "bad resource pattern (index 1)"},
				{"empty pattern", scopeOf(""), "bad resource pattern (index 0)"},
				{"too many patterns", scopeOf(make([]string, latch.MaxScopeResources+1)...), "returned 4097 resource patterns (at most 4096)"},
				{"pattern too long", scopeOf("invoice:" + strings.Repeat("x", latch.MaxScopePattern)), "of 4104 bytes (at most 4096)"},
				{"invalid UTF-8", scopeOf("invoice:\xff"), "bad resource pattern (index 0)"},
			} {
				prov.set(tc.fn)
				t0 := time.Now()
				rc, err := e.g.Execute(ctx, chargeCall("A-3", 50), exec)
				refusedOnScope(t, e, rc, err, "charge:A-3", "scope_unavailable", "")
				if !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "**") {
					t.Errorf("%s: error %q, want it to say %q and hold no pattern of the scope", tc.name, err, tc.says)
				}
				if d := time.Since(t0); d > 5*time.Second {
					t.Errorf("%s: the call took %s", tc.name, d)
				}
			}
			if n := ran.Load(); n != 1 {
				t.Errorf("executor ran %d times, want once (the in-scope call)", n)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestScopeDeadline: the provider's ctx carries the scope timeout — Config.ScopeTimeout,
// DefaultScopeTimeout without it, Options.ScopeTimeout over both.
func TestScopeDeadline(t *testing.T) {
	t.Parallel()
	var left atomic.Int64
	fn := func(ctx context.Context, _ latch.ScopeRequest) (latch.Scope, error) {
		d, ok := ctx.Deadline()
		if !ok {
			return latch.Scope{}, errors.New("no deadline")
		}
		left.Store(int64(time.Until(d)))
		return latch.Scope{Resources: []string{"invoice:*"}}, nil
	}
	for _, tc := range []struct {
		cfg, opt time.Duration
		want     time.Duration
	}{
		{0, 0, latch.DefaultScopeTimeout},
		{700 * time.Millisecond, 0, 700 * time.Millisecond},
		{700 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond},
	} {
		e := scopeEnvOn(t, "sqlite", scopePolicy, latch.Config{Scope: fn, ScopeTimeout: tc.cfg})
		call := chargeCall("A-1", 50)
		call.Options = &latch.Options{ScopeTimeout: tc.opt}
		if _, err := e.g.Execute(agent(t.Context()), call, func(context.Context, json.RawMessage) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(left.Load()); got > tc.want || got < tc.want-time.Second/2 {
			t.Errorf("config %s, options %s: the provider had %s left, want about %s", tc.cfg, tc.opt, got, tc.want)
		}
	}
	if _, err := latch.Open(t.Context(), &latch.Config{Policy: mustParse(t, scopePolicy), StoreURL: "sqlite:" + t.TempDir() + "/s.db",
		ScopeTimeout: -time.Second}); err == nil || !strings.Contains(err.Error(), "scope timeout") {
		t.Errorf("Open with a negative scope timeout = %v, want an error naming it", err)
	}
}

func mustParse(t *testing.T, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestScopeWhenAsked: the provider is not asked about a denied call, by Evaluate, or for a
// call that only stores an approval request; it is asked when the approval is presented, and
// a refusal then spends nothing — the approval stays granted and works once the principal's
// scope holds the resource. On both stores.
func TestScopeWhenAsked(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			prov := &provider{fn: scopeOf("invoice:A-*")}
			e := scopeEnvOn(t, backend, scopePolicy, latch.Config{Scope: prov.scope})
			ctx := agent(t.Context())
			never := func(context.Context, json.RawMessage) (any, error) {
				t.Error("an executor ran for a call that should have been refused")
				return nil, nil
			}

			_, err := e.g.Execute(ctx, chargeCall("B-1", 5000), never)
			var de *latch.DeniedError
			if !errors.As(err, &de) || de.Reason != "rule[2]" {
				t.Fatalf("denied call = %v, want the rule's denial", err)
			}
			if _, err := e.g.Evaluate(ctx, chargeCall("B-1", 50)); err != nil {
				t.Fatal(err)
			}
			_, err = e.g.Execute(ctx, chargeCall("B-1", 500), never)
			var ar *latch.ApprovalRequiredError
			if !errors.As(err, &ar) {
				t.Fatalf("approve call = %v, want approval required (the scope is checked when it is presented)", err)
			}
			if n := prov.questions(); n != 0 {
				t.Fatalf("provider asked %d times about a denied call, an evaluation and an approval request; want 0", n)
			}
			if _, err := e.g.Approve(t.Context(), ar.ApprovalID, "alice"); err != nil {
				t.Fatal(err)
			}
			presented := latch.WithApproval(ctx, ar.ApprovalID)
			rc, err := e.g.Execute(presented, chargeCall("B-1", 500), never)
			refusedOnScope(t, e, rc, err, "charge:B-1", "out_of_scope", mustHash(t, "invoice:A-*"))
			if prov.questions() != 1 {
				t.Errorf("provider asked %d times, want once (the presented approval)", prov.questions())
			}
			if a, err := e.g.Store().Approval(t.Context(), ar.ApprovalID); err != nil || a.Status != store.Granted || a.ConsumedBy != "" {
				t.Fatalf("approval after a scope refusal = %+v, %v; want granted and unspent", a, err)
			}
			prov.set(scopeOf("invoice:B-*"))
			rc, err = e.g.Execute(presented, chargeCall("B-1", 500), func(context.Context, json.RawMessage) (any, error) { return "charged", nil })
			if err != nil || rc.ApprovalID != ar.ApprovalID || rc.ScopeHash != mustHash(t, "invoice:B-*") {
				t.Fatalf("presented again, in scope = %+v, %v; want it run on the approval with the new scope's hash", rc, err)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestScopeObserveMode: in observe mode the provider is asked and refuses nothing: the call
// runs and its receipt says it would have been refused (would_have), with the scope's hash.
func TestScopeObserveMode(t *testing.T) {
	t.Parallel()
	prov := &provider{fn: scopeOf("invoice:A-*")}
	e := scopeEnvOn(t, "sqlite", "mode: observe\n"+scopePolicy, latch.Config{Scope: prov.scope})
	var ran atomic.Int32
	exec := func(context.Context, json.RawMessage) (any, error) { ran.Add(1); return nil, nil }
	rc, err := e.g.Execute(agent(t.Context()), chargeCall("B-1", 50), exec)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Result != receipt.Observed || rc.WouldHave == nil || rc.WouldHave.Decision != "deny" || rc.WouldHave.Reason != "out_of_scope" ||
		rc.ScopeHash != mustHash(t, "invoice:A-*") || ran.Load() != 1 {
		t.Errorf("observed out-of-scope call = result %s would_have %+v scope_hash %q ran %d; want it run, would_have deny out_of_scope",
			rc.Result, rc.WouldHave, rc.ScopeHash, ran.Load())
	}
	prov.set(func(context.Context, latch.ScopeRequest) (latch.Scope, error) {
		return latch.Scope{}, errors.New("down")
	})
	rc, err = e.g.Execute(agent(t.Context()), chargeCall("A-1", 50), exec)
	if err != nil || rc.WouldHave == nil || rc.WouldHave.Reason != "scope_unavailable" || ran.Load() != 2 {
		t.Errorf("observed call, provider down = %+v, %v; want it run, would_have scope_unavailable", rc, err)
	}
	prov.set(scopeOf("invoice:A-*"))
	rc, err = e.g.Execute(agent(t.Context()), chargeCall("A-2", 50), exec)
	if err != nil || rc.WouldHave == nil || rc.WouldHave.Decision != "allow" || ran.Load() != 3 {
		t.Errorf("observed in-scope call = %+v, %v; want would_have allow", rc, err)
	}
	before := prov.questions()
	if _, err := e.g.Execute(agent(t.Context()), chargeCall("A-3", 5000), exec); err != nil {
		t.Fatal(err)
	}
	if prov.questions() != before {
		t.Error("in observe mode the provider was asked about a call the policy denies")
	}
}

// TestScopeOptionsOverride: Options.Scope wins over Config.Scope for its call (and a
// protected function's), and applies where no guard-wide provider is set.
func TestScopeOptionsOverride(t *testing.T) {
	t.Parallel()
	guardWide := &provider{fn: scopeOf("invoice:A-*")}
	e := scopeEnvOn(t, "sqlite", scopePolicy, latch.Config{Scope: guardWide.scope})
	perCall := &provider{fn: scopeOf("invoice:B-*")}
	call := chargeCall("B-1", 50)
	call.Options = &latch.Options{Scope: perCall.scope, Task: "job:1"}
	if _, err := e.g.Execute(agent(t.Context()), call, func(context.Context, json.RawMessage) (any, error) { return nil, nil }); err != nil {
		t.Fatalf("B-1 under the per-call scope: %v", err)
	}
	if guardWide.questions() != 0 || perCall.questions() != 1 || perCall.asked[0].Task != "job:1" {
		t.Errorf("asked: guard-wide %d, per-call %d (%+v); want 0, 1 with the call's task", guardWide.questions(), perCall.questions(), perCall.asked)
	}

	plain := newEnv(t, scopePolicy)
	charge := latch.Protect(plain.g, "billing.charge", func(context.Context, Charge) (string, error) { return "ok", nil },
		&latch.Options{Scope: perCall.scope})
	if _, err := charge(agent(t.Context()), Charge{InvoiceID: "B-2", Amount: 10}); err != nil {
		t.Errorf("protected call in its scope: %v", err)
	}
	_, err := charge(agent(t.Context()), Charge{InvoiceID: "A-2", Amount: 10})
	if latch.ReasonOf(err) != "out_of_scope" {
		t.Errorf("protected call outside its scope = %v, want out_of_scope", err)
	}
}

// TestScopeBegin: a call begun with Begin is checked as Execute checks it, and its receipt —
// written by Finish in another guard that rebuilds the call from the store — carries the
// scope's hash.
func TestScopeBegin(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := scopeEnvOn(t, backend, scopePolicy, latch.Config{Scope: (&provider{fn: scopeOf("invoice:A-*")}).scope})
			ctx := agent(t.Context())
			_, err := e.g.Begin(ctx, chargeCall("B-1", 50))
			if latch.ReasonOf(err) != "out_of_scope" {
				t.Fatalf("Begin out of scope = %v, want out_of_scope", err)
			}
			if _, err := e.g.Store().Effect(t.Context(), "charge:B-1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("effect after a refused Begin: %v, want none", err)
			}
			p, err := e.g.Begin(ctx, chargeCall("A-1", 50))
			if err != nil {
				t.Fatal(err)
			}
			other := e.another(t, scopePolicy)
			rc, err := other.Finish(ctx, p.ActionID, latch.OutcomeCommitted, json.RawMessage(`"done"`), "")
			if err != nil {
				t.Fatal(err)
			}
			if rc.ScopeHash != mustHash(t, "invoice:A-*") {
				t.Errorf("Finish receipt scope_hash = %q, want the hash of the scope Begin checked", rc.ScopeHash)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestScopeHashFormat: the hash is over the canonical JSON of the sorted, deduplicated
// patterns with their own schema tag, and refuses what a provider may not return.
func TestScopeHashFormat(t *testing.T) {
	t.Parallel()
	h := mustHash(t, "b:1", "a:*", "b:1")
	sum := sha256.Sum256([]byte(`{"resources":["a:*","b:1"],"schema":"latch.scope/v1"}`))
	if want := "sha256:" + hex.EncodeToString(sum[:]); h != want {
		t.Errorf("ScopeHash = %q, want %q", h, want)
	}
	if h == mustHash(t, "a:*") || mustHash(t) == mustHash(t, "a:*") {
		t.Error("different scopes hash alike")
	}
	if _, err := latch.ScopeHash(latch.Scope{Resources: []string{"a:**:b"}}); err == nil {
		t.Error("ScopeHash of a bad pattern succeeded")
	}
}
