package latchopenai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/latchkit/latch"
	latchopenai "github.com/latchkit/latch/integrations/openai"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/toolcall"
	"github.com/openai/openai-go/v3"
)

// The agent's loop: the model asks for a refund; the tool call runs through latch and its tool
// message goes back. The same answer handled twice — a turn retried after a crash — refunds
// once: the second time the model is told the effect already happened, with its stored result.
func ExampleDispatchChat() {
	dir, err := os.MkdirTemp("", "latchopenai-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	pol, err := policy.Parse("latch.yaml", []byte(`schema: latch.policy/v1
actions:
  refund:
    effect: "refund:{order_id}"
    decision: allow
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
	}
	refunds := 0
	err = tools.Register(toolcall.Tool{Name: "refund", Handler: toolcall.Func(func(ctx context.Context, r Refund) (map[string]string, error) {
		refunds++
		return map[string]string{"refund_id": "rf_" + r.OrderID}, nil
	})})
	if err != nil {
		log.Fatal(err)
	}

	// What client.Chat.Completions.New returns; a literal here, so that the example runs offline.
	var completion openai.ChatCompletion
	if err := json.Unmarshal([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test",
		"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
		"tool_calls":[{"id":"call_1","type":"function","function":{"name":"refund","arguments":"{\"order_id\":\"o-17\"}"}}]}}]}`), &completion); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		msgs, _ := latchopenai.DispatchChat(ctx, tools, completion.Choices[0].Message)
		// params.Messages = append(params.Messages, completion.Choices[0].Message.ToParam())
		// params.Messages = append(params.Messages, msgs...)
		b, _ := json.Marshal(msgs[0])
		fmt.Println(string(b))
	}
	fmt.Println("refunds:", refunds)
	// Output:
	// {"content":"{\"refund_id\":\"rf_o-17\"}","tool_call_id":"call_1","role":"tool"}
	// {"content":"committed: this call's effect already happened; it did not run again.\neffect_key: refund:o-17\nstored_result: {\"refund_id\":\"rf_o-17\"}","tool_call_id":"call_1","role":"tool"}
	// refunds: 1
}
