// Package latchtest is the conformance kit for adapters: a task queue, a workflow engine, an
// agent framework or a tool server that runs calls through latch. An adapter's author runs it
// from a Go test with a small Harness — how to run one call through the adapter, and how to read
// back what the adapter surfaced — and it checks, on a guard it opens, that the adapter keeps
// latch's promises:
//
//   - a duplicate of a committed call does not run, and is answered with the stored result
//     (or completed, where the adapter has no results);
//   - a lost reply (the handler acted, then its transport failed) is outcome_unknown, and the
//     retry is refused ambiguous without running;
//   - an approval is bound to the arguments: granted for amount 100, a call with 200 is not run,
//     and the next attempt with 100 runs once on the grant without presenting its id;
//   - the refusal words are latch's: the reason the adapter surfaces equals latch's reason word
//     for each refusal of the table (refusals.json).
//
// The situations and what each step must surface are data — Table, embedded from
// refusals.json — so that clients in other languages replay the same table against latch
// serve. docs/integrations/conformance.md describes the format and how to write a Harness.
package latchtest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

//go:embed refusals.json
var tableJSON []byte

// TableJSON returns the table's JSON document (refusals.json), as other languages load it.
func TableJSON() []byte { return bytes.Clone(tableJSON) }

// TableDoc is the conformance table: a policy, the principal the adapter acts as, and the
// cases.
type TableDoc struct {
	Schema string `json:"schema"`
	// Policy is the policy document (YAML) the guard decides under.
	Policy string `json:"policy"`
	// Principal is the agent the adapter's calls act as; Approver, who grants approvals.
	Principal string `json:"principal"`
	Approver  string `json:"approver"`
	Cases     []Case `json:"cases"`
}

// Case is one situation: steps run in order on one guard.
type Case struct {
	Name  string `json:"name"`
	About string `json:"about"`
	Steps []Step `json:"steps"`
}

// Step is one call through the adapter (Call, with Expect), or a person granting the approval
// request an earlier step's outcome named (Approve: that step's index).
type Step struct {
	Call    *Args   `json:"call,omitempty"`
	Approve *int    `json:"approve,omitempty"`
	Expect  *Expect `json:"expect,omitempty"`
}

// Args are the arguments of a call: the action, and the arguments the handler receives. Mode
// says what the handler does: "succeed" (acts, returns its result), "lose_reply" (acts, then
// fails as a lost reply would: an error that is not latch.NotExecuted) or "not_executed" (does
// not act, returns latch.NotExecuted). Mode is an argument like the others, part of the action
// hash: a retry repeats it.
type Args struct {
	Action string `json:"action"`
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Mode   string `json:"mode"`
}

// Arguments returns the call's JSON arguments (id, amount, mode), as an adapter passes them to
// latch.
func (a Args) Arguments() json.RawMessage {
	b, _ := json.Marshal(struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
		Mode   string `json:"mode"`
	}{a.ID, a.Amount, a.Mode})
	return b
}

// Expect is what a step's outcome must be.
type Expect struct {
	// Ran is whether the handler ran during the step.
	Ran bool `json:"ran"`
	// Kind and Reason are latch's words for the refusal the adapter surfaces; "" for success.
	Kind   latch.RefusalKind `json:"kind,omitempty"`
	Reason latch.Reason      `json:"reason,omitempty"`
	// EffectKey is the effect the surfaced refusal must name.
	EffectKey string `json:"effect_key,omitempty"`
	// Approval: the surfaced refusal names the approval request a person answers.
	Approval bool `json:"approval,omitempty"`
	// OtherApprovalThan: the request named differs from the one step OtherApprovalThan named.
	OtherApprovalThan *int `json:"other_approval_than,omitempty"`
	// ResultOf: the outcome's result (a duplicate's stored result) equals step ResultOf's, where
	// the adapter hands back results.
	ResultOf *int `json:"result_of,omitempty"`
}

// Table returns the conformance table (refusals.json).
func Table() (*TableDoc, error) {
	var t TableDoc
	dec := json.NewDecoder(bytes.NewReader(tableJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("latchtest: refusals.json: %w", err)
	}
	return &t, nil
}

// Handler is the work each protected call does; the kit supplies it and counts its runs. An
// adapter's wrapped job, activity or tool calls it with the call's action and arguments and
// returns what it returns (its error unchanged: the kit's NotExecuted must reach latch).
type Handler func(ctx context.Context, a Args) (json.RawMessage, error)

// Outcome is what the adapter surfaced for one call, read back by the Harness from the
// adapter's own surface (its error type's fields, its error details, its tool result): not
// from latch's error underneath, which would test nothing.
type Outcome struct {
	// Result is the result the adapter handed back on success, or with a duplicate; nil when it
	// hands back none (a queue).
	Result json.RawMessage
	// Refusal is the refusal the adapter surfaced, in latch's words: its Kind and Reason, the
	// EffectKey and ApprovalID it named. nil on success.
	Refusal *latch.Refusal
	// Err is an error the adapter surfaced that carries no latch word: allowed only where the
	// call is not a refusal (not_executed: the handler's own error, retried as any failure).
	Err error
}

// Invoke makes one attempt of a call through the adapter, waits for its outcome and returns
// it. A queue makes one attempt per Invoke (the kit's next step is its retry): no automatic
// retries.
type Invoke func(ctx context.Context, a Args) Outcome

// Harness is what an adapter's author supplies.
type Harness struct {
	// Start wires the adapter to g — opened by the kit under the table's policy — with h as the
	// work of every protected call, and returns how to invoke a call. The adapter acts as the
	// principal Principal (the table's). Clean up with t.Cleanup.
	Start func(t testing.TB, g *latch.Guard, h Handler) Invoke
	// StoreURL is the store the kit opens the guard on; default a SQLite file in t.TempDir().
	StoreURL string
}

// Principal is the principal the adapter's calls act as (the table's).
func Principal() latch.Principal {
	t, err := Table()
	if err != nil {
		panic(err)
	}
	return latch.Principal{Agent: t.Principal}
}

// Run runs the conformance table against the adapter h wires, reporting every failed check
// with t.Error.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if err := Test(t, h); err != nil {
		t.Error(err)
	}
}

// Test runs the conformance table against the adapter h wires and returns every failed check,
// joined (nil when the adapter conforms). t is used for cleanups and the temporary store.
func Test(t testing.TB, h Harness) error {
	tbl, err := Table()
	if err != nil {
		return err
	}
	p, err := policy.Parse("refusals.json#policy", []byte(tbl.Policy))
	if err != nil {
		return fmt.Errorf("latchtest: %w", err)
	}
	url := h.StoreURL
	if url == "" {
		url = "sqlite:" + filepath.Join(t.TempDir(), "latchtest.db")
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: p, StoreURL: url})
	if err != nil {
		return fmt.Errorf("latchtest: open guard: %w", err)
	}
	t.Cleanup(func() { g.Close() })
	k := &kit{runs: map[string]int{}}
	invoke := h.Start(t, g, k.handle)
	var errs []error
	for _, c := range tbl.Cases {
		if err := runCase(g, tbl.Approver, invoke, k, c); err != nil {
			errs = append(errs, fmt.Errorf("case %s (%s): %w", c.Name, c.About, err))
		}
	}
	return errors.Join(errs...)
}

// kit is the handler the kit hands the adapter: it counts runs per action and id.
type kit struct {
	mu   sync.Mutex
	runs map[string]int
}

// ErrLostReply is what the handler returns in mode lose_reply, after acting.
var ErrLostReply = errors.New("latchtest: connection reset after the effect (a lost reply)")

func (k *kit) handle(_ context.Context, a Args) (json.RawMessage, error) {
	k.mu.Lock()
	k.runs[a.Action+"\x00"+a.ID]++
	n := k.runs[a.Action+"\x00"+a.ID]
	k.mu.Unlock()
	switch a.Mode {
	case "lose_reply":
		return nil, ErrLostReply
	case "not_executed":
		return nil, latch.NotExecuted(errors.New("latchtest: the payment provider refused before acting"))
	}
	return json.Marshal(map[string]any{"id": a.ID, "amount": a.Amount, "run": n})
}

func (k *kit) count(a Args) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.runs[a.Action+"\x00"+a.ID]
}

// runCase runs one case's steps and returns what failed first.
func runCase(g *latch.Guard, approver string, invoke Invoke, k *kit, c Case) error {
	ctx := context.Background()
	outs := make([]Outcome, len(c.Steps))
	for i, s := range c.Steps {
		if s.Approve != nil {
			r := outs[*s.Approve].Refusal
			if r == nil || r.ApprovalID == "" {
				return fmt.Errorf("step %d: step %d named no approval request to grant", i, *s.Approve)
			}
			if _, err := g.Approve(ctx, r.ApprovalID, approver); err != nil {
				return fmt.Errorf("step %d: approve %s: %w", i, r.ApprovalID, err)
			}
			continue
		}
		before := k.count(*s.Call)
		out := invoke(ctx, *s.Call)
		outs[i] = out
		if err := check(s, i, out, outs, k.count(*s.Call)-before); err != nil {
			return fmt.Errorf("step %d (%s %s amount %d, %s): %w", i, s.Call.Action, s.Call.ID, s.Call.Amount, s.Call.Mode, err)
		}
	}
	return nil
}

// check compares one step's outcome with its expectation.
func check(s Step, i int, out Outcome, outs []Outcome, ran int) error {
	e := s.Expect
	if ran < 0 || ran > 1 {
		return fmt.Errorf("the handler ran %d times in one attempt", ran)
	}
	if (ran == 1) != e.Ran {
		return fmt.Errorf("the handler ran = %v, want %v (outcome %s)", ran == 1, e.Ran, describe(out))
	}
	if e.Kind == "" {
		if out.Refusal != nil || out.Err != nil {
			return fmt.Errorf("outcome %s, want success", describe(out))
		}
		return nil
	}
	r := out.Refusal
	switch {
	case e.Kind == latch.KindCommitted && r == nil && out.Err == nil:
		// A duplicate reported as success (the stored result, or a completed job).
	case e.Kind == latch.KindNotExecuted && r == nil && out.Err != nil:
		// The handler's own error, retried as any failure: not_executed is no refusal.
		return nil
	case r == nil:
		return fmt.Errorf("outcome %s, want the refusal %s (%s)", describe(out), e.Reason, e.Kind)
	default:
		if r.Kind != e.Kind || r.Reason != e.Reason {
			return fmt.Errorf("surfaced %s (%s), want %s (%s)", r.Reason, r.Kind, e.Reason, e.Kind)
		}
		if e.EffectKey != "" && r.EffectKey != e.EffectKey {
			return fmt.Errorf("surfaced effect key %q, want %q", r.EffectKey, e.EffectKey)
		}
		if e.Approval && r.ApprovalID == "" {
			return errors.New("surfaced no approval id: a person cannot find the request to answer")
		}
		if o := e.OtherApprovalThan; o != nil {
			if prev := outs[*o].Refusal; prev != nil && prev.ApprovalID == r.ApprovalID {
				return fmt.Errorf("surfaced approval %s, the one granted for other arguments (step %d)", r.ApprovalID, *o)
			}
		}
	}
	if o := e.ResultOf; o != nil {
		got := out.Result
		if r != nil {
			got = r.Result
		}
		want := outs[*o].Result
		if got != nil && want != nil && !jsonEqual(got, want) {
			return fmt.Errorf("result %s, want the stored result of step %d, %s", got, *o, want)
		}
		if (got == nil) != (want == nil) {
			return fmt.Errorf("result %s, step %d's %s: an adapter that hands back results hands back the stored one", got, *o, want)
		}
	}
	return nil
}

func describe(out Outcome) string {
	switch {
	case out.Refusal != nil:
		return fmt.Sprintf("refused %s (%s)", out.Refusal.Reason, out.Refusal.Kind)
	case out.Err != nil:
		return fmt.Sprintf("error %v", out.Err)
	}
	return "success"
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
