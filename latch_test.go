package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/google/go-cmp/cmp"
	"github.com/latchkit/latch/canon"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

const testPolicy = `
schema: latch.policy/v1
version: "test-1"
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    resource: "invoice:{invoice_id}"
    max_attempts: 3
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - when: { amount_lte: 500000 }
        decision: approve
      - decision: deny
  report.read:
    decision: allow
  refund.issue:
    effect: "refund:{refund_id}"
    decision: approve
`

// clock is an injectable clock the tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	g     *latch.Guard
	clock *clock
	url   string
}

// another opens a second guard on e's store with the policy doc and e's clock — how another
// process sees the same store — closed when the test ends.
func (e *env) another(t *testing.T, doc string) *latch.Guard {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: e.url, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func newEnv(t *testing.T, doc string) *env {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse policy: %v", err)
	}
	c := newClock()
	url := "sqlite:" + t.TempDir() + "/state.db"
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: url, Now: c.Now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return &env{g: g, clock: c, url: url}
}

func agent(ctx context.Context) context.Context {
	return latch.WithPrincipal(ctx, latch.Principal{Agent: "billing-worker"})
}

type Charge struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
	Note      string `json:"-"`
	secret    string
}

func writes(t *testing.T, g *latch.Guard) int64 {
	t.Helper()
	wc, ok := g.Store().(store.WriteCounter)
	if !ok {
		t.Fatalf("store %T does not count write transactions", g.Store())
	}
	return wc.WriteTransactions()
}

func verifyChain(t *testing.T, g *latch.Guard) receipt.Report {
	t.Helper()
	// The chain, and the state checked against it (state_diverged).
	rep, err := store.VerifyChain(t.Context(), g.Store())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !rep.OK {
		t.Fatalf("chain does not verify: %+v", rep.Breaks)
	}
	if rep.State == nil {
		t.Fatalf("VerifyChain did not check the state of %T against the chain", g.Store())
	}
	return rep
}

// sameAsStored checks that a receipt returned by a call is the one stored: the same fields as
// its stored document read back, the same hash.
func sameAsStored(t *testing.T, rc *latch.Receipt) {
	t.Helper()
	if rc == nil {
		t.Fatal("no receipt returned")
	}
	stored, err := receipt.Parse(rc.Doc)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored, &rc.Receipt); diff != "" {
		t.Errorf("returned receipt differs from the stored document (-stored +returned):\n%s", diff)
	}
	if rc.Hash != canon.Sum(rc.Doc) {
		t.Errorf("returned hash %s does not cover the returned document", rc.Hash)
	}
}

func lastReceipt(t *testing.T, g *latch.Guard) map[string]any {
	t.Helper()
	for r, err := range g.Store().Receipts(t.Context(), store.ReceiptFilter{Last: 1}) {
		if err != nil {
			t.Fatalf("Receipts: %v", err)
		}
		var doc map[string]any
		if err := json.Unmarshal(r.Doc, &doc); err != nil {
			t.Fatalf("receipt doc: %v", err)
		}
		return doc
	}
	t.Fatalf("no receipt")
	return nil
}

func TestCommitTwoWriteTransactions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	var calls atomic.Int32
	var sawNote, sawToken string
	charge := latch.Protect(e.g, "billing.charge", func(ctx context.Context, c Charge) (string, error) {
		calls.Add(1)
		sawNote = c.Note + c.secret
		sawToken = latch.IdempotencyToken(ctx)
		return "ch_1", nil
	}, nil)
	before := writes(t, e.g)
	got, err := charge(agent(t.Context()), Charge{InvoiceID: "inv_1", Amount: 100, Note: "n", secret: "s"})
	if err != nil || got != "ch_1" {
		t.Fatalf("charge = %q, %v; want ch_1, nil", got, err)
	}
	if n := writes(t, e.g) - before; n != 2 {
		t.Errorf("allowed call with an effect key used %d write transactions, want 2", n)
	}
	if sawNote != "" {
		t.Errorf("executor saw fields that are not part of the action: %q", sawNote)
	}
	if len(sawToken) != 36 || strings.Count(sawToken, "-") != 4 {
		t.Errorf("IdempotencyToken = %q, want a UUID-shaped token", sawToken)
	}
	eff, err := e.g.Store().Effect(t.Context(), "charge:inv_1")
	if err != nil || eff.State != store.Committed || eff.Attempt != 1 || string(eff.Result) != `"ch_1"` {
		t.Fatalf("effect = %+v, %v; want committed attempt 1 with result", eff, err)
	}
	doc := lastReceipt(t, e.g)
	if doc["result"] != "committed" || doc["effect_key"] != "charge:inv_1" || doc["resource"] != "invoice:inv_1" ||
		doc["decision"] != "allow" || doc["decision_reason"] != "rule[0]" || doc["idempotency_token"] != sawToken ||
		doc["policy_version"] != "test-1" || doc["mode"] != "enforce" {
		t.Errorf("receipt = %v", doc)
	}
	events, err := e.g.Store().Events(t.Context(), store.EventFilter{EffectKey: "charge:inv_1"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range events {
		kinds = append(kinds, ev.Kind)
	}
	want := "action_proposed policy_evaluated effect_reserved execution_committed"
	if strings.Join(kinds, " ") != want {
		t.Errorf("events = %v, want %s", kinds, want)
	}

	_, err = charge(agent(t.Context()), Charge{InvoiceID: "inv_1", Amount: 100})
	var ee *latch.EffectError
	if !errors.Is(err, latch.ErrDuplicateEffect) || !errors.As(err, &ee) || ee.State != latch.StateCommitted || ee.Reason != "committed" || string(ee.Result) != `"ch_1"` {
		t.Fatalf("second charge err = %v, want ErrDuplicateEffect carrying the stored result", err)
	}
	if calls.Load() != 1 {
		t.Errorf("executor ran %d times, want 1", calls.Load())
	}
	if doc := lastReceipt(t, e.g); doc["result"] != "blocked" {
		t.Errorf("refused duplicate receipt result = %v, want blocked", doc["result"])
	}
	verifyChain(t, e.g)
}

func TestUnknownErrorIsAmbiguous(t *testing.T) {
	t.Parallel()
	cause := errors.New("read tcp: i/o timeout")
	cases := []struct {
		name string
		exec func(context.Context, Charge) (string, error)
		ctx  func(context.Context) (context.Context, context.CancelFunc)
		is   error
	}{
		{name: "error", exec: func(context.Context, Charge) (string, error) { return "", cause }, is: cause},
		// The deadline starts with the executor (as a provider call's own timeout would), so a
		// slow reservation on a loaded machine cannot spend it before the executor runs.
		{name: "deadline", exec: func(ctx context.Context, _ Charge) (string, error) {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
			defer cancel()
			<-dctx.Done()
			return "", dctx.Err()
		},
			is: context.DeadlineExceeded},
		{name: "cancel", exec: func(ctx context.Context, _ Charge) (string, error) {
			cancelFromExecutor(ctx)
			return "", ctx.Err()
		},
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(ctx)
				return context.WithValue(ctx, cancelKey{}, cancel), cancel
			},
			is: context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, testPolicy)
			var calls atomic.Int32
			charge := latch.Protect(e.g, "billing.charge", func(ctx context.Context, c Charge) (string, error) {
				calls.Add(1)
				return tc.exec(ctx, c)
			}, nil)
			ctx := agent(t.Context())
			if tc.ctx != nil {
				var cancel context.CancelFunc
				ctx, cancel = tc.ctx(ctx)
				defer cancel()
			}
			_, err := charge(ctx, Charge{InvoiceID: "inv_2", Amount: 100})
			if !errors.Is(err, latch.ErrAmbiguous) || !errors.Is(err, tc.is) {
				t.Fatalf("charge err = %v, want ErrAmbiguous and %v", err, tc.is)
			}
			eff, _ := e.g.Store().Effect(t.Context(), "charge:inv_2")
			if eff == nil || eff.State != store.Ambiguous {
				t.Fatalf("effect = %+v, want ambiguous", eff)
			}
			_, err = charge(agent(t.Context()), Charge{InvoiceID: "inv_2", Amount: 100})
			if !errors.Is(err, latch.ErrAmbiguousEffect) {
				t.Fatalf("retry err = %v, want ErrAmbiguousEffect", err)
			}
			if calls.Load() != 1 {
				t.Errorf("executor ran %d times, want 1", calls.Load())
			}
		})
	}
}

type cancelKey struct{}

// cancelFromExecutor cancels the caller's context while the executor runs.
func cancelFromExecutor(ctx context.Context) { ctx.Value(cancelKey{}).(context.CancelFunc)() }

func TestPanicIsAmbiguousAndPropagates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	charge := latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) { panic("boom") }, nil)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the executor's panic", r)
			}
		}()
		charge(agent(t.Context()), Charge{InvoiceID: "inv_p", Amount: 1})
		t.Errorf("panic did not propagate")
	}()
	eff, err := e.g.Store().Effect(t.Context(), "charge:inv_p")
	if err != nil || eff.State != store.Ambiguous {
		t.Fatalf("effect = %+v, %v; want ambiguous", eff, err)
	}
	if doc := lastReceipt(t, e.g); doc["result"] != "ambiguous" {
		t.Errorf("receipt result = %v, want ambiguous", doc["result"])
	}
}

func TestNotExecutedRenewsWithNewToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	var tokens []string
	fail := true
	charge := latch.Protect(e.g, "billing.charge", func(ctx context.Context, c Charge) (string, error) {
		tokens = append(tokens, latch.IdempotencyToken(ctx))
		if fail {
			return "", latch.NotExecuted(errors.New("card declined before capture"))
		}
		return "ok", nil
	}, nil)
	ctx := agent(t.Context())
	_, err := charge(ctx, Charge{InvoiceID: "inv_3", Amount: 10})
	if !errors.Is(err, latch.ErrNotExecuted) || errors.Is(err, latch.ErrAmbiguous) || !strings.Contains(err.Error(), "card declined") {
		t.Fatalf("err = %v, want ErrNotExecuted carrying the cause", err)
	}
	if eff, _ := e.g.Store().Effect(t.Context(), "charge:inv_3"); eff.State != store.Failed {
		t.Fatalf("effect state = %s, want failed", eff.State)
	}
	fail = false
	if _, err := charge(ctx, Charge{InvoiceID: "inv_3", Amount: 10}); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	eff, _ := e.g.Store().Effect(t.Context(), "charge:inv_3")
	if eff.State != store.Committed || eff.Attempt != 2 {
		t.Fatalf("effect = %s attempt %d, want committed attempt 2", eff.State, eff.Attempt)
	}
	if len(tokens) != 2 || tokens[0] == tokens[1] || tokens[0] == "" {
		t.Errorf("tokens = %v, want two different tokens", tokens)
	}
}

func TestMaxAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	var calls int
	charge := latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) {
		calls++
		return "", latch.NotExecuted(nil)
	}, nil)
	ctx := agent(t.Context())
	for i := 0; i < 3; i++ {
		if _, err := charge(ctx, Charge{InvoiceID: "inv_m", Amount: 1}); !errors.Is(err, latch.ErrNotExecuted) {
			t.Fatalf("attempt %d err = %v, want ErrNotExecuted", i+1, err)
		}
	}
	if _, err := charge(ctx, Charge{InvoiceID: "inv_m", Amount: 1}); !errors.Is(err, latch.ErrAttemptsExhausted) {
		t.Fatalf("4th attempt err = %v, want ErrAttemptsExhausted", err)
	}
	if calls != 3 {
		t.Errorf("executor ran %d times, want 3", calls)
	}
}

func TestDenials(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	var calls int
	exec := func(context.Context, json.RawMessage) (any, error) { calls++; return nil, nil }
	ctx := agent(t.Context())
	cases := []struct {
		call   latch.Call
		reason string
		is     error
	}{
		{latch.Call{Action: "git.force_push", Arguments: json.RawMessage(`{}`)}, "unknown_action", latch.ErrDenied},
		{latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"i","amount":900000}`)}, "rule[2]", latch.ErrDenied},
		{latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"i","amount":1.5}`)}, "invalid_argument", latch.ErrInvalidArgument},
		// An argument the effect template names is required: missing_argument, not a template error.
		{latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"amount":5}`)}, "missing_argument", latch.ErrInvalidArgument},
		{latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":true,"amount":5}`)}, "effect_key_error", latch.ErrInvalidArgument},
	}
	for _, tc := range cases {
		before := writes(t, e.g)
		rc, err := e.g.Execute(ctx, &tc.call, exec)
		if rc == nil || rc.Seq == 0 || rc.Result != "denied" || rc.DecisionReason != tc.reason || rc.Hash == "" {
			t.Errorf("Execute(%s %s) returned receipt %+v, want the stored denied receipt", tc.call.Action, tc.call.Arguments, rc)
		} else {
			sameAsStored(t, rc)
		}
		if !errors.Is(err, tc.is) {
			t.Errorf("Execute(%s %s) err = %v, want %v", tc.call.Action, tc.call.Arguments, err, tc.is)
			continue
		}
		doc := lastReceipt(t, e.g)
		if doc["result"] != "denied" || doc["decision_reason"] != tc.reason {
			t.Errorf("Execute(%s %s) receipt = %v %v, want denied %s", tc.call.Action, tc.call.Arguments, doc["result"], doc["decision_reason"], tc.reason)
		}
		if n := writes(t, e.g) - before; n != 1 {
			t.Errorf("refused call used %d write transactions, want 1", n)
		}
	}
	var ia *latch.InvalidArgumentError
	_, err := e.g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"i","amount":{"v":[1,0.5]}}`)}, exec)
	if !errors.As(err, &ia) || ia.Pointer != "/amount/v/1" {
		t.Errorf("float err = %v, want pointer /amount/v/1", err)
	}
	if calls != 0 {
		t.Errorf("executor ran %d times, want 0", calls)
	}
	verifyChain(t, e.g)
}

func TestNoPrincipalWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	before := writes(t, e.g)
	_, err := e.g.Execute(t.Context(), &latch.Call{Action: "report.read"}, func(context.Context, json.RawMessage) (any, error) {
		t.Error("executor ran without a principal")
		return nil, nil
	})
	var d *latch.DeniedError
	if !errors.As(err, &d) || d.Reason != "no_principal" {
		t.Fatalf("err = %v, want denied no_principal", err)
	}
	if n := writes(t, e.g) - before; n != 0 {
		t.Errorf("no_principal wrote %d transactions, want 0", n)
	}
	if head, _ := e.g.Store().Head(t.Context()); head.Seq != 0 {
		t.Errorf("head = %+v, want an empty chain", head)
	}
}

func TestExpiredPrincipalRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "a", ExpiresAt: e.clock.Now()})
	_, err := e.g.Execute(ctx, &latch.Call{Action: "report.read"}, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	var d *latch.DeniedError
	if !errors.As(err, &d) || d.Reason != "principal_expired" {
		t.Fatalf("err = %v, want denied principal_expired", err)
	}
	if doc := lastReceipt(t, e.g); doc["decision_reason"] != "principal_expired" {
		t.Errorf("receipt reason = %v", doc["decision_reason"])
	}
}

func TestApprovalRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	var paid []int64
	charge := latch.Protect(e.g, "billing.charge", func(_ context.Context, c Charge) (string, error) {
		paid = append(paid, c.Amount)
		return "ok", nil
	}, nil)
	ctx := agent(t.Context())
	_, err := charge(ctx, Charge{InvoiceID: "inv_big", Amount: 200000})
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) || !strings.HasPrefix(req.ApprovalID, "apr_") || len(req.ApprovalID) != 36 {
		t.Fatalf("err = %v, want ApprovalRequiredError", err)
	}
	if head, _ := e.g.Store().Head(t.Context()); head.Seq != 0 {
		t.Errorf("a pending approval wrote a receipt: head %+v", head)
	}
	if _, err := e.g.Approve(t.Context(), req.ApprovalID, "billing-worker"); !errors.Is(err, store.ErrAnswerRefused) {
		t.Fatalf("self approval err = %v, want refused", err)
	}
	if _, err := e.g.Approve(t.Context(), req.ApprovalID, "alice"); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	// A mutated action does not burn the approval.
	_, err = charge(latch.WithApproval(ctx, req.ApprovalID), Charge{InvoiceID: "inv_big", Amount: 500000})
	var mm *latch.ApprovalMismatchError
	if !errors.As(err, &mm) || mm.Reason != "mismatch" {
		t.Fatalf("mutated call err = %v, want mismatch", err)
	}
	if a, _ := e.g.Store().Approval(t.Context(), req.ApprovalID); a.Status != store.Granted {
		t.Fatalf("approval after mismatch = %s, want granted", a.Status)
	}
	if doc := lastReceipt(t, e.g); doc["result"] != "blocked" {
		t.Errorf("mismatch receipt = %v, want blocked", doc["result"])
	}
	if _, err := charge(latch.WithApproval(ctx, req.ApprovalID), Charge{InvoiceID: "inv_big", Amount: 200000}); err != nil {
		t.Fatalf("approved call: %v", err)
	}
	if doc := lastReceipt(t, e.g); doc["approver"] != "alice" || doc["approval_id"] != req.ApprovalID {
		t.Errorf("receipt approver/approval = %v/%v", doc["approver"], doc["approval_id"])
	}
	_, err = charge(latch.WithApproval(ctx, req.ApprovalID), Charge{InvoiceID: "inv_big", Amount: 200000})
	if !errors.As(err, &mm) || mm.Reason != "consumed" {
		t.Fatalf("replay err = %v, want consumed", err)
	}
	if len(paid) != 1 || paid[0] != 200000 {
		t.Errorf("paid = %v, want [200000]", paid)
	}
	verifyChain(t, e.g)
}

func TestApprovalExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	refund := func(context.Context, json.RawMessage) (any, error) { return "r", nil }
	ctx := agent(t.Context())
	call := &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"refund_id":"rf_1"}`)}
	_, err := e.g.Execute(ctx, call, refund)
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) {
		t.Fatalf("err = %v, want approval required", err)
	}
	if _, err := e.g.Approve(t.Context(), req.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(latch.DefaultApprovalTTL)
	_, err = e.g.Execute(latch.WithApproval(ctx, req.ApprovalID), call, refund)
	var mm *latch.ApprovalMismatchError
	if !errors.As(err, &mm) || mm.Reason != "expired" {
		t.Fatalf("err = %v, want expired", err)
	}
	if a, _ := e.g.Store().Approval(t.Context(), req.ApprovalID); a.Status != store.Expired {
		t.Errorf("approval status = %s, want expired (written at consumption time)", a.Status)
	}
}

func TestWaitForApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	ctx := agent(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := e.g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"refund_id":"rf_w"}`),
			Options: &latch.Options{Wait: true}}, func(context.Context, json.RawMessage) (any, error) { return "r", nil })
		done <- err
	}()
	var id string
	for deadline := time.Now().Add(10 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		as, err := e.g.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Pending})
		if err != nil {
			t.Fatal(err)
		}
		if len(as) == 1 {
			id = as[0].ID
		}
	}
	if id == "" {
		t.Fatal("no pending approval appeared")
	}
	if _, err := e.g.Approve(t.Context(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiting call: %v", err)
	}
	if a, _ := e.g.Store().Approval(t.Context(), id); a.Status != store.Consumed {
		t.Errorf("approval = %s, want consumed", a.Status)
	}
}

func TestPolicyChangeAfterApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	ctx := agent(t.Context())
	call := &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"refund_id":"rf_c"}`)}
	exec := func(context.Context, json.RawMessage) (any, error) { return "r", nil }
	_, err := e.g.Execute(ctx, call, exec)
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) {
		t.Fatalf("err = %v", err)
	}
	if _, err := e.g.Approve(t.Context(), req.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	open := func(decision string) *latch.Guard {
		return e.another(t, strings.Replace(testPolicy, "refund_id}\"\n    decision: approve", "refund_id}\"\n    decision: "+decision, 1))
	}
	if _, err := open("deny").Execute(latch.WithApproval(ctx, req.ApprovalID), call, exec); !errors.Is(err, latch.ErrDenied) {
		t.Fatalf("under a deny policy err = %v, want denied", err)
	}
	if _, err := open("allow").Execute(latch.WithApproval(ctx, req.ApprovalID), call, exec); err != nil {
		t.Fatalf("under an allow policy: %v", err)
	}
	if a, _ := e.g.Store().Approval(t.Context(), req.ApprovalID); a.Status != store.Consumed {
		t.Errorf("approval = %s, want consumed even though allow no longer needs it", a.Status)
	}
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	type answer = func(context.Context, *latch.Attempt) (latch.Outcome, any, error)
	cases := []struct {
		name    string
		hook    answer
		is      error
		state   store.State
		calls   int
		resolve string
	}{
		{"not executed", func(context.Context, *latch.Attempt) (latch.Outcome, any, error) {
			return latch.OutcomeNotExecuted, nil, nil
		}, nil, store.Committed, 2, "reconcile:billing.charge"},
		{"committed", func(context.Context, *latch.Attempt) (latch.Outcome, any, error) {
			return latch.OutcomeCommitted, nil, nil
		}, latch.ErrAlreadyCommitted, store.Committed, 1, "reconcile:billing.charge"},
		{"unknown", func(context.Context, *latch.Attempt) (latch.Outcome, any, error) {
			return latch.OutcomeUnknown, nil, nil
		}, latch.ErrAmbiguousEffect, store.Ambiguous, 1, ""},
		{"error", func(context.Context, *latch.Attempt) (latch.Outcome, any, error) {
			return latch.OutcomeCommitted, nil, errors.New("api down")
		}, latch.ErrAmbiguousEffect, store.Ambiguous, 1, ""},
		{"panic", func(context.Context, *latch.Attempt) (latch.Outcome, any, error) { panic("hook") }, latch.ErrAmbiguousEffect, store.Ambiguous, 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, testPolicy)
			calls, asked := 0, 0
			exec := func(ctx context.Context, c Charge) (string, error) {
				calls++
				if calls == 1 {
					return "", io.ErrUnexpectedEOF
				}
				return "ok", nil
			}
			ctx := agent(t.Context())
			if _, err := latch.Protect(e.g, "billing.charge", exec, nil)(ctx, Charge{InvoiceID: "inv_r", Amount: 1}); !errors.Is(err, latch.ErrAmbiguous) {
				t.Fatalf("first call err = %v", err)
			}
			hook := func(ctx context.Context, a *latch.Attempt) (latch.Outcome, any, error) {
				asked++
				if a.EffectKey != "charge:inv_r" || a.Number != 1 || string(a.Arguments) != `{"amount":1,"invoice_id":"inv_r"}` || a.HolderMayAct {
					t.Errorf("hook asked about %+v", a)
				}
				return tc.hook(ctx, a)
			}
			_, err := latch.Protect(e.g, "billing.charge", exec, &latch.Options{Reconcile: hook})(ctx, Charge{InvoiceID: "inv_r", Amount: 1})
			if tc.is == nil && err != nil || tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("reconciled call err = %v, want %v", err, tc.is)
			}
			eff, _ := e.g.Store().Effect(t.Context(), "charge:inv_r")
			if eff.State != tc.state || calls != tc.calls || asked != 1 {
				t.Errorf("state %s, executions %d, hook asked %d; want %s, %d, 1", eff.State, calls, asked, tc.state, tc.calls)
			}
			if tc.resolve != "" && tc.state == store.Committed && tc.calls == 1 && eff.ResolvedBy != tc.resolve {
				t.Errorf("resolved_by = %q, want %q", eff.ResolvedBy, tc.resolve)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestLapsedLeaseIsNeverRetried: a holder whose lease lapses is made ambiguous by a contender,
// which is refused; the holder's own outcome then settles its attempt (a late outcome), and
// nothing ever executed twice.
func TestLapsedLeaseIsNeverRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	calls := 0
	var contenderErr error
	exec := func(ctx context.Context, c Charge) (string, error) {
		calls++
		if calls > 1 {
			return "second", nil
		}
		e.clock.Add(latch.DefaultLease + time.Second)
		_, contenderErr = latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) {
			calls++
			return "contender", nil
		}, nil)(agent(context.Background()), c)
		return "first", nil
	}
	got, err := latch.Protect(e.g, "billing.charge", exec, nil)(agent(t.Context()), Charge{InvoiceID: "inv_l", Amount: 1})
	if !errors.Is(contenderErr, latch.ErrAmbiguousEffect) {
		t.Fatalf("contender err = %v, want ErrAmbiguousEffect", contenderErr)
	}
	if err != nil || got != "first" {
		t.Fatalf("holder = %q, %v; want its own result (its late outcome settles its attempt)", got, err)
	}
	eff, _ := e.g.Store().Effect(t.Context(), "charge:inv_l")
	if eff.State != store.Committed || string(eff.Result) != `"first"` || calls != 1 {
		t.Errorf("effect %s %s after %d executions; want committed \"first\" after 1", eff.State, eff.Result, calls)
	}
	if doc := lastReceipt(t, e.g); doc["result"] != "committed" {
		t.Errorf("holder receipt = %v, want committed", doc["result"])
	}
	evs, _ := e.g.Store().Events(t.Context(), store.EventFilter{EffectKey: "charge:inv_l"})
	if last := evs[len(evs)-1]; last.Kind != store.EventExecutionCommitted || !strings.Contains(string(last.Payload), `"cause":"lease_expired"`) {
		t.Errorf("last event %s %s, want execution_committed saying the lease had lapsed", last.Kind, last.Payload)
	}
	_, err = latch.Protect(e.g, "billing.charge", exec, nil)(agent(t.Context()), Charge{InvoiceID: "inv_l", Amount: 1})
	if r, ok := latch.ResultOf[string](err); !errors.Is(err, latch.ErrAlreadyCommitted) || !ok || r != "first" || calls != 1 {
		t.Errorf("retry after the late outcome: %v (result %q), %d executions; want ErrAlreadyCommitted with \"first\", 1", err, r, calls)
	}
}

func TestExtendLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	exec := func(ctx context.Context, c Charge) (string, error) {
		e.clock.Add(latch.DefaultLease - time.Second)
		// Past the longest lease a policy may give: refused, the lease left as it was.
		if err := latch.ExtendLease(ctx, policy.MaxLease+time.Second); err == nil || !strings.Contains(err.Error(), "longer than the longest lease") {
			return "", latch.NotExecuted(fmt.Errorf("ExtendLease past 7 days = %v, want refused", err))
		}
		if eff, _ := e.g.Store().Effect(ctx, "charge:"+c.InvoiceID); eff == nil || !eff.LeaseExpiresAt.Equal(e.clock.Now().Add(time.Second)) {
			return "", latch.NotExecuted(fmt.Errorf("lease after a refused extension: %+v", eff))
		}
		if err := latch.ExtendLease(ctx, 10*time.Minute); err != nil {
			return "", latch.NotExecuted(err)
		}
		e.clock.Add(time.Minute)
		_, err := latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) { return "", nil }, nil)(agent(context.Background()), c)
		if !errors.Is(err, latch.ErrDuplicateEffect) {
			return "", fmt.Errorf("contender err = %v, want in progress", err)
		}
		return "ok", nil
	}
	if _, err := latch.Protect(e.g, "billing.charge", exec, nil)(agent(t.Context()), Charge{InvoiceID: "inv_x", Amount: 1}); err != nil {
		t.Fatalf("call: %v", err)
	}
	if err := latch.ExtendLease(t.Context(), time.Minute); err == nil {
		t.Error("ExtendLease outside an executor succeeded")
	}
}

func TestGoroutinesOneWinner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	var calls atomic.Int32
	charge := latch.Protect(e.g, "billing.charge", func(context.Context, Charge) (string, error) {
		calls.Add(1)
		time.Sleep(5 * time.Millisecond)
		return "ok", nil
	}, nil)
	var wg sync.WaitGroup
	var dup atomic.Int32
	for range 16 {
		wg.Go(func() {
			if _, err := charge(agent(t.Context()), Charge{InvoiceID: "inv_race", Amount: 1}); errors.Is(err, latch.ErrDuplicateEffect) {
				dup.Add(1)
			} else if err != nil {
				t.Errorf("charge: %v", err)
			}
		})
	}
	wg.Wait()
	if calls.Load() != 1 || dup.Load() != 15 {
		t.Errorf("executions %d, duplicates %d; want 1 and 15", calls.Load(), dup.Load())
	}
	verifyChain(t, e.g)
}

func TestEvaluateWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	before := writes(t, e.g)
	ev, err := e.g.Evaluate(agent(t.Context()), &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"amount":60000,"invoice_id":"inv_9"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Decision != policy.Approve || ev.Reason != "rule[1]" || ev.EffectKey != "charge:inv_9" || !strings.HasPrefix(ev.ActionHash, "sha256:") {
		t.Errorf("Evaluate = %+v", ev)
	}
	ev2, _ := e.g.Evaluate(agent(t.Context()), &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_9","amount":60000}`)})
	ev3, _ := e.g.Evaluate(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker", User: "bob"}), &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_9","amount":60000}`)})
	if ev2.ActionHash != ev.ActionHash || ev3.ActionHash == ev.ActionHash {
		t.Errorf("hash must ignore key order and include the user: %s %s %s", ev.ActionHash, ev2.ActionHash, ev3.ActionHash)
	}
	if n := writes(t, e.g) - before; n != 0 {
		t.Errorf("Evaluate wrote %d transactions", n)
	}
}

func TestOpenFailsClosed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := latch.Open(t.Context(), &latch.Config{PolicyPath: dir + "/missing.yaml"})
	var pe *latch.PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("Open with a missing policy err = %v, want a PolicyError", err)
	}
}

func TestObserveMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "mode: observe\n"+testPolicy)
	calls := 0
	exec := func(context.Context, json.RawMessage) (any, error) { calls++; return "done", nil }
	ctx := agent(t.Context())
	cases := []struct {
		call     latch.Call
		decision string
		reason   string
		effect   any
	}{
		{latch.Call{Action: "git.force_push"}, "deny", "unknown_action", nil},
		{latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"o1","amount":5}`)}, "allow", "rule[0]", "reserved"},
		{latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"o1","amount":5}`)}, "allow", "rule[0]", "committed"},
		{latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"o2","amount":60000}`)}, "approve", "rule[1]", "reserved"},
	}
	for i, tc := range cases {
		if _, err := e.g.Execute(ctx, &tc.call, exec); err != nil {
			t.Fatalf("observe call %d: %v", i, err)
		}
		doc := lastReceipt(t, e.g)
		wh, _ := doc["would_have"].(map[string]any)
		if doc["result"] != "observed" || doc["mode"] != "observe" || wh["decision"] != tc.decision || wh["reason"] != tc.reason || wh["effect"] != tc.effect {
			t.Errorf("observe call %d receipt = %v, would_have %v; want observed %s %s %v", i, doc["result"], wh, tc.decision, tc.reason, tc.effect)
		}
	}
	if calls != len(cases) {
		t.Errorf("observe mode executed %d of %d calls", calls, len(cases))
	}
	if as, _ := e.g.Store().Approvals(t.Context(), store.ApprovalFilter{}); len(as) != 0 {
		t.Errorf("observe mode stored %d approval requests", len(as))
	}
	verifyChain(t, e.g)
}

// TestJSONLSink: a sink receives, after commit, every event and receipt of a call, with the
// store's event ids and the receipt's chain hash.
func TestJSONLSink(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/sink.jsonl"
	sink, err := latch.NewJSONLSink(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + t.TempDir() + "/s.db", Sinks: []latch.Sink{sink}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	rc, err := g.Execute(agent(t.Context()), &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"s1","amount":1}`)},
		func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
	if err != nil {
		t.Fatal(err)
	}
	stored, err := g.Store().Events(t.Context(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	// A call waits for its sinks only briefly (SinkWait); Close delivers what is still queued.
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var ids []float64
	hash := ""
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct {
			Event   map[string]any `json:"event"`
			Receipt map[string]any `json:"receipt"`
			Hash    string         `json:"hash"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("sink line %q: %v", line, err)
		}
		if l.Event != nil {
			kinds = append(kinds, l.Event["kind"].(string))
			ids = append(ids, l.Event["id"].(float64))
		}
		if l.Receipt != nil {
			hash = l.Hash
		}
	}
	if len(kinds) != len(stored) || strings.Join(kinds, " ") != "action_proposed policy_evaluated effect_reserved execution_committed" {
		t.Errorf("sink events = %v, store has %d", kinds, len(stored))
	}
	for i, id := range ids {
		if i < len(stored) && int64(id) != stored[i].ID {
			t.Errorf("sink event %d id = %v, stored id %d", i, id, stored[i].ID)
		}
	}
	if hash == "" || hash != rc.Hash {
		t.Errorf("sink receipt hash = %q, want the call's %q", hash, rc.Hash)
	}
}

// TestReturnedReceiptIsStored: whatever the path — committed, refused by the effect's state,
// refused approval, a holder that lost its key — the receipt a call returns is the stored one.
func TestReturnedReceiptIsStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	ctx := agent(t.Context())
	call := &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"r1","amount":1}`)}
	ok := func(context.Context, json.RawMessage) (any, error) { return "ok", nil }
	rc, err := e.g.Execute(ctx, call, ok)
	if err != nil || rc.Result != "committed" || rc.Seq != 1 {
		t.Fatalf("commit: %+v, %v", rc, err)
	}
	sameAsStored(t, rc)
	rc, err = e.g.Execute(ctx, call, ok)
	if !errors.Is(err, latch.ErrDuplicateEffect) || rc.Result != "blocked" || rc.PrevHash == "" {
		t.Fatalf("duplicate: %+v, %v", rc, err)
	}
	sameAsStored(t, rc)
	rc, err = e.g.Execute(latch.WithApproval(ctx, "apr_unknown"), call, ok)
	if !errors.Is(err, latch.ErrApprovalMismatch) || rc.Result != "blocked" {
		t.Fatalf("unknown approval: %+v, %v", rc, err)
	}
	sameAsStored(t, rc)
	late := &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"r2","amount":1}`)}
	rc, err = e.g.Execute(ctx, late, func(context.Context, json.RawMessage) (any, error) {
		e.clock.Add(latch.DefaultLease)
		if _, err := e.g.Execute(agent(context.Background()), late, ok); !errors.Is(err, latch.ErrAmbiguousEffect) {
			t.Errorf("contender err = %v", err)
		}
		return "late", nil
	})
	if err != nil || rc.Result != "committed" || rc.Value != "late" {
		t.Fatalf("late outcome: %+v, %v", rc, err)
	}
	sameAsStored(t, rc)
}
