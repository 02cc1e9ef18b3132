// Package toolcalltest is the one scenario table of tool calls that the tests of package
// toolcall and of the model SDK integrations (integrations/openai, integrations/anthropic) run:
// a guard on a real SQLite store, a registry of protected tools whose handlers count their runs,
// and, per scenario, what comes before the model's call (earlier calls, a person's answer) and
// what its tool result must say. Each consumer feeds the scenario's call to its own code — a
// fake model response decoded by the SDK's types — and checks the message it builds. It is
// imported by tests only.
package toolcalltest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/toolcall"
)

// Policy is the scenarios' latch.yaml.
const Policy = `schema: latch.policy/v1
actions:
  refund:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, min: 1 }
    rules:
      - when: { amount_lte: 1000 }
        decision: allow
      - decision: approve
  delete_account:
    effect: "delete:{account_id}"
    decision: deny
  send_email:
    effect: "email:{message_id}"
    decision: allow
    budgets:
      - { metric: count, limit: 1, window: P1D, per: agent }
  sync_inventory:
    effect: "sync:{sku}"
    decision: allow
  add_note:
    effect: "note:{input}"
    decision: allow
`

// Agent is the principal the registry acts as.
var Agent = latch.Principal{Agent: "support-bot"}

// Env is one guard, one registry and the tools' run counts.
type Env struct {
	G   *latch.Guard
	Reg *toolcall.Registry

	mu   sync.Mutex
	runs map[string]int // "tool:id" → handler runs

	// ApprovalID is the approval request a scenario's Before made, when it made one.
	ApprovalID string
	// hold, when set, makes the refund of that order block until release is closed, signalling
	// entered once it runs.
	hold    string
	entered chan struct{}
	release chan struct{}
}

// New opens a guard on a fresh SQLite store with Policy and registers the tools:
//
//	refund          allowed up to 1000, else approval; order "lost-…" acts, then loses its
//	                reply (an error: the outcome is unknown)
//	delete_account  registered, denied by the policy
//	send_email      allowed, one a day per agent (a budget)
//	wire_transfer   registered, not in the policy
//	sync_inventory  fails without acting (latch.NotExecuted) on sku "down"
//	add_note        allowed; takes {"input": text}, as a custom tool's call passes it
func New(t testing.TB) *Env {
	t.Helper()
	return Open(t, "sqlite:"+t.TempDir()+"/state.db")
}

// Open is New on the store at storeURL (a fresh one: the scenarios' keys must be unused).
func Open(t testing.TB, storeURL string) *Env {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(Policy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: p, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	e := &Env{G: g, Reg: toolcall.New(g, &toolcall.Config{Principal: Agent}), runs: map[string]int{}}
	type refund struct {
		OrderID string `json:"order_id"`
		Amount  int64  `json:"amount"`
	}
	type refunded struct {
		RefundID string `json:"refund_id"`
		Amount   int64  `json:"amount"`
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.Reg.Register(toolcall.Tool{Name: "refund", Handler: toolcall.Func(func(ctx context.Context, r refund) (refunded, error) {
		e.count("refund:" + r.OrderID)
		e.wait(r.OrderID)
		if strings.HasPrefix(r.OrderID, "lost-") {
			return refunded{}, errors.New("read tcp 10.0.0.7:443: i/o timeout") // acted; the reply is lost
		}
		return refunded{RefundID: "rf_" + r.OrderID, Amount: r.Amount}, nil
	})}))
	must(e.Reg.Register(toolcall.Tool{Name: "delete_account", Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
		e.count("delete_account")
		return "deleted", nil
	}}))
	must(e.Reg.Register(toolcall.Tool{Name: "send_email", Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
		e.count("send_email")
		return map[string]string{"status": "sent"}, nil
	}}))
	must(e.Reg.Register(toolcall.Tool{Name: "wire_transfer", Effect: "wire:{id}", Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
		e.count("wire_transfer")
		return "sent", nil
	}}))
	must(e.Reg.Register(toolcall.Tool{Name: "sync_inventory", Handler: toolcall.Func(func(ctx context.Context, a struct {
		SKU string `json:"sku"`
	}) (string, error) {
		e.count("sync_inventory:" + a.SKU)
		if a.SKU == "down" {
			return "", latch.NotExecuted(errors.New("inventory service unavailable (503), nothing changed"))
		}
		return "synced", nil
	})}))
	must(e.Reg.Register(toolcall.Tool{Name: "add_note", Handler: toolcall.Func(func(ctx context.Context, a struct {
		Input string `json:"input"`
	}) (string, error) {
		e.count("add_note:" + a.Input)
		return "noted: " + a.Input, nil
	})}))
	return e
}

func (e *Env) count(what string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs[what]++
}

// Runs is how many times the handler ran for what ("refund:ORDER", "send_email", …).
func (e *Env) Runs(what string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[what]
}

func (e *Env) wait(order string) {
	e.mu.Lock()
	hold, entered, release := e.hold, e.entered, e.release
	e.mu.Unlock()
	if hold == order {
		close(entered)
		<-release
	}
}

// Dispatch runs one call through the registry, as the agent's earlier turns did.
func (e *Env) Dispatch(t testing.TB, ctx context.Context, name, args string) *toolcall.Result {
	t.Helper()
	return e.Reg.Dispatch(ctx, toolcall.Call{ID: "call_before", Name: name, Arguments: json.RawMessage(args)})
}

// Scenario is one tool call of the model, what comes before it, and what its result says.
type Scenario struct {
	Name string
	// Before runs what happens before the model's call and returns the context the call is
	// dispatched with; nil means nothing, with the test's context.
	Before func(t *testing.T, e *Env) context.Context
	// Tool and Arguments are the model's call.
	Tool      string
	Arguments string
	Status    toolcall.Status
	IsError   bool
	// Contains are what the result's text must contain (the reason word first), given e.
	Contains func(e *Env) []string
	// Runs is how many times the handler has run for each of its keys once the call is answered.
	Runs map[string]int
}

// Scenarios is the table: one row per kind of answer a tool call gets.
var Scenarios = []Scenario{
	{
		Name: "ok", Tool: "refund", Arguments: `{"order_id":"o-1","amount":500}`,
		Status:   toolcall.StatusOK,
		Contains: words(`{"refund_id":"rf_o-1","amount":500}`),
		Runs:     map[string]int{"refund:o-1": 1},
	},
	{
		Name: "denied by a rule", Tool: "delete_account", Arguments: `{"account_id":"acc-9"}`,
		Status: toolcall.StatusRefused, IsError: true,
		Contains: words("denied: the policy does not allow this call", "rule: decision"),
		Runs:     map[string]int{"delete_account": 0},
	},
	{
		Name: "unlisted: registered, not in the policy", Tool: "wire_transfer", Arguments: `{"id":"w-1"}`,
		Status: toolcall.StatusRefused, IsError: true,
		Contains: words("unknown_action: the policy does not list this tool's action"),
		Runs:     map[string]int{"wire_transfer": 0},
	},
	{
		Name: "unlisted: no such tool", Tool: "launch_rocket", Arguments: `{}`,
		Status: toolcall.StatusRefused, IsError: true,
		Contains: words("unknown_action: there is no tool named launch_rocket"),
	},
	{
		Name: "invalid arguments: wrong type", Tool: "refund", Arguments: `{"order_id":"o-6","amount":"lots"}`,
		Status: toolcall.StatusRefused, IsError: true,
		Contains: words("invalid_arguments: the arguments do not fit", "argument: amount", "pointer: /amount"),
		Runs:     map[string]int{"refund:o-6": 0},
	},
	{
		Name: "invalid arguments: not JSON", Tool: "refund", Arguments: `{"order_id":"o-7",`,
		Status: toolcall.StatusRefused, IsError: true,
		Contains: words("invalid_argument: the arguments do not fit"),
		Runs:     map[string]int{"refund:o-7": 0},
	},
	{
		Name: "approval required", Tool: "refund", Arguments: `{"order_id":"o-2","amount":5000}`,
		Status: toolcall.StatusPending,
		Contains: func(e *Env) []string {
			return []string{"approval_required: a person must approve this call", "approval_id: apr_",
				"effect_key: refund:o-2", "action_hash: sha256:", "expires_at: "}
		},
		Runs: map[string]int{"refund:o-2": 0},
	},
	{
		Name: "approved, then called with the approval",
		Before: func(t *testing.T, e *Env) context.Context {
			id := e.requestAndApprove(t, `{"order_id":"o-8","amount":5000}`)
			return latch.WithApproval(t.Context(), id)
		},
		Tool: "refund", Arguments: `{"order_id":"o-8","amount":5000}`,
		Status:   toolcall.StatusOK,
		Contains: words(`{"refund_id":"rf_o-8","amount":5000}`),
		Runs:     map[string]int{"refund:o-8": 1},
	},
	{
		Name: "approval mismatch: another amount",
		Before: func(t *testing.T, e *Env) context.Context {
			id := e.requestAndApprove(t, `{"order_id":"o-3","amount":5000}`)
			return latch.WithApproval(t.Context(), id)
		},
		Tool: "refund", Arguments: `{"order_id":"o-3","amount":9000}`,
		Status: toolcall.StatusRefused, IsError: true,
		Contains: func(e *Env) []string {
			return []string{"approval_mismatch: the approval presented cannot be spent on this call", "approval_id: " + e.ApprovalID}
		},
		Runs: map[string]int{"refund:o-3": 0},
	},
	{
		Name: "duplicate of a committed effect",
		Before: func(t *testing.T, e *Env) context.Context {
			if r := e.Dispatch(t, t.Context(), "refund", `{"order_id":"o-4","amount":300}`); r.Status != toolcall.StatusOK {
				t.Fatalf("first refund: %s: %s", r.Status, r.Content)
			}
			return t.Context()
		},
		Tool: "refund", Arguments: `{"order_id":"o-4","amount":300}`,
		Status:   toolcall.StatusDuplicate,
		Contains: words("committed: this call's effect already happened; it did not run again", "effect_key: refund:o-4", `stored_result: {"refund_id":"rf_o-4","amount":300}`),
		Runs:     map[string]int{"refund:o-4": 1},
	},
	{
		Name: "outcome unknown: the reply was lost", Tool: "refund", Arguments: `{"order_id":"lost-5","amount":200}`,
		Status: toolcall.StatusUnknown, IsError: true,
		Contains: words("outcome_unknown: the outcome of this call is unknown", "Retrying is blocked", "effect_key: refund:lost-5", "i/o timeout"),
		Runs:     map[string]int{"refund:lost-5": 1},
	},
	{
		Name: "ambiguous: retried after a lost reply",
		Before: func(t *testing.T, e *Env) context.Context {
			if r := e.Dispatch(t, t.Context(), "refund", `{"order_id":"lost-9","amount":200}`); r.Status != toolcall.StatusUnknown {
				t.Fatalf("first refund: %s: %s", r.Status, r.Content)
			}
			return t.Context()
		},
		Tool: "refund", Arguments: `{"order_id":"lost-9","amount":200}`,
		Status: toolcall.StatusUnknown, IsError: true,
		Contains: words("ambiguous: the outcome of an earlier attempt of this call is unknown", "Retrying is blocked", "effect_key: refund:lost-9"),
		Runs:     map[string]int{"refund:lost-9": 1},
	},
	{
		Name: "in progress: another attempt holds the key",
		Before: func(t *testing.T, e *Env) context.Context {
			e.holdRefund(t, `{"order_id":"o-10","amount":100}`)
			return t.Context()
		},
		Tool: "refund", Arguments: `{"order_id":"o-10","amount":100}`,
		Status: toolcall.StatusRefused, IsError: true,
		Contains: words("in_progress: another attempt of this call is running now", "effect_key: refund:o-10"),
		Runs:     map[string]int{"refund:o-10": 1},
	},
	{
		Name: "budget exhausted",
		Before: func(t *testing.T, e *Env) context.Context {
			if r := e.Dispatch(t, t.Context(), "send_email", `{"message_id":"m-1"}`); r.Status != toolcall.StatusOK {
				t.Fatalf("first email: %s: %s", r.Status, r.Content)
			}
			return t.Context()
		},
		Tool: "send_email", Arguments: `{"message_id":"m-2"}`,
		Status: toolcall.StatusRefused, IsError: true,
		Contains: words("budget_exhausted: a budget this call is charged against has no room left", "budget: action:send_email:agent:support-bot", "metric: count", "window: P1D"),
		Runs:     map[string]int{"send_email": 1},
	},
	{
		Name: "not executed: the tool failed without acting", Tool: "sync_inventory", Arguments: `{"sku":"down"}`,
		Status: toolcall.StatusFailed, IsError: true,
		Contains: words("not_executed: the tool failed without acting", "inventory service unavailable (503)"),
		Runs:     map[string]int{"sync_inventory:down": 1},
	},
}

func words(w ...string) func(*Env) []string { return func(*Env) []string { return w } }

// requestAndApprove dispatches args as a refund, which must wait for approval, and grants the
// request as alice. It sets e.ApprovalID and returns it.
func (e *Env) requestAndApprove(t *testing.T, args string) string {
	t.Helper()
	r := e.Dispatch(t, t.Context(), "refund", args)
	if r.Status != toolcall.StatusPending || r.Refusal == nil || r.Refusal.ApprovalID == "" {
		t.Fatalf("refund %s: %s: %s, want approval_required", args, r.Status, r.Content)
	}
	if _, err := e.G.Approve(t.Context(), r.Refusal.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	e.ApprovalID = r.Refusal.ApprovalID
	return e.ApprovalID
}

// holdRefund starts a refund of args whose handler blocks, holding its effect key, until the
// test ends; it returns once the handler runs.
func (e *Env) holdRefund(t *testing.T, args string) {
	t.Helper()
	var a struct {
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.hold, e.entered, e.release = a.OrderID, make(chan struct{}), make(chan struct{})
	entered, release := e.entered, e.release
	e.mu.Unlock()
	done := make(chan *toolcall.Result, 1)
	go func() {
		done <- e.Reg.Dispatch(context.Background(), toolcall.Call{ID: "call_held", Name: "refund", Arguments: json.RawMessage(args)})
	}()
	<-entered
	t.Cleanup(func() {
		close(release)
		if r := <-done; r.Status != toolcall.StatusOK {
			t.Errorf("the held refund: %s: %s", r.Status, r.Content)
		}
	})
}

// Check runs the scenario's assertions on the result of its call: the status, IsError, the
// text, and the handlers' run counts.
func (s *Scenario) Check(t *testing.T, e *Env, r *toolcall.Result) {
	t.Helper()
	if r.Status != s.Status || r.IsError != s.IsError {
		t.Errorf("result = %s (is_error %t), want %s (is_error %t): %s", r.Status, r.IsError, s.Status, s.IsError, r.Content)
	}
	for _, w := range s.Contains(e) {
		if !strings.Contains(r.Content, w) {
			t.Errorf("result text = %q, want it to contain %q", r.Content, w)
		}
	}
	for k, n := range s.Runs {
		if got := e.Runs(k); got != n {
			t.Errorf("handler runs of %s = %d, want %d", k, got, n)
		}
	}
}

// Turn is a model's turn of three refunds: one the policy allows, two that wait for approval.
var Turn = []toolcall.Call{
	{ID: "call_t1", Name: "refund", Arguments: json.RawMessage(`{"order_id":"t-1","amount":100}`)},
	{ID: "call_t2", Name: "refund", Arguments: json.RawMessage(`{"order_id":"t-2","amount":7000}`)},
	{ID: "call_t3", Name: "refund", Arguments: json.RawMessage(`{"order_id":"t-3","amount":8000}`)},
}

// AnswerTurn checks the first answers to Turn (ok, pending, pending), then has a person approve
// the second refund and deny the third. It returns the approvals to run the turn again with.
func (e *Env) AnswerTurn(t *testing.T, results []*toolcall.Result) map[string]string {
	t.Helper()
	if len(results) != 3 || results[0].Status != toolcall.StatusOK || results[1].Status != toolcall.StatusPending || results[2].Status != toolcall.StatusPending {
		t.Fatalf("first answers to the turn: %+v", results)
	}
	pending := toolcall.Pending(results)
	if len(pending) != 2 || pending["call_t2"] == "" || pending["call_t3"] == "" {
		t.Fatalf("Pending = %v, want call_t2 and call_t3", pending)
	}
	if _, err := e.G.Approve(t.Context(), pending["call_t2"], "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.G.Deny(t.Context(), pending["call_t3"], "alice"); err != nil {
		t.Fatal(err)
	}
	return pending
}

// CheckTurnAgain checks the answers to Turn run again with the approvals: the refund that ran
// is a duplicate, the approved one runs, the denied one is refused; each refund ran at most once.
func (e *Env) CheckTurnAgain(t *testing.T, results []*toolcall.Result) {
	t.Helper()
	want := []struct {
		status toolcall.Status
		prefix string
	}{
		{toolcall.StatusDuplicate, "committed: "},
		{toolcall.StatusOK, `{"refund_id":"rf_t-2","amount":7000}`},
		{toolcall.StatusRefused, "approval_denied: "},
	}
	if len(results) != len(want) {
		t.Fatalf("%d answers, want %d", len(results), len(want))
	}
	for i, w := range want {
		if r := results[i]; r.Status != w.status || !strings.HasPrefix(r.Content, w.prefix) || r.CallID != Turn[i].ID {
			t.Errorf("answer %d = %s %s %q, want %s %s %q…", i, r.CallID, r.Status, r.Content, Turn[i].ID, w.status, w.prefix)
		}
	}
	for order, n := range map[string]int{"t-1": 1, "t-2": 1, "t-3": 0} {
		if got := e.Runs("refund:" + order); got != n {
			t.Errorf("refund %s ran %d times, want %d", order, got, n)
		}
	}
}
