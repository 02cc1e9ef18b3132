package latchopenai_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/latchkit/latch"
	latchopenai "github.com/latchkit/latch/integrations/openai"
	"github.com/latchkit/latch/internal/toolcalltest"
	"github.com/latchkit/latch/latchtest"
	"github.com/latchkit/latch/toolcall"
)

// TestConformance runs latch's adapter conformance kit against DispatchChat: each call is a
// model answer asking for one tool call (the tool named as the action), and its outcome is read
// back from the tool message the model receives, as a model reads it: the reason word of the
// first line, then the effect_key, approval_id and stored_result lines.
func TestConformance(t *testing.T) {
	t.Parallel()
	latchtest.Run(t, latchtest.Harness{Start: func(_ testing.TB, g *latch.Guard, h latchtest.Handler) latchtest.Invoke {
		reg := toolcall.New(g, &toolcall.Config{Principal: latchtest.Principal()})
		var mu sync.Mutex
		n := 0
		return func(ctx context.Context, a latchtest.Args) latchtest.Outcome {
			mu.Lock()
			n++
			id := fmt.Sprintf("call_%d", n)
			if _, ok := reg.Tool(a.Action); !ok {
				if err := reg.Register(toolcall.Tool{Name: a.Action, Handler: toolcalltest.KitHandler(a.Action, h)}); err != nil {
					t.Fatal(err)
				}
			}
			mu.Unlock()
			cc := chatCompletion(t, toolcall.Call{ID: id, Name: a.Action, Arguments: a.Arguments()})
			msgs, _ := latchopenai.DispatchChat(ctx, reg, cc.Choices[0].Message)
			m := wire(t, msgs[0])
			if m["tool_call_id"] != id || m["role"] != "tool" {
				return latchtest.Outcome{Err: fmt.Errorf("tool message %v, want role tool and tool_call_id %s", m, id)}
			}
			content, _ := m["content"].(string)
			return toolcalltest.ReadToolText(content)
		}
	}})
}
