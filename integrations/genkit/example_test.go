package latchgenkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/latchkit/latch"
	latchgenkit "github.com/latchkit/latch/integrations/genkit"
	"github.com/latchkit/latch/policy"
)

// A refund tool whose large refunds wait for a person: the generation stops in Genkit's tool
// interrupt with the approval request's id, a person grants it, and the restarted generation
// refunds once.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "latchgenkit")
	defer os.RemoveAll(dir)
	p, err := policy.Parse("latch.yaml", []byte(`
schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    rules:
      - when: { amount_lte: 5000 }
        decision: allow
      - decision: approve
`))
	if err != nil {
		panic(err)
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(dir, "state.db")})
	if err != nil {
		panic(err)
	}
	defer g.Close()

	gk := genkit.Init(ctx)
	type RefundInput struct {
		RefundID string `json:"refund_id"`
		Amount   int64  `json:"amount"`
	}
	refund := latchgenkit.DefineTool(gk, g, "payments.refund", "refund", "Refund a payment",
		func(_ *ai.ToolContext, in RefundInput) (string, error) {
			fmt.Println("refunding", in.RefundID) // the payment provider's call
			return "re_" + in.RefundID, nil
		}, &latchgenkit.Config{Principal: latch.Principal{Agent: "support-agent"}})

	// A model with no network: it asks for the refund, then reads the tool's answer.
	model := genkit.DefineModel(gk, "example/model", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}},
		func(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			if last := req.Messages[len(req.Messages)-1]; last.Role == ai.RoleTool {
				said, _ := json.Marshal(last.Content[0].ToolResponse.Output)
				return &ai.ModelResponse{Request: req, Message: ai.NewModelTextMessage("tool said " + string(said))}, nil
			}
			call := ai.NewToolRequestPart(&ai.ToolRequest{Name: "refund", Ref: "1", Input: map[string]any{"refund_id": "r_77", "amount": 25000}})
			return &ai.ModelResponse{Request: req, Message: ai.NewModelMessage(call)}, nil
		})

	resp, err := genkit.Generate(ctx, gk, ai.WithModel(model), ai.WithPrompt("refund r_77"), ai.WithTools(refund))
	if err != nil {
		panic(err)
	}
	it, _ := latchgenkit.InterruptOf(resp.Interrupts()[0])
	fmt.Println(resp.FinishReason, it.Reason, it.EffectKey)

	// A person grants the request (latch approve, the console, or here the Go API).
	if _, err := g.Approve(ctx, it.ApprovalID, "alice"); err != nil {
		panic(err)
	}
	restart, err := latchgenkit.Restart(refund, resp.Interrupts()[0], nil)
	if err != nil {
		panic(err)
	}
	resumed, err := genkit.Generate(ctx, gk, ai.WithModel(model), ai.WithMessages(resp.History()...),
		ai.WithTools(refund), ai.WithToolRestarts(restart))
	if err != nil {
		panic(err)
	}
	fmt.Println(resumed.Text())
	// Output:
	// interrupted approval_required refund:r_77
	// refunding r_77
	// tool said {"output":"re_r_77"}
}
