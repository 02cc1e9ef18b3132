package latchanthropic_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/latchkit/latch"
	latchanthropic "github.com/latchkit/latch/integrations/anthropic"
	"github.com/latchkit/latch/internal/toolcalltest"
	"github.com/latchkit/latch/latchtest"
	"github.com/latchkit/latch/toolcall"
)

// TestConformance runs latch's adapter conformance kit against Dispatch: each call is a model
// message with one tool_use block (the tool named as the action), and its outcome is read back
// from the tool_result block the model receives, as a model reads it: the reason word of the
// first line, then the effect_key, approval_id and stored_result lines; is_error must agree.
func TestConformance(t *testing.T) {
	t.Parallel()
	latchtest.Run(t, latchtest.Harness{Start: func(_ testing.TB, g *latch.Guard, h latchtest.Handler) latchtest.Invoke {
		reg := toolcall.New(g, &toolcall.Config{Principal: latchtest.Principal()})
		var mu sync.Mutex
		n := 0
		return func(ctx context.Context, a latchtest.Args) latchtest.Outcome {
			mu.Lock()
			n++
			id := fmt.Sprintf("toolu_%d", n)
			if _, ok := reg.Tool(a.Action); !ok {
				if err := reg.Register(toolcall.Tool{Name: a.Action, Handler: toolcalltest.KitHandler(a.Action, h)}); err != nil {
					t.Fatal(err)
				}
			}
			mu.Unlock()
			msg, _ := latchanthropic.Dispatch(ctx, reg, message(t, toolcall.Call{ID: id, Name: a.Action, Arguments: a.Arguments()}))
			content, _ := wire(t, msg)["content"].([]any)
			if len(content) != 1 {
				return latchtest.Outcome{Err: fmt.Errorf("%d blocks, want one tool_result", len(content))}
			}
			block, _ := content[0].(map[string]any)
			texts, _ := block["content"].([]any)
			if block["type"] != "tool_result" || block["tool_use_id"] != id || len(texts) != 1 {
				return latchtest.Outcome{Err: fmt.Errorf("block %v, want one tool_result for %s", block, id)}
			}
			text, _ := texts[0].(map[string]any)["text"].(string)
			out := toolcalltest.ReadToolText(text)
			isError, _ := block["is_error"].(bool)
			if r := out.Refusal; isError != (r != nil && r.Kind != latch.KindCommitted && r.Kind != latch.KindApprovalRequired) {
				return latchtest.Outcome{Err: fmt.Errorf("is_error %t for %q", isError, text)}
			}
			return out
		}
	}})
}
