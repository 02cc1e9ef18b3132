package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// backends are the stores the remote-executor tests run on: SQLite always, Postgres when
// LATCH_TEST_POSTGRES_URL names a server (required under LATCH_REQUIRE_POSTGRES=1).
var backends = []string{"sqlite", "postgres"}

// newEnvOn is newEnv on the named backend; a Postgres store gets a fresh schema, dropped after.
func newEnvOn(t *testing.T, backend, doc string) *env {
	t.Helper()
	if backend == "sqlite" {
		return newEnv(t, doc)
	}
	storeURL := testdb.PostgresURL(t, "latch_root")
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse policy: %v", err)
	}
	c := newClock()
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: storeURL, Now: c.Now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return &env{g: g, clock: c, url: storeURL}
}

// receiptCount is the number of receipts in the store.
func receiptCount(t *testing.T, g *latch.Guard) int {
	t.Helper()
	n := 0
	for _, err := range g.Store().Receipts(t.Context(), store.ReceiptFilter{}) {
		if err != nil {
			t.Fatalf("Receipts: %v", err)
		}
		n++
	}
	return n
}

func outcomeReason(err error) string {
	var oe *latch.OutcomeError
	if errors.As(err, &oe) {
		return oe.Reason
	}
	return ""
}

// TestBeginFinishIsExecute: a call begun with Begin and finished with Finish writes what
// Execute writes for the same call — the same two write transactions, the same receipt fields —
// and a later call meets the stored result exactly as after Execute.
func TestBeginFinishIsExecute(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			ctx := agent(t.Context())
			args := json.RawMessage(`{"invoice_id":"inv_1","amount":100}`)
			var token string
			want, err := e.g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: args}, func(ctx context.Context, _ json.RawMessage) (any, error) {
				token = latch.IdempotencyToken(ctx)
				return map[string]any{"charge": "ch_1"}, nil
			})
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}

			args2 := json.RawMessage(`{"invoice_id":"inv_2","amount":100}`)
			before := writes(t, e.g)
			p, err := e.g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: args2})
			if err != nil {
				t.Fatalf("Begin: %v", err)
			}
			if p.EffectKey != "charge:inv_2" || p.Attempt != 1 || p.IdempotencyToken == "" || p.IdempotencyToken == token ||
				!p.LeaseExpiresAt.Equal(e.clock.Now().Add(latch.DefaultLease)) || p.Principal.Agent != "billing-worker" ||
				string(p.Arguments) != `{"amount":100,"invoice_id":"inv_2"}` || p.Decision != policy.Allow {
				t.Fatalf("Begin = %+v", p)
			}
			e.clock.Add(time.Second)
			got, err := e.g.Finish(ctx, p.ActionID, latch.OutcomeCommitted, json.RawMessage(`{"charge":"ch_2"}`), "")
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if n := writes(t, e.g) - before; n != 2 {
				t.Errorf("Begin+Finish wrote %d transactions, want 2 (reserve, record) as Execute", n)
			}
			sameAsStored(t, got)
			if got.Result != "committed" || got.ActionID != p.ActionID || got.Attempt != 1 || got.IdempotencyToken != p.IdempotencyToken ||
				got.EffectKey != "charge:inv_2" || got.Resource != "invoice:inv_2" || got.Decision != "allow" ||
				got.DecisionReason != want.DecisionReason || got.PolicyHash != want.PolicyHash || got.PolicyVersion != "test-1" ||
				got.Mode != want.Mode || got.Principal != want.Principal || !got.StartedAt.Equal(p.StartedAt) ||
				!got.FinishedAt.Equal(p.StartedAt.Add(time.Second)) {
				t.Errorf("Finish receipt = %+v\nExecute receipt = %+v", got.Receipt, want.Receipt)
			}
			_, err = e.g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: args2})
			var ee *latch.EffectError
			if !errors.As(err, &ee) || ee.State != latch.StateCommitted || string(ee.Result) != `{"charge":"ch_2"}` || !errors.Is(err, latch.ErrDuplicateEffect) {
				t.Errorf("Begin after Finish: err = %v, want committed with the stored result", err)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestFinishRefusals: a replayed outcome, an outcome from another principal and an unknown
// action id are refused with their reasons and write nothing.
func TestFinishRefusals(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			ctx := agent(t.Context())
			p, err := e.g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_1","amount":100}`)})
			if err != nil {
				t.Fatalf("Begin: %v", err)
			}
			other := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "other-worker"})
			sameAgentOtherUser := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker", User: "mallory"})
			before, receipts := writes(t, e.g), receiptCount(t, e.g)
			for _, tc := range []struct {
				name   string
				ctx    context.Context
				id     string
				reason string
			}{
				{"other agent", other, p.ActionID, "not_holder"},
				{"same agent, other user", sameAgentOtherUser, p.ActionID, "not_holder"},
				{"unknown id", ctx, "act_00000000000000000000000000000000", "no_such_action"},
				{"empty id", ctx, "", "no_such_action"},
			} {
				_, err := e.g.Finish(tc.ctx, tc.id, latch.OutcomeCommitted, nil, "")
				if !errors.Is(err, latch.ErrOutcomeRefused) || outcomeReason(err) != tc.reason {
					t.Errorf("%s: Finish err = %v, want %s", tc.name, err, tc.reason)
				}
				if _, err := e.g.Extend(tc.ctx, tc.id, time.Minute); outcomeReason(err) != tc.reason {
					t.Errorf("%s: Extend err = %v, want %s", tc.name, err, tc.reason)
				}
			}
			if _, err := e.g.Finish(t.Context(), p.ActionID, latch.OutcomeCommitted, nil, ""); !errors.Is(err, latch.ErrDenied) {
				t.Errorf("Finish with no principal: err = %v, want no_principal", err)
			}
			if n, r := writes(t, e.g)-before, receiptCount(t, e.g); n != 0 || r != receipts {
				t.Fatalf("refused outcomes wrote %d transactions and %d receipts, want none", n, r-receipts)
			}
			if eff, _ := e.g.Store().Effect(t.Context(), "charge:inv_1"); eff.State != store.Executing {
				t.Fatalf("effect after refusals = %s, want executing", eff.State)
			}

			if _, err := e.g.Finish(ctx, p.ActionID, latch.OutcomeCommitted, json.RawMessage(`"ok"`), ""); err != nil {
				t.Fatalf("Finish: %v", err)
			}
			before, receipts = writes(t, e.g), receiptCount(t, e.g)
			for _, o := range []latch.Outcome{latch.OutcomeCommitted, latch.OutcomeNotExecuted, latch.OutcomeUnknown} {
				if _, err := e.g.Finish(ctx, p.ActionID, o, nil, ""); outcomeReason(err) != "already_recorded" {
					t.Errorf("replayed Finish(%v) err = %v, want already_recorded", o, err)
				}
			}
			if n, r := writes(t, e.g)-before, receiptCount(t, e.g); n != 0 || r != receipts {
				t.Errorf("replayed outcomes wrote %d transactions and %d receipts, want none", n, r-receipts)
			}
			if eff, _ := e.g.Store().Effect(t.Context(), "charge:inv_1"); eff.State != store.Committed || string(eff.Result) != `"ok"` {
				t.Errorf("effect after replays = %+v, want committed \"ok\"", eff)
			}
		})
	}
}

// TestFinishOutcomes: not_executed renews the key with a new attempt, unknown blocks it; a
// second guard on the same store (another serving process) records the outcome.
func TestFinishOutcomes(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			ctx := agent(t.Context())
			call := &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_1","amount":100}`)}
			p1, err := e.g.Begin(ctx, call)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := e.g.Finish(ctx, p1.ActionID, latch.OutcomeNotExecuted, nil, "card declined before charging")
			if !errors.Is(err, latch.ErrNotExecuted) || rc == nil || rc.Result != "failed" || rc.Error != "not executed: card declined before charging" {
				t.Fatalf("Finish(not_executed) = %+v, %v", rc, err)
			}
			p2, err := e.g.Begin(ctx, call)
			if err != nil || p2.Attempt != 2 || p2.IdempotencyToken == p1.IdempotencyToken {
				t.Fatalf("Begin after failed = %+v, %v; want attempt 2 with a new token", p2, err)
			}
			if p1.EffectToken == "" || p2.EffectToken != p1.EffectToken || p1.EffectToken == p1.IdempotencyToken {
				t.Errorf("effect tokens %q, %q: want one per key, the same for both attempts", p1.EffectToken, p2.EffectToken)
			}

			g2 := e.another(t, testPolicy)
			if _, err := g2.Extend(ctx, p2.ActionID, policy.MaxLease+time.Second); err == nil || !strings.Contains(err.Error(), "longer than the longest lease") {
				t.Errorf("Extend past 7 days = %v, want refused", err)
			}
			if until, err := g2.Extend(ctx, p2.ActionID, 10*time.Minute); err != nil || !until.Equal(e.clock.Now().Add(10*time.Minute)) {
				t.Errorf("Extend from another guard = %v, %v", until, err)
			}
			if got, err := e.g.Pending(ctx, p2.ActionID); err != nil || !got.LeaseExpiresAt.Equal(e.clock.Now().Add(10*time.Minute)) || got.Attempt != 2 {
				t.Errorf("Pending = %+v, %v; want the extended lease", got, err)
			}
			rc, err = g2.Finish(ctx, p2.ActionID, latch.OutcomeUnknown, nil, "timeout")
			if !errors.Is(err, latch.ErrAmbiguous) || rc == nil || rc.Result != "ambiguous" || rc.Attempt != 2 {
				t.Fatalf("Finish(unknown) from another guard = %+v, %v", rc, err)
			}
			if _, err := e.g.Begin(ctx, call); !errors.Is(err, latch.ErrAmbiguousEffect) {
				t.Errorf("Begin after unknown err = %v, want ErrAmbiguousEffect", err)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestBeginApprovalAndNoKey: an approval-gated call begun remotely asks for approval, spends it
// when presented, and its receipt names approval and approver; a call with no effect key is
// begun and finished like any other.
func TestBeginApprovalAndNoKey(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			ctx := agent(t.Context())
			call := &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_9","amount":90000}`)}
			_, err := e.g.Begin(ctx, call)
			var ar *latch.ApprovalRequiredError
			if !errors.As(err, &ar) {
				t.Fatalf("Begin over the limit: %v, want approval required", err)
			}
			if _, err := e.g.Approve(t.Context(), ar.ApprovalID, "alice"); err != nil {
				t.Fatal(err)
			}
			p, err := e.g.Begin(latch.WithApproval(ctx, ar.ApprovalID), call)
			if err != nil || p.ApprovalID != ar.ApprovalID || p.Decision != policy.Approve {
				t.Fatalf("Begin with approval = %+v, %v", p, err)
			}
			rc, err := e.g.Finish(ctx, p.ActionID, latch.OutcomeCommitted, nil, "")
			if err != nil || rc.ApprovalID != ar.ApprovalID || rc.Approver != "alice" || rc.Result != "committed" {
				t.Fatalf("Finish = %+v, %v", rc, err)
			}
			if _, err := e.g.Begin(latch.WithApproval(ctx, ar.ApprovalID), call); !errors.Is(err, latch.ErrApprovalMismatch) {
				t.Errorf("replayed approval: err = %v, want consumed", err)
			}

			before := writes(t, e.g)
			p, err = e.g.Begin(ctx, &latch.Call{Action: "report.read", Arguments: json.RawMessage(`{"q":1}`)})
			if err != nil || p.EffectKey != "" || p.Attempt != 0 || p.IdempotencyToken != "" {
				t.Fatalf("Begin(report.read) = %+v, %v", p, err)
			}
			if _, err := e.g.Extend(ctx, p.ActionID, time.Minute); outcomeReason(err) != "no_lease" {
				t.Errorf("Extend on a call without a key: err = %v, want no_lease", err)
			}
			rc, err = e.g.Finish(ctx, p.ActionID, latch.OutcomeCommitted, json.RawMessage(`[1,2]`), "")
			if err != nil || rc.Result != "committed" || rc.EffectKey != "" || string(rc.Arguments) != `{"q":1}` {
				t.Fatalf("Finish(report.read) = %+v, %v", rc, err)
			}
			if n := writes(t, e.g) - before; n != 2 {
				t.Errorf("a begun call without a key wrote %d transactions, want 2 (its opening events, its record)", n)
			}
			if _, err := e.g.Finish(ctx, p.ActionID, latch.OutcomeCommitted, nil, ""); outcomeReason(err) != "already_recorded" {
				t.Errorf("replay without a key: err = %v, want already_recorded", err)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestFinishConcurrentOnce: eight concurrent posts of one outcome, half of them to a second
// guard on the store (another process serving it, which rebuilds the call from the store),
// record it once.
func TestFinishConcurrentOnce(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			guards := []*latch.Guard{e.g, e.another(t, testPolicy)}
			ctx := agent(t.Context())
			p, err := e.g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_1","amount":100}`)})
			if err != nil {
				t.Fatal(err)
			}
			before := receiptCount(t, e.g)
			var wg sync.WaitGroup
			var mu sync.Mutex
			ok, refused := 0, 0
			for i := range 8 {
				wg.Go(func() {
					_, err := guards[i%2].Finish(ctx, p.ActionID, latch.OutcomeCommitted, nil, "")
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						ok++
					case outcomeReason(err) == "already_recorded":
						refused++
					default:
						t.Errorf("Finish: %v", err)
					}
				})
			}
			wg.Wait()
			if ok != 1 || refused != 7 || receiptCount(t, e.g)-before != 1 {
				t.Errorf("8 concurrent Finish: %d recorded, %d refused, %d receipts; want 1, 7, 1", ok, refused, receiptCount(t, e.g)-before)
			}
		})
	}
}

// TestBeginObserveMode: in observe mode a begun call runs whatever enforcement would have said,
// and its receipt is observed with would_have.
func TestBeginObserveMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "schema: latch.policy/v1\nmode: observe\nactions:\n  billing.charge:\n    effect: \"charge:{invoice_id}\"\n    decision: deny\n")
	ctx := agent(t.Context())
	call := &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_1"}`)}
	p, err := e.g.Begin(ctx, call)
	if err != nil || p.WouldHave == nil || p.WouldHave.Decision != "deny" || p.WouldHave.Effect != "reserved" || p.EffectKey != "charge:inv_1" {
		t.Fatalf("Begin in observe mode = %+v, %v", p, err)
	}
	rc, err := e.g.Finish(ctx, p.ActionID, latch.OutcomeCommitted, nil, "")
	if err != nil || rc.Result != "observed" || rc.WouldHave == nil || rc.WouldHave.Effect != "reserved" || rc.Mode != "observe" {
		t.Fatalf("Finish in observe mode = %+v, %v", rc, err)
	}
	p, err = e.g.Begin(ctx, call)
	if err != nil || p.WouldHave.Effect != "committed" || p.EffectKey != "" {
		t.Fatalf("second Begin in observe mode = %+v, %v; want would_have committed, holding nothing", p, err)
	}
	rc, err = e.g.Finish(ctx, p.ActionID, latch.OutcomeCommitted, nil, "")
	if err != nil || rc.Result != "observed" || rc.WouldHave.Effect != "committed" || rc.EffectKey != "charge:inv_1" {
		t.Fatalf("second Finish in observe mode = %+v, %v", rc, err)
	}
}

// TestFinishFromMemoryIsFinishFromStore: the guard that began a call keeps it in memory for its
// outcome; another guard on the same store (another serve process, or this one restarted)
// rebuilds it from the store's events. Both record the same receipt, field for field but for
// what names the call itself, for every kind of begun call.
func TestFinishFromMemoryIsFinishFromStore(t *testing.T) {
	t.Parallel()
	const observe = "schema: latch.policy/v1\nmode: observe\nactions:\n  billing.charge:\n    effect: \"charge:{invoice_id}\"\n    decision: deny\n"
	type scenario struct {
		name, policy, action string
		args                 func(n int) string // n tells the two copies of the call apart
		approve              bool
		outcome              latch.Outcome
		result               json.RawMessage
		errText              string
		before               func(t *testing.T, g *latch.Guard, ctx context.Context, n int) // runs before the Begin
	}
	charge := func(amount int) func(int) string {
		return func(n int) string { return fmt.Sprintf(`{"invoice_id":"inv_%d","amount":%d}`, n, amount) }
	}
	cases := []scenario{
		{name: "committed with a result", policy: testPolicy, action: "billing.charge", args: charge(100), outcome: latch.OutcomeCommitted, result: json.RawMessage(`{"charge":"ch_1"}`)},
		{name: "not executed", policy: testPolicy, action: "billing.charge", args: charge(100), outcome: latch.OutcomeNotExecuted, errText: "card declined"},
		{name: "unknown", policy: testPolicy, action: "billing.charge", args: charge(100), outcome: latch.OutcomeUnknown},
		{name: "approved", policy: testPolicy, action: "billing.charge", args: charge(90000), approve: true, outcome: latch.OutcomeCommitted},
		{name: "no effect key", policy: testPolicy, action: "report.read", args: func(n int) string { return fmt.Sprintf(`{"q":%d}`, n) }, outcome: latch.OutcomeCommitted, result: json.RawMessage(`[1]`)},
		{name: "observe, reserved", policy: observe, action: "billing.charge", args: func(n int) string { return fmt.Sprintf(`{"invoice_id":"inv_%d"}`, n) }, outcome: latch.OutcomeCommitted},
		{name: "observe, holding nothing", policy: observe, action: "billing.charge", args: func(n int) string { return fmt.Sprintf(`{"invoice_id":"inv_%d"}`, n) }, outcome: latch.OutcomeCommitted,
			before: func(t *testing.T, g *latch.Guard, ctx context.Context, n int) {
				call := &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(fmt.Sprintf(`{"invoice_id":"inv_%d"}`, n))}
				if _, err := g.Execute(ctx, call, func(context.Context, json.RawMessage) (any, error) { return nil, nil }); err != nil {
					t.Fatal(err)
				}
			}},
	}
	// volatile are the receipt fields that name the call itself.
	volatile := []string{"action_id", "receipt_id", "seq", "prev_hash", "arguments", "action_hash", "effect_key", "resource",
		"idempotency_token", "approval_id", "started_at", "finished_at"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.policy)
			other := e.another(t, tc.policy)
			ctx := agent(t.Context())
			docs := make([]map[string]any, 2)
			for n, finisher := range []*latch.Guard{e.g, other} {
				if tc.before != nil {
					tc.before(t, e.g, ctx, n)
				}
				call := &latch.Call{Action: tc.action, Arguments: json.RawMessage(tc.args(n))}
				bctx := ctx
				if tc.approve {
					_, err := e.g.Begin(ctx, call)
					var ar *latch.ApprovalRequiredError
					if !errors.As(err, &ar) {
						t.Fatalf("Begin: %v, want approval required", err)
					}
					if _, err := e.g.Approve(t.Context(), ar.ApprovalID, "alice"); err != nil {
						t.Fatal(err)
					}
					bctx = latch.WithApproval(ctx, ar.ApprovalID)
				}
				pd, err := e.g.Begin(bctx, call)
				if err != nil {
					t.Fatalf("Begin: %v", err)
				}
				rc, _ := finisher.Finish(ctx, pd.ActionID, tc.outcome, tc.result, tc.errText)
				if rc == nil {
					t.Fatalf("Finish on guard %d recorded nothing", n)
				}
				sameAsStored(t, rc)
				if tc.approve && (rc.Approval == nil || rc.Approval.Status != "consumed" || rc.Approval.Approver != "alice") {
					t.Errorf("Finish on guard %d: receipt's approval = %+v, want the spent approval (consumed, alice) chained as Execute chains it", n, rc.Approval)
				}
				if err := json.Unmarshal(rc.Doc, &docs[n]); err != nil {
					t.Fatal(err)
				}
				if s, ok := docs[n]["error"].(string); ok {
					docs[n]["error"] = strings.ReplaceAll(s, fmt.Sprintf("inv_%d", n), "inv_N")
				}
				for _, k := range volatile {
					delete(docs[n], k)
				}
				if eff, ok := docs[n]["effect"].(map[string]any); ok {
					delete(eff, "holder") // the action id again
				}
			}
			if diff := cmp.Diff(docs[0], docs[1]); diff != "" {
				t.Errorf("receipt finished from memory vs from the store (-memory +store):\n%s", diff)
			}
		})
	}
}

// TestFinishForgetsBegunCall: the guard that began a call keeps it in memory only until its
// Finish ends, however it ends — recorded here, found recorded by another process, or recorded as
// a late outcome after the sweep made the lapsed lease ambiguous — and not after a refusal to
// someone else.
func TestFinishForgetsBegunCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	other := e.another(t, testPolicy)
	ctx := agent(t.Context())
	begin := func(invoice string) string {
		t.Helper()
		pd, err := e.g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"` + invoice + `","amount":100}`)})
		if err != nil {
			t.Fatalf("Begin: %v", err)
		}
		if !e.g.BegunCached(pd.ActionID) {
			t.Fatalf("Begin did not keep %s in memory", pd.ActionID)
		}
		return pd.ActionID
	}

	id := begin("inv_1")
	stranger := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "other-worker"})
	if _, err := e.g.Finish(stranger, id, latch.OutcomeCommitted, nil, ""); outcomeReason(err) != "not_holder" {
		t.Fatalf("Finish by another principal: %v, want not_holder", err)
	}
	if !e.g.BegunCached(id) {
		t.Errorf("a refusal to another principal dropped the begun call")
	}
	if _, err := e.g.Finish(ctx, id, latch.OutcomeCommitted, nil, ""); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if e.g.BegunCached(id) {
		t.Errorf("recorded: still kept in memory")
	}

	id = begin("inv_2")
	if _, err := other.Finish(ctx, id, latch.OutcomeCommitted, nil, ""); err != nil {
		t.Fatalf("Finish from another guard: %v", err)
	}
	if _, err := e.g.Finish(ctx, id, latch.OutcomeCommitted, nil, ""); outcomeReason(err) != "already_recorded" {
		t.Fatalf("Finish after another guard's: %v, want already_recorded", err)
	}
	if e.g.BegunCached(id) {
		t.Errorf("recorded by another guard: still kept in memory after Finish found it recorded")
	}

	id = begin("inv_3")
	e.clock.Add(latch.DefaultLease + time.Second)
	if _, err := e.g.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rc, err := e.g.Finish(ctx, id, latch.OutcomeCommitted, nil, ""); rc == nil {
		t.Fatalf("Finish after the lease lapsed and was swept: %v, want its late outcome recorded", err)
	}
	if e.g.BegunCached(id) {
		t.Errorf("lease lapsed and swept: still kept in memory after Finish")
	}
}
