package latchanthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/latchkit/latch"
	latchanthropic "github.com/latchkit/latch/integrations/anthropic"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/toolcall"
)

// The agent's loop: Claude asks for a refund above what the policy allows alone. The tool does
// not run: the tool_result says a person must approve it, naming the request, and is not an
// error. The program sees toolcall.StatusPending and can hold the conversation until the
// request is answered.
func ExampleDispatch() {
	dir, err := os.MkdirTemp("", "latchanthropic-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	pol, err := policy.Parse("latch.yaml", []byte(`schema: latch.policy/v1
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
`))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(dir, "state.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()

	tools := toolcall.New(g, &toolcall.Config{Principal: latch.Principal{Agent: "support-bot"}})
	type Refund struct {
		OrderID string `json:"order_id"`
		Amount  int64  `json:"amount"`
	}
	err = tools.Register(toolcall.Tool{Name: "refund", Handler: toolcall.Func(func(ctx context.Context, r Refund) (string, error) {
		return "rf_" + r.OrderID, nil
	})})
	if err != nil {
		log.Fatal(err)
	}

	// What client.Messages.New returns; a literal here, so that the example runs offline.
	var msg anthropic.Message
	if err := json.Unmarshal([]byte(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-test",
		"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1},"content":[
		{"type":"tool_use","id":"toolu_01","name":"refund","input":{"order_id":"o-9","amount":4200}}]}`), &msg); err != nil {
		log.Fatal(err)
	}
	reply, results := latchanthropic.Dispatch(ctx, tools, &msg)
	// params.Messages = append(params.Messages, msg.ToParam(), reply)
	block := reply.OfUser.Content[0].OfToolResult
	fmt.Println(block.ToolUseID, "is_error:", block.IsError.Value)
	fmt.Println(results[0].Status, results[0].Refusal.EffectKey)
	fmt.Println(results[0].Refusal.ApprovalID != "")
	// Output:
	// toolu_01 is_error: false
	// approval_required refund:o-9
	// true
}
