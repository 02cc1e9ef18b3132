package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// budgetPolicy has an action's own budget per agent (payout.send: 1000 a day of amount), a
// policy grant with a budget (ops: 3 calls a day of anything under ops.*) that may be
// delegated, and an unkeyed action the grant covers.
const budgetPolicy = `
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
  ops.restart:
    effect: "restart:{id}"
    decision: allow
  ops.charge:
    effect: "charge:{id}"
    decision: allow
  ops.read:
    decision: allow
  ops.approve:
    effect: "approve:{id}"
    decision: approve
authority:
  grants:
    - id: payouts
      subject: {agent: "*"}
      actions: [payout.send]
    - id: ops
      subject: {agent: lead}
      actions: ["ops.*"]
      expires_at: "2027-01-01T00:00:00Z"
      delegable: true
      budgets:
        - {metric: count, limit: 3, window: P1D}
    - id: metered
      subject: {agent: meter}
      actions: ["ops.*"]
      budgets:
        - {metric: amount, limit: 100, window: PT1H}
`

func as(ctx context.Context, agent string) context.Context {
	return latch.WithPrincipal(ctx, latch.Principal{Agent: agent})
}

func ran(context.Context, json.RawMessage) (any, error) { return "ok", nil }

func call(action, args string) *latch.Call {
	return &latch.Call{Action: action, Arguments: json.RawMessage(args)}
}

// budgetErr checks that err is a budget refusal with the given reason, budget, metric and
// window, read the same way through RefusalOf.
func budgetErr(t *testing.T, err error, reason, budget, metric string, window time.Duration) {
	t.Helper()
	var be *latch.BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("err = %T %v, want a *latch.BudgetError %s", err, err, reason)
	}
	if be.Reason != reason || be.Budget != budget || be.Metric != metric || be.Window != window {
		t.Errorf("BudgetError = %+v, want %s on budget %q metric %q window %v", be, reason, budget, metric, window)
	}
	r := latch.RefusalOf(err)
	if r.Kind != latch.KindDenied || string(r.Reason) != reason || r.Budget != budget || r.Metric != metric || r.Window != policy.FormatISODuration(window) {
		t.Errorf("RefusalOf = %+v, want kind denied, %s, %s %s %s", r, reason, budget, metric, policy.FormatISODuration(window))
	}
	if !errors.Is(err, latch.ErrDenied) || errors.Is(err, latch.ErrBudgetExhausted) != (reason == "budget_exhausted") {
		t.Errorf("errors.Is(%v): ErrDenied %v, ErrBudgetExhausted %v", err, errors.Is(err, latch.ErrDenied), errors.Is(err, latch.ErrBudgetExhausted))
	}
}

// TestBudgetActionPerAgent: an action's own budget per agent admits calls while their amounts
// fit its limit in the rolling window, refuses the one that would pass it (budget_exhausted,
// naming the budget and never the amount left), keeps each agent's share apart, and admits
// again once the window has rolled past the earlier charges. Receipts record what was charged.
func TestBudgetActionPerAgent(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, budgetPolicy)
			ctx := as(t.Context(), "bot-a")
			budget := store.ActionBudget("payout.send", "agent", "bot-a")
			for i, amount := range []int{400, 550} {
				rc, err := e.g.Execute(ctx, call("payout.send", fmt.Sprintf(`{"payout_id":"p%d","amount":%d}`, i, amount)), ran)
				if err != nil {
					t.Fatalf("payout %d: %v", i, err)
				}
				want := []receipt.BudgetCharge{{Budget: budget, Metric: "amount", Amount: int64(amount), Limit: 1000, Window: "P1D"}}
				if diff := cmp.Diff(want, rc.BudgetCharges); diff != "" {
					t.Errorf("payout %d receipt charges (-want +got):\n%s", i, diff)
				}
				sameAsStored(t, rc)
			}
			ranIt := false
			rc, err := e.g.Execute(ctx, call("payout.send", `{"payout_id":"p2","amount":51}`), func(context.Context, json.RawMessage) (any, error) {
				ranIt = true
				return nil, nil
			})
			budgetErr(t, err, "budget_exhausted", budget, "amount", 24*time.Hour)
			if ranIt {
				t.Error("the executor ran on a refused call")
			}
			if rc == nil || rc.Result != receipt.Denied || rc.DecisionReason != "budget_exhausted" || rc.BudgetCharges != nil {
				t.Fatalf("refused receipt = %+v, want denied budget_exhausted with no charges", rc)
			}
			for _, leak := range []string{"50", "49", "950", "1000"} { // left, used, limit
				if strings.Contains(err.Error(), leak) || strings.Contains(rc.Error, leak) {
					t.Errorf("the refusal %q tells an amount (%s)", err.Error(), leak)
				}
			}
			if _, err := e.g.Store().Effect(t.Context(), "payout:p2"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a refused payout reserved its key: %v", err)
			}
			// What is left still admits a call that fits it.
			if _, err := e.g.Execute(ctx, call("payout.send", `{"payout_id":"p3","amount":50}`), ran); err != nil {
				t.Fatalf("a payout that fits what is left: %v", err)
			}
			// Another agent has its own share.
			if _, err := e.g.Execute(as(t.Context(), "bot-b"), call("payout.send", `{"payout_id":"p4","amount":1000}`), ran); err != nil {
				t.Fatalf("another agent's payout: %v", err)
			}
			// The window rolls: a day after the first charges they no longer count.
			e.clock.Add(24*time.Hour + time.Second)
			if _, err := e.g.Execute(ctx, call("payout.send", `{"payout_id":"p5","amount":1000}`), ran); err != nil {
				t.Fatalf("a payout a day later: %v", err)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestBudgetChargesTheChain: a call allowed by a delegation is charged against the delegation's
// budgets and every grant's above it, so the holder of the policy grant and the delegatee share
// the policy grant's budget; the refusal names the grant that is exhausted (an ancestor), and the
// receipt lists every charge.
func TestBudgetChargesTheChain(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, budgetPolicy)
			d, err := e.g.Delegate(t.Context(), "ops", []byte("subject: {agent: helper}\nactions: [ops.restart]\nexpires_at: \"2026-12-31T00:00:00Z\"\nbudgets:\n  - {metric: count, limit: 3, window: P2D}\n"),
				latch.Principal{Agent: "lead"})
			if err != nil {
				t.Fatalf("Delegate: %v", err)
			}
			// A delegation that would drop or widen the parent's budget is refused.
			for _, grant := range []string{
				"subject: {agent: helper}\nactions: [ops.restart]\nexpires_at: \"2026-12-31T00:00:00Z\"\n",
				"subject: {agent: helper}\nactions: [ops.restart]\nexpires_at: \"2026-12-31T00:00:00Z\"\nbudgets:\n  - {metric: count, limit: 3, window: PT12H}\n",
			} {
				var ae *latch.AuthorityError
				if _, err := e.g.Delegate(t.Context(), "ops", []byte(grant), latch.Principal{Agent: "lead"}); !errors.As(err, &ae) || ae.Dimension != "budgets" {
					t.Errorf("Delegate(%q) = %v, want an authority refusal on budgets", grant, err)
				}
			}
			lead, helper := as(t.Context(), "lead"), as(t.Context(), "helper")
			if _, err := e.g.Execute(lead, call("ops.restart", `{"id":"1"}`), ran); err != nil {
				t.Fatal(err)
			}
			rc, err := e.g.Execute(helper, call("ops.restart", `{"id":"2"}`), ran)
			if err != nil {
				t.Fatal(err)
			}
			want := []receipt.BudgetCharge{
				{Budget: d.ID, Metric: "count", Amount: 1, Limit: 3, Window: "P2D"},
				{Budget: "ops", Metric: "count", Amount: 1, Limit: 3, Window: "P1D"},
			}
			if diff := cmp.Diff(want, rc.BudgetCharges); diff != "" {
				t.Errorf("delegated call's charges (-want +got):\n%s", diff)
			}
			if _, err := e.g.Execute(lead, call("ops.charge", `{"id":"3"}`), ran); err != nil {
				t.Fatal(err)
			}
			// ops has spent its 3: the delegation has room, its parent has none.
			_, err = e.g.Execute(helper, call("ops.restart", `{"id":"4"}`), ran)
			budgetErr(t, err, "budget_exhausted", "ops", "count", 24*time.Hour)
			verifyChain(t, e.g)
		})
	}
}

// TestBudgetRefusesWhatCannotBeCharged: a metered argument that is absent, not an integer (a
// string is never read as a number) or negative, and a budgeted call with no effect key, are
// refused before anything is reserved, each with its reason and a denied receipt.
func TestBudgetRefusesWhatCannotBeCharged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, budgetPolicy)
	ctx := as(t.Context(), "meter")
	for _, tc := range []struct {
		action, args, reason string
	}{
		{"ops.restart", `{"id":"1"}`, "budget_metric_missing"},
		{"ops.restart", `{"id":"2","amount":"10"}`, "budget_metric_invalid"},
		{"ops.restart", `{"id":"3","amount":-1}`, "budget_metric_invalid"},
		{"ops.restart", `{"id":"4","amount":true}`, "budget_metric_invalid"},
		{"ops.read", `{"amount":1}`, "budget_needs_effect_key"},
	} {
		rc, err := e.g.Execute(ctx, call(tc.action, tc.args), ran)
		budgetErr(t, err, tc.reason, "metered", "amount", time.Hour)
		if rc == nil || rc.Result != receipt.Denied || rc.Decision != "deny" || rc.DecisionReason != tc.reason {
			t.Errorf("%s %s: receipt %+v, want denied deny %s", tc.action, tc.args, rc, tc.reason)
		}
		ev, err := e.g.Evaluate(ctx, call(tc.action, tc.args))
		if err != nil || ev.Decision != policy.Deny || ev.Reason != tc.reason {
			t.Errorf("Evaluate(%s %s) = %+v, %v; want deny %s, as Execute", tc.action, tc.args, ev, err, tc.reason)
		}
	}
	if effs, err := e.g.Store().Effects(t.Context(), store.EffectFilter{}); err != nil || len(effs) != 0 {
		t.Errorf("refused calls reserved %d effects (%v)", len(effs), err)
	}
	if _, err := e.g.Execute(ctx, call("ops.restart", `{"id":"5","amount":100}`), ran); err != nil {
		t.Errorf("a metered call that fits: %v", err)
	}
	verifyChain(t, e.g)
}

// noLedger is a real store seen only through store.Store and store.DelegationStore: a store
// that keeps delegations but no budget ledger.
type noLedger struct {
	store.Store
	store.DelegationStore
}

func withoutLedger(st store.Store) noLedger { return noLedger{st, st.(store.DelegationStore)} }

// TestBudgetWithoutLedgerFailsClosed: a store that keeps no budget ledger cannot enforce a
// budget, so every budgeted call is refused, and nothing is reserved; unbudgeted calls run.
func TestBudgetWithoutLedgerFailsClosed(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse("latch.yaml", []byte(budgetPolicy))
	if err != nil {
		t.Fatal(err)
	}
	st, err := latch.OpenStore(t.Context(), "sqlite:"+t.TempDir()+"/s.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, Store: withoutLedger(st)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ran := 0
	exec := func(context.Context, json.RawMessage) (any, error) { ran++; return nil, nil }
	_, err = g.Execute(as(t.Context(), "bot"), call("payout.send", `{"payout_id":"p1","amount":1}`), exec)
	if err == nil || !strings.Contains(err.Error(), "keeps no budget ledger") || latch.RefusalOf(err).Kind != latch.KindInternal {
		t.Errorf("budgeted call on a store without a ledger: %v, want refused (internal): keeps no budget ledger", err)
	}
	if _, err := st.Effect(t.Context(), "payout:p1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused call reserved its key: %v", err)
	}
	if _, err := g.Execute(as(t.Context(), "lead"), call("ops.read", `{}`), exec); err == nil {
		t.Error("a call under a budgeted grant ran on a store without a ledger")
	}
	pol, _ := policy.Parse("latch.yaml", []byte(testPolicy))
	g2, err := latch.Open(t.Context(), &latch.Config{Policy: pol, Store: withoutLedger(mustOpenStore(t))})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	if _, err := g2.Execute(agent(t.Context()), call("billing.charge", `{"invoice_id":"i1","amount":1}`), exec); err != nil {
		t.Errorf("an unbudgeted call on a store without a ledger: %v", err)
	}
	if ran != 1 {
		t.Errorf("executors ran %d times, want 1 (the unbudgeted call)", ran)
	}
}

func mustOpenStore(t *testing.T) store.Store {
	t.Helper()
	st, err := latch.OpenStore(t.Context(), "sqlite:"+t.TempDir()+"/s.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestBudgetHeldUntilFailed: a charge is held while its effect is committed or ambiguous, and
// released exactly when the effect becomes failed — by the executor's NotExecuted, by a person
// resolving it failed, by a reconcile hook's not executed — after which the next call fits.
func TestBudgetHeldUntilFailed(t *testing.T) {
	t.Parallel()
	const onePerDay = `
schema: latch.policy/v1
actions:
  mail.send:
    effect: "mail:{id}"
    decision: allow
    budgets:
      - {metric: count, limit: 1, window: P1D, per: agent}
`
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, onePerDay)
			ctx := as(t.Context(), "mailer")
			send := func(id string, fn latch.Executor, opts *latch.Options) error {
				c := call("mail.send", `{"id":"`+id+`"}`)
				c.Options = opts
				_, err := e.g.Execute(ctx, c, fn)
				return err
			}
			exhausted := func(id string) {
				t.Helper()
				if err := send(id, ran, nil); !errors.Is(err, latch.ErrBudgetExhausted) {
					t.Fatalf("send %s = %v, want budget_exhausted", id, err)
				}
			}
			notExecuted := func(context.Context, json.RawMessage) (any, error) {
				return nil, latch.NotExecuted(errors.New("smtp refused"))
			}
			unknown := func(context.Context, json.RawMessage) (any, error) { return nil, io.ErrUnexpectedEOF }

			// NotExecuted releases: the next call fits.
			if err := send("1", notExecuted, nil); !errors.Is(err, latch.ErrNotExecuted) {
				t.Fatalf("send 1 = %v, want not executed", err)
			}
			if err := send("2", ran, nil); err != nil {
				t.Fatalf("send 2 after a not-executed one: %v", err)
			}
			// Committed holds.
			exhausted("3")

			// Ambiguous holds until a person resolves it failed.
			e.clock.Add(24*time.Hour + time.Second)
			if err := send("4", unknown, nil); !errors.Is(err, latch.ErrAmbiguous) {
				t.Fatalf("send 4 = %v, want ambiguous", err)
			}
			e.clock.Add(time.Hour)
			exhausted("5")
			if _, err := e.g.Resolve(t.Context(), "mail:4", store.Failed, "cli:operator"); err != nil {
				t.Fatalf("Resolve failed: %v", err)
			}
			if err := send("5", ran, nil); err != nil {
				t.Fatalf("send 5 after mail:4 was resolved failed: %v", err)
			}

			// A reconcile hook's not executed releases the ambiguous attempt's charge, and the
			// renewal charges again under its new attempt.
			e.clock.Add(24*time.Hour + time.Second)
			if err := send("6", unknown, nil); !errors.Is(err, latch.ErrAmbiguous) {
				t.Fatalf("send 6 = %v, want ambiguous", err)
			}
			exhausted("7")
			hook := func(context.Context, *latch.Attempt) (latch.Outcome, any, error) {
				return latch.OutcomeNotExecuted, nil, nil
			}
			if err := send("6", ran, &latch.Options{Reconcile: hook}); err != nil {
				t.Fatalf("send 6 again with a hook that says not executed: %v", err)
			}
			exhausted("7") // the renewal of mail:6 holds the day's one
			verifyChain(t, e.g)
		})
	}
}

// TestBudgetObserveChargesNothing: observe mode runs every call and charges nothing; a call
// enforcement would have refused for its budget is recorded deny budget_exhausted in would_have.
func TestBudgetObserveChargesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "mode: observe\n"+budgetPolicy)
	ctx := as(t.Context(), "bot")
	// Enforced alongside, on the same store: it holds 900 of bot's 1000.
	enforced := e.another(t, budgetPolicy)
	if _, err := enforced.Execute(ctx, call("payout.send", `{"payout_id":"e1","amount":900}`), ran); err != nil {
		t.Fatal(err)
	}
	runs := 0
	exec := func(context.Context, json.RawMessage) (any, error) { runs++; return nil, nil }
	for i, tc := range []struct {
		agent, action, args, decision, reason string
	}{
		{"bot", "payout.send", `{"payout_id":"o1","amount":100}`, "allow", "decision"},
		{"bot", "payout.send", `{"payout_id":"o2","amount":101}`, "deny", "budget_exhausted"},
		{"meter", "ops.restart", `{"id":"o3"}`, "deny", "budget_metric_missing"},
		{"meter", "ops.restart", `{"id":"o4","amount":"5"}`, "deny", "budget_metric_invalid"},
	} {
		rc, err := e.g.Execute(as(ctx, tc.agent), call(tc.action, tc.args), exec)
		if err != nil {
			t.Fatalf("observed call %d: %v", i, err)
		}
		if rc.Result != receipt.Observed || rc.WouldHave == nil || rc.WouldHave.Decision != tc.decision || rc.WouldHave.Reason != tc.reason || rc.BudgetCharges != nil {
			t.Errorf("observed call %d: result %s would_have %+v charges %v; want observed, %s %s, no charges", i, rc.Result, rc.WouldHave, rc.BudgetCharges, tc.decision, tc.reason)
		}
	}
	if runs != 4 {
		t.Errorf("observe mode ran %d of 4 calls", runs)
	}
	rows, err := e.g.Store().(store.BudgetStore).Charges(t.Context(), store.ChargeFilter{})
	if err != nil || len(rows) != 1 || rows[0].EffectKey != "payout:e1" {
		t.Errorf("ledger rows = %d (%v), want only the enforced call's", len(rows), err)
	}
}

// TestBudgetApproval: a budgeted call that needs approval is charged when the approval is
// spent; once its budget is exhausted, a new request is refused before a person is asked.
func TestBudgetApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t, budgetPolicy)
	ctx := as(t.Context(), "lead")
	for i := range 3 {
		c := call("ops.approve", fmt.Sprintf(`{"id":"%d"}`, i))
		_, err := e.g.Execute(ctx, c, ran)
		var ar *latch.ApprovalRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("call %d: %v, want approval required", i, err)
		}
		if _, err := e.g.Approve(t.Context(), ar.ApprovalID, "alice"); err != nil {
			t.Fatalf("approve %d: %v", i, err)
		}
		rc, err := e.g.Execute(latch.WithApproval(ctx, ar.ApprovalID), c, ran)
		if err != nil {
			t.Fatalf("approved call %d: %v", i, err)
		}
		if len(rc.BudgetCharges) != 1 || rc.BudgetCharges[0].Budget != "ops" {
			t.Errorf("approved call %d charges = %+v, want one on ops", i, rc.BudgetCharges)
		}
	}
	_, err := e.g.Execute(ctx, call("ops.approve", `{"id":"9"}`), ran)
	budgetErr(t, err, "budget_exhausted", "ops", "count", 24*time.Hour)
	if as, _ := e.g.Store().Approvals(t.Context(), store.ApprovalFilter{}); len(as) != 3 {
		t.Errorf("%d approval requests stored, want 3 (none for the exhausted call)", len(as))
	}
}

// TestBudgetBeginFinish: a call begun with Begin is charged on its reservation, and its receipt
// records the charges also when its outcome is recorded by another process serving the store.
func TestBudgetBeginFinish(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, budgetPolicy)
			ctx := as(t.Context(), "bot")
			want := []receipt.BudgetCharge{{Budget: store.ActionBudget("payout.send", "agent", "bot"), Metric: "amount", Amount: 600, Limit: 1000, Window: "P1D"}}
			p, err := e.g.Begin(ctx, call("payout.send", `{"payout_id":"b1","amount":600}`))
			if err != nil {
				t.Fatal(err)
			}
			other := e.another(t, budgetPolicy)
			rc, err := other.Finish(ctx, p.ActionID, latch.OutcomeCommitted, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, rc.BudgetCharges); diff != "" {
				t.Errorf("receipt finished elsewhere (-want +got):\n%s", diff)
			}
			_, err = e.g.Begin(ctx, call("payout.send", `{"payout_id":"b2","amount":401}`))
			budgetErr(t, err, "budget_exhausted", want[0].Budget, "amount", 24*time.Hour)
			verifyChain(t, e.g) // the ledger agrees with the receipt written elsewhere
		})
	}
}

// TestBudgetRateAndTotal: two budgets on one metric of one grant, a rate (2 an hour) and a total
// (3 a day), both hold; the refusal names the window that refused; the ledger, one row per
// charged (budget, metric), agrees with the receipts (the chain verifies, state included).
func TestBudgetRateAndTotal(t *testing.T) {
	t.Parallel()
	const doc = `
schema: latch.policy/v1
actions:
  deploy.run:
    effect: "deploy:{id}"
    decision: allow
authority:
  grants:
    - id: deployers
      subject: {agent: ci}
      actions: [deploy.run]
      budgets:
        - {metric: count, limit: 2, window: PT1H}
        - {metric: count, limit: 3, window: P1D}
`
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, doc)
			ctx := as(t.Context(), "ci")
			deploy := func(id string) error {
				_, err := e.g.Execute(ctx, call("deploy.run", `{"id":"`+id+`"}`), ran)
				return err
			}
			for _, id := range []string{"1", "2"} {
				if err := deploy(id); err != nil {
					t.Fatalf("deploy %s: %v", id, err)
				}
			}
			budgetErr(t, deploy("3"), "budget_exhausted", "deployers", "count", time.Hour)
			e.clock.Add(time.Hour + time.Second)
			if err := deploy("3"); err != nil {
				t.Fatalf("deploy 3 an hour later: %v", err)
			}
			e.clock.Add(time.Hour + time.Second)
			budgetErr(t, deploy("4"), "budget_exhausted", "deployers", "count", 24*time.Hour)
			verifyChain(t, e.g)
		})
	}
}

// TestWindowTextOneForm: a window is written one way everywhere — receipts (the policy's
// FormatISODuration) and the store's refusals and ledger check (store.FormatWindow) — and the
// store reads back what the receipt wrote, or the chain's ledger check would see a difference
// where there is none.
func TestWindowTextOneForm(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Second, 90 * time.Second, 15 * time.Minute, time.Hour, 24 * time.Hour,
		36 * time.Hour, 30 * 24 * time.Hour, 24*time.Hour + time.Second, 36500 * 24 * time.Hour} {
		p, s := policy.FormatISODuration(d), store.FormatWindow(d)
		if p != s {
			t.Errorf("window %v: policy writes %q, the store %q", d, p, s)
		}
		if back, err := store.ParseWindow(p); err != nil || back != d {
			t.Errorf("store.ParseWindow(%q) = %v, %v, want %v", p, back, err, d)
		}
	}
}
