package latchgenkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/latchkit/latch"
	latchgenkit "github.com/latchkit/latch/integrations/genkit"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

const testPolicy = `
schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    rules:
      - when: { amount_lte: 5000 }
        decision: allow
      - decision: approve
  payments.void:
    effect: "void:{refund_id}"
    decision: deny
`

// RefundInput is the refund tool's input: the model's arguments, and the action's.
type RefundInput struct {
	RefundID string `json:"refund_id"`
	Amount   int64  `json:"amount"`
}

// Refund is what the payment server answers.
type Refund struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

// payments is a fake payment server: it counts the refunds it makes, per refund id.
type payments struct {
	mu      sync.Mutex
	refunds map[string]int
	// loseReply makes every refund happen and its reply be lost on the way back.
	loseReply bool
	// refuseFirst makes the next refund be refused by the server before it acts.
	refuseFirst bool
}

func (p *payments) refund(_ *ai.ToolContext, in RefundInput) (Refund, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuseFirst {
		p.refuseFirst = false
		return Refund{}, latch.NotExecuted(errors.New("payment server: 503 before acting"))
	}
	p.refunds[in.RefundID]++
	if p.loseReply {
		return Refund{}, errors.New("payment server: connection reset by peer: the reply was lost")
	}
	return Refund{ID: "re_" + in.RefundID, Amount: in.Amount}, nil
}

func (p *payments) count(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refunds[id]
}

// scriptedModel is a Genkit model with no network: asked to begin, it calls the tool named
// tool with the next input of its script; shown a tool's answer, it records what it read and
// ends with "done" — or, while failReplies is positive, fails as a lost model reply would.
type scriptedModel struct {
	tool        string
	mu          sync.Mutex
	inputs      []any
	seen        []string
	failReplies int
	calls       atomic.Int64
}

func (m *scriptedModel) generate(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	if last.Role == ai.RoleTool {
		for _, p := range last.Content {
			if p.IsToolResponse() {
				raw, err := json.Marshal(p.ToolResponse.Output)
				if err != nil {
					return nil, err
				}
				m.seen = append(m.seen, string(raw))
			}
		}
		if m.failReplies > 0 {
			m.failReplies--
			return nil, errors.New("model endpoint: connection reset: the reply was lost")
		}
		return &ai.ModelResponse{Request: req, Message: ai.NewModelTextMessage("done"), FinishReason: ai.FinishReasonStop}, nil
	}
	if len(m.inputs) == 0 {
		return nil, errors.New("scripted model: no tool call left in the script")
	}
	in := m.inputs[0]
	m.inputs = m.inputs[1:]
	n := m.calls.Add(1)
	msg := ai.NewModelMessage(ai.NewToolRequestPart(&ai.ToolRequest{Name: m.tool, Ref: fmt.Sprintf("call_%d", n), Input: in}))
	// A model answers its request with the response (ModelResponse.History reads it).
	return &ai.ModelResponse{Request: req, Message: msg, FinishReason: ai.FinishReasonStop}, nil
}

func (m *scriptedModel) script(inputs ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inputs = append(m.inputs, inputs...)
}

func (m *scriptedModel) read() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen...)
}

type fixture struct {
	guard    *latch.Guard
	gk       *genkit.Genkit
	model    ai.Model
	script   *scriptedModel
	payments *payments
	refund   *ai.ToolDef[RefundInput, latchgenkit.Result[Refund]]
	void     *ai.ToolDef[RefundInput, latchgenkit.Result[Refund]]
}

var backends = []string{"sqlite", "postgres"}

// setup opens a guard on a fresh store of backend and a Genkit instance with the scripted model
// and the protected refund and void tools.
func setup(t *testing.T, backend string) *fixture {
	t.Helper()
	return setupWith(t, backend, nil)
}

// setupWith is setup with Config.Interrupter, when itr is set, itr of the guard.
func setupWith(t *testing.T, backend string, itr func(*latch.Guard) interrupt.Interrupter[context.Context]) *fixture {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, backend, "latchgenkit")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	f := &fixture{guard: g, gk: genkit.Init(t.Context()), payments: &payments{refunds: map[string]int{}}}
	f.script = &scriptedModel{tool: "refund"}
	f.model = genkit.DefineModel(f.gk, "test/scripted", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}}, f.script.generate)
	cfg := &latchgenkit.Config{Principal: latch.Principal{Agent: "refund-agent"}}
	if itr != nil {
		cfg.Interrupter = itr(g)
	}
	f.refund = latchgenkit.DefineTool(f.gk, g, "payments.refund", "refund", "Refund a payment", f.payments.refund, cfg)
	f.void = latchgenkit.DefineTool(f.gk, g, "payments.void", "void", "Void a refund", f.payments.refund, cfg)
	return f
}

// generate runs one generation in which the model calls the refund tool with in.
func (f *fixture) generate(t *testing.T, in RefundInput) (*ai.ModelResponse, error) {
	t.Helper()
	f.script.script(in)
	return genkit.Generate(t.Context(), f.gk, ai.WithModel(f.model), ai.WithPrompt("refund "+in.RefundID), ai.WithTools(f.refund))
}

// resume resumes the interrupted generation resp with the restart part.
func (f *fixture) resume(t *testing.T, resp *ai.ModelResponse, restart *ai.Part) (*ai.ModelResponse, error) {
	t.Helper()
	return genkit.Generate(t.Context(), f.gk, ai.WithModel(f.model), ai.WithMessages(resp.History()...),
		ai.WithTools(f.refund), ai.WithToolRestarts(restart))
}

// readResult decodes what the model read last.
func (f *fixture) readResult(t *testing.T) latchgenkit.Result[Refund] {
	t.Helper()
	seen := f.script.read()
	if len(seen) == 0 {
		t.Fatal("the model read no tool answer")
	}
	var r latchgenkit.Result[Refund]
	if err := json.Unmarshal([]byte(seen[len(seen)-1]), &r); err != nil {
		t.Fatalf("decode the tool answer %s: %v", seen[len(seen)-1], err)
	}
	return r
}

// interrupted returns the one interrupt of resp and the approval request it carries.
func interrupted(t *testing.T, resp *ai.ModelResponse) (*ai.Part, latchgenkit.Interrupt) {
	t.Helper()
	if resp.FinishReason != ai.FinishReasonInterrupted {
		t.Fatalf("FinishReason = %q, want %q", resp.FinishReason, ai.FinishReasonInterrupted)
	}
	parts := resp.Interrupts()
	if len(parts) != 1 {
		t.Fatalf("Interrupts() = %d parts, want 1", len(parts))
	}
	it, ok := latchgenkit.InterruptOf(parts[0])
	if !ok {
		t.Fatalf("InterruptOf(%+v) = false, want the approval request", parts[0].Metadata)
	}
	return parts[0], it
}

func wantRefusal(t *testing.T, r latchgenkit.Result[Refund], kind latch.RefusalKind, reason latch.Reason) {
	t.Helper()
	if r.Refusal == nil {
		t.Fatalf("the model read %+v, want a refusal %s (%s)", r, reason, kind)
	}
	if r.Refusal.Kind != string(kind) || r.Refusal.Reason != string(reason) {
		t.Fatalf("the model read refusal %s (%s), want %s (%s): %s", r.Refusal.Reason, r.Refusal.Kind, reason, kind, r.Refusal.Message)
	}
	prefix := fmt.Sprintf("latch refused %s: %s (%s): ", r.Refusal.Action, reason, kind)
	if !strings.HasPrefix(r.Refusal.Message, prefix) {
		t.Fatalf("Message = %q, want it to begin %q", r.Refusal.Message, prefix)
	}
}

// A refund whose reply is lost on the way back from the payment server may have happened: the
// model reads outcome_unknown, and the three retries of the same tool call that follow read
// ambiguous. The payment server refunds once.
func TestLostReplyRetriedThreeTimesRunsOnce(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			f := setup(t, backend)
			f.payments.loseReply = true
			in := RefundInput{RefundID: "r_lost", Amount: 1200}
			resp, err := f.generate(t, in)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if resp.Text() != "done" {
				t.Fatalf("Text() = %q, want done", resp.Text())
			}
			r := f.readResult(t)
			wantRefusal(t, r, latch.KindOutcomeUnknown, latch.ReasonOutcomeUnknown)
			if r.Refusal.EffectKey != "refund:r_lost" {
				t.Errorf("EffectKey = %q, want refund:r_lost", r.Refusal.EffectKey)
			}
			for i := range 3 {
				if _, err := f.generate(t, in); err != nil {
					t.Fatalf("retry %d: Generate: %v", i+1, err)
				}
				wantRefusal(t, f.readResult(t), latch.KindAmbiguous, latch.ReasonAmbiguous)
			}
			if n := f.payments.count("r_lost"); n != 1 {
				t.Fatalf("the payment server refunded r_lost %d times, want 1", n)
			}
		})
	}
}

// A refund that ran, whose generation then failed (the model's reply was lost), is retried as
// a whole three times: each retry's tool call is a committed duplicate, and the model reads the
// stored result without the payment server being called again.
func TestLostGenerationRetriedThreeTimesReadsStoredResult(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			f := setup(t, backend)
			f.script.failReplies = 1
			in := RefundInput{RefundID: "r_dup", Amount: 900}
			if _, err := f.generate(t, in); err == nil {
				t.Fatal("Generate = nil error, want the lost model reply")
			}
			if r := f.readResult(t); r.Refusal != nil || r.Output == nil || r.Output.ID != "re_r_dup" {
				t.Fatalf("first call: the model read %+v, want the refund's output", r)
			}
			for i := range 3 {
				if _, err := f.generate(t, in); err != nil {
					t.Fatalf("retry %d: Generate: %v", i+1, err)
				}
				r := f.readResult(t)
				wantRefusal(t, r, latch.KindCommitted, latch.ReasonCommitted)
				if r.Output == nil || *r.Output != (Refund{ID: "re_r_dup", Amount: 900}) {
					t.Fatalf("retry %d: Output = %+v, want the stored result", i+1, r.Output)
				}
			}
			if n := f.payments.count("r_dup"); n != 1 {
				t.Fatalf("the payment server refunded r_dup %d times, want 1", n)
			}
		})
	}
}

// A refund over the policy's limit interrupts the generation with Genkit's tool interrupt
// carrying the approval request; resumed before a person answers, the generation fails saying
// approval_pending; granted, the resumed generation runs the refund once; the same call again, or
// the same restart again, reads the stored result.
func TestApprovalInterruptsResumesAndRunsOnce(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			f := setup(t, backend)
			in := RefundInput{RefundID: "r_big", Amount: 25000}
			resp, err := f.generate(t, in)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			part, it := interrupted(t, resp)
			if !strings.HasPrefix(it.ApprovalID, "apr_") || it.Action != "payments.refund" || it.Reason != "approval_required" {
				t.Fatalf("interrupt = %+v, want approval_required for payments.refund with an apr_ id", it)
			}
			if it.EffectKey != "refund:r_big" {
				t.Errorf("interrupt EffectKey = %q, want refund:r_big", it.EffectKey)
			}
			if n := f.payments.count("r_big"); n != 0 {
				t.Fatalf("refunded %d times before any approval, want 0", n)
			}

			restart, err := latchgenkit.Restart(f.refund, part, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Resumed before a person answers: the generation fails saying so, and the
			// interrupted response stays resumable.
			if _, err := f.resume(t, resp, restart); err == nil || !strings.Contains(err.Error(), "approval_pending") ||
				!strings.Contains(err.Error(), it.ApprovalID) {
				t.Fatalf("resume before the answer = %v, want an approval_pending error naming %s", err, it.ApprovalID)
			}
			if n := f.payments.count("r_big"); n != 0 {
				t.Fatalf("refunded %d times before the answer, want 0", n)
			}

			if _, err := f.guard.Approve(t.Context(), it.ApprovalID, "alice"); err != nil {
				t.Fatalf("Approve(%s): %v", it.ApprovalID, err)
			}
			done, err := f.resume(t, resp, restart)
			if err != nil {
				t.Fatalf("resume: %v", err)
			}
			if done.FinishReason == ai.FinishReasonInterrupted || done.Text() != "done" {
				t.Fatalf("resumed: FinishReason %q, text %q, want done", done.FinishReason, done.Text())
			}
			if r := f.readResult(t); r.Refusal != nil || r.Output == nil || *r.Output != (Refund{ID: "re_r_big", Amount: 25000}) {
				t.Fatalf("resumed: the model read %+v, want the refund's output", r)
			}
			if n := f.payments.count("r_big"); n != 1 {
				t.Fatalf("refunded %d times after the approval, want 1", n)
			}

			// The same restart again (the resumed generation's reply was lost and it is
			// retried): the approval is spent and the effect committed; the model reads the
			// stored result, and nothing is refunded again.
			if _, err := f.resume(t, resp, restart); err != nil {
				t.Fatalf("resume again: %v", err)
			}
			r := f.readResult(t)
			wantRefusal(t, r, latch.KindCommitted, latch.ReasonCommitted)
			if r.Output == nil || *r.Output != (Refund{ID: "re_r_big", Amount: 25000}) {
				t.Fatalf("resume again: Output = %+v, want the stored result", r.Output)
			}
			// The same call from a new generation: a committed duplicate with its stored result.
			if _, err := f.generate(t, in); err != nil {
				t.Fatalf("Generate again: %v", err)
			}
			r = f.readResult(t)
			wantRefusal(t, r, latch.KindCommitted, latch.ReasonCommitted)
			if r.Output == nil || r.Output.ID != "re_r_big" {
				t.Fatalf("again: Output = %+v, want the stored result", r.Output)
			}
			if n := f.payments.count("r_big"); n != 1 {
				t.Fatalf("refunded %d times in all, want 1", n)
			}
		})
	}
}

// An approval binds the arguments it was asked for: the restart that presents it with another
// amount is refused approval_mismatch without refunding; the restart with the approved amount
// runs once.
func TestApprovalForOneAmountRefusesAnother(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			f := setup(t, backend)
			in := RefundInput{RefundID: "r_edit", Amount: 30000}
			resp, err := f.generate(t, in)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			part, it := interrupted(t, resp)
			if _, err := f.guard.Approve(t.Context(), it.ApprovalID, "alice"); err != nil {
				t.Fatalf("Approve(%s): %v", it.ApprovalID, err)
			}
			other, err := latchgenkit.Restart(f.refund, part, RefundInput{RefundID: "r_edit", Amount: 31000})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.resume(t, resp, other); err != nil {
				t.Fatalf("resume with another amount: %v", err)
			}
			r := f.readResult(t)
			wantRefusal(t, r, latch.KindApprovalRefused, latch.ReasonApprovalMismatch)
			if r.Refusal.ApprovalID != it.ApprovalID || r.Output != nil {
				t.Fatalf("refusal %+v, want approval %s and no output", r, it.ApprovalID)
			}
			if n := f.payments.count("r_edit"); n != 0 {
				t.Fatalf("refunded %d times with another amount, want 0", n)
			}

			same, err := latchgenkit.Restart(f.refund, part, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.resume(t, resp, same); err != nil {
				t.Fatalf("resume: %v", err)
			}
			if r := f.readResult(t); r.Output == nil || r.Output.Amount != 30000 {
				t.Fatalf("the model read %+v, want the approved refund's output", r)
			}
			if n := f.payments.count("r_edit"); n != 1 {
				t.Fatalf("refunded %d times, want 1", n)
			}
		})
	}
}

// A person denies the request: the resumed generation's tool call is refused approval_denied
// and nothing is refunded.
func TestApprovalDeniedIsRefused(t *testing.T) {
	f := setup(t, "sqlite")
	resp, err := f.generate(t, RefundInput{RefundID: "r_no", Amount: 9000})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	part, it := interrupted(t, resp)
	if _, err := f.guard.Deny(t.Context(), it.ApprovalID, "alice"); err != nil {
		t.Fatalf("Deny(%s): %v", it.ApprovalID, err)
	}
	restart, err := latchgenkit.Restart(f.refund, part, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.resume(t, resp, restart); err != nil {
		t.Fatalf("resume: %v", err)
	}
	wantRefusal(t, f.readResult(t), latch.KindApprovalRefused, latch.ReasonApprovalDenied)
	if n := f.payments.count("r_no"); n != 0 {
		t.Fatalf("refunded %d times after a denial, want 0", n)
	}
}

// A call the policy denies is a tool answer the model reads, not an error that ends the
// generation; the tool function does not run.
func TestDeniedIsReadByTheModel(t *testing.T) {
	f := setup(t, "sqlite")
	f.script.tool = "void"
	f.script.script(RefundInput{RefundID: "r_void", Amount: 10})
	resp, err := genkit.Generate(t.Context(), f.gk, ai.WithModel(f.model), ai.WithPrompt("void r_void"), ai.WithTools(f.void))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.Text() != "done" {
		t.Fatalf("Text() = %q, want done", resp.Text())
	}
	r := f.readResult(t)
	wantRefusal(t, r, latch.KindDenied, latch.ReasonDenied)
	if n := f.payments.count("r_void"); n != 0 {
		t.Fatalf("the denied tool ran %d times, want 0", n)
	}
}

// Restart refuses a part that is not a latch interrupt, rather than build a restart that would
// ask for a new approval.
func TestRestartRefusesOtherParts(t *testing.T) {
	f := setup(t, "sqlite")
	plain := ai.NewToolRequestPart(&ai.ToolRequest{Name: "refund", Input: map[string]any{"refund_id": "x"}})
	if _, err := latchgenkit.Restart(f.refund, plain, nil); err == nil || !strings.Contains(err.Error(), `"refund"`) {
		t.Fatalf("Restart(a plain tool request) = %v, want an error naming the tool", err)
	}
	if _, ok := latchgenkit.InterruptOf(ai.NewTextPart("hello")); ok {
		t.Fatal("InterruptOf(a text part) = true, want false")
	}
}

// A tool function's own interrupt (asking its caller something before it acts) reaches Genkit as
// an interrupt, and latch records the attempt as not executed: the restarted call reserves the
// key again and runs once.
func TestToolFunctionInterruptPassesThrough(t *testing.T) {
	f := setup(t, "sqlite")
	var runs int
	confirm := latchgenkit.DefineTool(f.gk, f.guard, "payments.refund", "confirm_refund", "Refund after the user confirms",
		func(tc *ai.ToolContext, in RefundInput) (Refund, error) {
			if confirmed, _ := ai.ResumedValue[bool](tc, "confirmed"); !confirmed {
				return Refund{}, tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{"ask": "confirm the refund"}})
			}
			runs++
			return Refund{ID: "re_" + in.RefundID, Amount: in.Amount}, nil
		}, &latchgenkit.Config{Principal: latch.Principal{Agent: "refund-agent"}})
	f.script.tool = "confirm_refund"
	f.script.script(RefundInput{RefundID: "r_ask", Amount: 100})
	resp, err := genkit.Generate(t.Context(), f.gk, ai.WithModel(f.model), ai.WithPrompt("refund r_ask"), ai.WithTools(confirm))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.FinishReason != ai.FinishReasonInterrupted || len(resp.Interrupts()) != 1 {
		t.Fatalf("FinishReason %q with %d interrupts, want the tool's own interrupt", resp.FinishReason, len(resp.Interrupts()))
	}
	part := resp.Interrupts()[0]
	if _, ok := latchgenkit.InterruptOf(part); ok {
		t.Fatal("InterruptOf(the tool's own interrupt) = true, want false: it carries no approval")
	}
	if ask := part.Metadata["interrupt"].(map[string]any)["ask"]; ask != "confirm the refund" {
		t.Fatalf("interrupt metadata = %v, want the tool's own", part.Metadata["interrupt"])
	}
	restart, err := confirm.RestartWith(part, ai.WithResumedMetadata[RefundInput](map[string]any{"confirmed": true}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := genkit.Generate(t.Context(), f.gk, ai.WithModel(f.model), ai.WithMessages(resp.History()...),
		ai.WithTools(confirm), ai.WithToolRestarts(restart)); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if r := f.readResult(t); r.Refusal != nil || r.Output == nil || r.Output.ID != "re_r_ask" {
		t.Fatalf("the model read %+v, want the refund's output", r)
	}
	if runs != 1 {
		t.Fatalf("the tool ran %d times, want 1", runs)
	}
}

// With Options.Wait the tool blocks until a person answers instead of interrupting: granted
// while the generation waits, the refund runs once and the generation ends normally.
func TestWaitBlocksUntilApproved(t *testing.T) {
	f := setup(t, "sqlite")
	waiting := latchgenkit.DefineTool(f.gk, f.guard, "payments.refund", "refund_wait", "Refund, waiting for approval",
		f.payments.refund, &latchgenkit.Config{Principal: latch.Principal{Agent: "refund-agent"}, Options: &latch.Options{Wait: true}})
	f.script.tool = "refund_wait"
	f.script.script(RefundInput{RefundID: "r_wait", Amount: 8000})
	approved := make(chan error, 1)
	go func() {
		for {
			pending, err := f.guard.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Pending})
			if err != nil {
				approved <- err
				return
			}
			if len(pending) == 1 {
				_, err := f.guard.Approve(t.Context(), pending[0].ID, "alice")
				approved <- err
				return
			}
			select {
			case <-t.Context().Done():
				approved <- t.Context().Err()
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	resp, err := genkit.Generate(t.Context(), f.gk, ai.WithModel(f.model), ai.WithPrompt("refund r_wait"), ai.WithTools(waiting))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if err := <-approved; err != nil {
		t.Fatalf("approve: %v", err)
	}
	if resp.FinishReason == ai.FinishReasonInterrupted || resp.Text() != "done" {
		t.Fatalf("FinishReason %q, text %q, want done without an interrupt", resp.FinishReason, resp.Text())
	}
	if r := f.readResult(t); r.Output == nil || r.Output.ID != "re_r_wait" {
		t.Fatalf("the model read %+v, want the refund's output", r)
	}
	if n := f.payments.count("r_wait"); n != 1 {
		t.Fatalf("refunded %d times, want 1", n)
	}
}

// A restart that presents no approval (built with Genkit's own RestartWith) while the request
// is pending cannot interrupt again: the generation fails naming the request latch asks for,
// rather than with Genkit's bare "interrupt during a restarted execution".
func TestRestartWithoutApprovalNamesTheRequest(t *testing.T) {
	f := setup(t, "sqlite")
	resp, err := f.generate(t, RefundInput{RefundID: "r_plain", Amount: 7000})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	part, it := interrupted(t, resp)
	plain, err := f.refund.RestartWith(part)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.resume(t, resp, plain)
	if err == nil || !strings.Contains(err.Error(), "approval_required") || !strings.Contains(err.Error(), it.ApprovalID) {
		t.Fatalf("resume without the approval = %v, want an approval_required error naming %s", err, it.ApprovalID)
	}
	if n := f.payments.count("r_plain"); n != 0 {
		t.Fatalf("refunded %d times, want 0", n)
	}
}

// A tool function that says it did not act (latch.NotExecuted) is read as not_executed, and the
// retry reserves the key again and runs.
func TestNotExecutedIsRetried(t *testing.T) {
	f := setup(t, "sqlite")
	f.payments.refuseFirst = true
	in := RefundInput{RefundID: "r_503", Amount: 300}
	if _, err := f.generate(t, in); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	wantRefusal(t, f.readResult(t), latch.KindNotExecuted, latch.ReasonNotExecuted)
	if _, err := f.generate(t, in); err != nil {
		t.Fatalf("retry: Generate: %v", err)
	}
	if r := f.readResult(t); r.Refusal != nil || r.Output == nil || r.Output.ID != "re_r_503" {
		t.Fatalf("retry: the model read %+v, want the refund's output", r)
	}
	if n := f.payments.count("r_503"); n != 1 {
		t.Fatalf("refunded %d times, want 1", n)
	}
}

// The model asks for the same refund twice in one turn; Genkit runs the two tool calls at once.
// One refunds, the other reads a duplicate (in progress or committed): the server refunds once.
func TestSameCallTwiceInOneTurnRunsOnce(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			f := setup(t, backend)
			in := RefundInput{RefundID: "r_twice", Amount: 400}
			model := genkit.DefineModel(f.gk, "test/twice", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}},
				func(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
					last := req.Messages[len(req.Messages)-1]
					if last.Role == ai.RoleTool {
						f.script.mu.Lock()
						for _, p := range last.Content {
							raw, _ := json.Marshal(p.ToolResponse.Output)
							f.script.seen = append(f.script.seen, string(raw))
						}
						f.script.mu.Unlock()
						return &ai.ModelResponse{Request: req, Message: ai.NewModelTextMessage("done")}, nil
					}
					return &ai.ModelResponse{Request: req, Message: ai.NewModelMessage(
						ai.NewToolRequestPart(&ai.ToolRequest{Name: "refund", Ref: "a", Input: in}),
						ai.NewToolRequestPart(&ai.ToolRequest{Name: "refund", Ref: "b", Input: in}))}, nil
				})
			if _, err := genkit.Generate(t.Context(), f.gk, ai.WithModel(model), ai.WithPrompt("refund twice"), ai.WithTools(f.refund)); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			seen := f.script.read()
			if len(seen) != 2 {
				t.Fatalf("the model read %d answers, want 2: %v", len(seen), seen)
			}
			ran, dup := 0, 0
			for _, s := range seen {
				var r latchgenkit.Result[Refund]
				if err := json.Unmarshal([]byte(s), &r); err != nil {
					t.Fatal(err)
				}
				switch {
				case r.Refusal == nil && r.Output != nil && r.Output.ID == "re_r_twice":
					ran++
				case r.Refusal != nil && (r.Refusal.Kind == string(latch.KindInProgress) || r.Refusal.Kind == string(latch.KindCommitted)):
					dup++
				default:
					t.Errorf("unexpected answer %s", s)
				}
			}
			if ran != 1 || dup != 1 {
				t.Fatalf("answers %v: %d ran and %d duplicates, want 1 and 1", seen, ran, dup)
			}
			if n := f.payments.count("r_twice"); n != 1 {
				t.Fatalf("refunded %d times, want 1", n)
			}
		})
	}
}
