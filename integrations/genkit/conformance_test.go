package latchgenkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/latchkit/latch"
	latchgenkit "github.com/latchkit/latch/integrations/genkit"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/latchtest"
)

// KitInput is the input of the conformance kit's tools: the model's arguments, which are the
// action's.
type KitInput struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Mode   string `json:"mode"`
}

// kitOutput is what the kit's tools answer: the handler's JSON result, decoded.
type kitOutput = map[string]any

// kitModel is a Genkit model with no network: asked to begin, it calls the tool and input it
// was given for this generation; shown the tool's answer, it keeps it and ends with "done".
type kitModel struct {
	mu    sync.Mutex
	call  *ai.ToolRequest
	calls int
	read  []any
}

func (m *kitModel) generate(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	if last.Role == ai.RoleTool {
		for _, p := range last.Content {
			if p.IsToolResponse() {
				m.read = append(m.read, p.ToolResponse.Output)
			}
		}
		return &ai.ModelResponse{Request: req, Message: ai.NewModelTextMessage("done"), FinishReason: ai.FinishReasonStop}, nil
	}
	if m.call == nil {
		return nil, errors.New("kit model: no tool call scripted for this generation")
	}
	m.calls++
	call := *m.call
	call.Ref = fmt.Sprintf("call_%d", m.calls)
	m.call = nil
	return &ai.ModelResponse{Request: req, Message: ai.NewModelMessage(ai.NewToolRequestPart(&call)), FinishReason: ai.FinishReasonStop}, nil
}

// script makes the next generation's model call tool with in, and forgets what it read.
func (m *kitModel) script(tool string, in KitInput) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.call = &ai.ToolRequest{Name: tool, Input: in}
	m.read = nil
}

// answers returns the tool answers the model read in this generation.
func (m *kitModel) answers() []any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]any(nil), m.read...)
}

// kitTools are the conformance table's actions, each a protected Genkit tool named after it
// (kit.charge is the tool kit_charge).
var kitTools = []string{"kit.charge", "kit.refund", "kit.once", "kit.blocked", "kit.unlisted"}

func kitToolName(action string) string { return strings.ReplaceAll(action, ".", "_") }

// TestConformance runs latch's adapter conformance kit against Wrap (through DefineTool), on
// both stores: each call is one genkit.Generate in which a scripted model calls the action's
// tool once, and its outcome is what Genkit surfaced — the Result the model read (its Output,
// or its Refusal in latch's words), or the generation's interrupt, read with InterruptOf.
func TestConformance(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			latchtest.Run(t, latchtest.Harness{StoreURL: testdb.URL(t, backend, "genkitkit"), Start: startGenkit})
		})
	}
}

// startGenkit wires the kit's handler as one protected tool per action of the table.
func startGenkit(t testing.TB, g *latch.Guard, h latchtest.Handler) latchtest.Invoke {
	gk := genkit.Init(context.Background())
	m := &kitModel{}
	model := genkit.DefineModel(gk, "test/kit", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}}, m.generate)
	cfg := &latchgenkit.Config{Principal: latchtest.Principal()}
	tools := map[string]ai.ToolRef{}
	for _, action := range kitTools {
		fn := func(tc *ai.ToolContext, in KitInput) (kitOutput, error) {
			raw, err := h(tc.Context, latchtest.Args{Action: action, ID: in.ID, Amount: in.Amount, Mode: in.Mode})
			if err != nil {
				return nil, err
			}
			var out kitOutput
			if err := json.Unmarshal(raw, &out); err != nil {
				return nil, fmt.Errorf("decode the kit's result %s: %w", raw, err)
			}
			return out, nil
		}
		tools[action] = latchgenkit.DefineTool(gk, g, action, kitToolName(action), "The conformance kit's "+action, fn, cfg)
	}
	return func(ctx context.Context, a latchtest.Args) latchtest.Outcome {
		tool, ok := tools[a.Action]
		if !ok {
			return latchtest.Outcome{Err: fmt.Errorf("no tool for action %s", a.Action)}
		}
		m.script(kitToolName(a.Action), KitInput{ID: a.ID, Amount: a.Amount, Mode: a.Mode})
		resp, err := genkit.Generate(ctx, gk, ai.WithModel(model), ai.WithPrompt("run "+a.ID), ai.WithTools(tool))
		if err != nil {
			return latchtest.Outcome{Err: fmt.Errorf("generate: %w", err)}
		}
		if resp.FinishReason == ai.FinishReasonInterrupted {
			return interruptOutcome(resp)
		}
		answers := m.answers()
		if len(answers) != 1 {
			return latchtest.Outcome{Err: fmt.Errorf("the model read %d tool answers, want 1 (finish %q)", len(answers), resp.FinishReason)}
		}
		return resultOutcome(answers[0])
	}
}

// interruptOutcome is the approval request an interrupted generation carries, as the refusal
// it stands for.
func interruptOutcome(resp *ai.ModelResponse) latchtest.Outcome {
	parts := resp.Interrupts()
	if len(parts) != 1 {
		return latchtest.Outcome{Err: fmt.Errorf("the generation was interrupted by %d tool requests, want 1", len(parts))}
	}
	it, ok := latchgenkit.InterruptOf(parts[0])
	if !ok {
		return latchtest.Outcome{Err: fmt.Errorf("the interrupt %+v carries no latch approval request", parts[0].Metadata)}
	}
	reason := latch.Reason(it.Reason)
	return latchtest.Outcome{Refusal: &latch.Refusal{Kind: reason.Kind(), Reason: reason, EffectKey: it.EffectKey,
		ApprovalID: it.ApprovalID, ActionHash: it.ActionHash, ExpiresAt: it.ExpiresAt}}
}

// resultOutcome is the Result the model read: its Output, or its Refusal in latch's words with
// the output it carries (a duplicate's stored result).
func resultOutcome(answer any) latchtest.Outcome {
	raw, err := json.Marshal(answer)
	if err != nil {
		return latchtest.Outcome{Err: err}
	}
	var r latchgenkit.Result[kitOutput]
	if err := json.Unmarshal(raw, &r); err != nil {
		return latchtest.Outcome{Err: fmt.Errorf("the model read %s, not a latchgenkit.Result: %w", raw, err)}
	}
	var out json.RawMessage
	if r.Output != nil {
		if out, err = json.Marshal(*r.Output); err != nil {
			return latchtest.Outcome{Err: err}
		}
	}
	if r.Refusal == nil {
		if out == nil {
			return latchtest.Outcome{Err: fmt.Errorf("the model read %s: neither an output nor a refusal", raw)}
		}
		return latchtest.Outcome{Result: out}
	}
	if out == nil {
		out = r.Refusal.Result
	}
	return latchtest.Outcome{Refusal: &latch.Refusal{Kind: latch.RefusalKind(r.Refusal.Kind), Reason: latch.Reason(r.Refusal.Reason),
		EffectKey: r.Refusal.EffectKey, ApprovalID: r.Refusal.ApprovalID, Result: out, Detail: r.Refusal.Detail}}
}
