package latchopenai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/latchkit/latch"
	latchopenai "github.com/latchkit/latch/integrations/openai"
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
				if err := reg.Register(toolcall.Tool{Name: a.Action, Handler: kitHandler(a.Action, h)}); err != nil {
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
			return readToolText(content)
		}
	}})
}

// kitHandler is the tool of one action of the kit: it hands the kit's handler the arguments it
// was called with.
func kitHandler(action string, h latchtest.Handler) toolcall.Handler {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		var a latchtest.Args
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, latch.NotExecuted(err)
		}
		a.Action = action
		return h(ctx, a)
	}
}

// readToolText reads a tool result's text as the model does: JSON is the tool's result; a first
// line "word: …" with one of latch's reason words is a refusal, whose effect_key, approval_id
// and stored_result lines follow.
func readToolText(text string) latchtest.Outcome {
	first, rest, _ := strings.Cut(text, "\n")
	word, _, ok := strings.Cut(first, ": ")
	if !ok || latch.Reason(word).Kind() == "" {
		return latchtest.Outcome{Result: json.RawMessage(text)}
	}
	r := &latch.Refusal{Kind: latch.Reason(word).Kind(), Reason: latch.Reason(word)}
	for line := range strings.Lines(rest) {
		name, value, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
		if name != "stored_result" && strings.HasPrefix(value, `"`) {
			if u, err := strconv.Unquote(value); err == nil {
				value = u
			}
		}
		switch name {
		case "effect_key":
			r.EffectKey = value
		case "approval_id":
			r.ApprovalID = value
		case "stored_result":
			r.Result = json.RawMessage(value)
		}
	}
	return latchtest.Outcome{Refusal: r}
}
