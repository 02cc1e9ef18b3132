package toolcalltest

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/latchtest"
	"github.com/latchkit/latch/toolcall"
)

// KitHandler is the tool of one action of the conformance kit (latchtest): it hands the kit's
// handler the arguments it was called with.
func KitHandler(action string, h latchtest.Handler) toolcall.Handler {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		var a latchtest.Args
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, latch.NotExecuted(err)
		}
		a.Action = action
		return h(ctx, a)
	}
}

// ReadToolText reads a tool result's text as the model does: JSON is the tool's result; a first
// line "word: …" with one of latch's reason words is a refusal, whose effect_key, approval_id
// and stored_result lines follow (toolcall.RefusalText).
func ReadToolText(text string) latchtest.Outcome {
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
