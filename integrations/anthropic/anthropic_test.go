package latchanthropic_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	latchanthropic "github.com/latchkit/latch/integrations/anthropic"
	"github.com/latchkit/latch/internal/toolcalltest"
	"github.com/latchkit/latch/toolcall"
)

// message is a model's answer asking for the given tool calls, as the API sends it (a text
// block first), decoded by the SDK's own types.
func message(t *testing.T, calls ...toolcall.Call) *anthropic.Message {
	t.Helper()
	blocks := []string{`{"type":"text","text":"Let me take care of that."}`}
	for _, c := range calls {
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, c.ID, c.Name, c.Arguments))
	}
	body := `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","stop_reason":"tool_use",
		"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":20},"content":[` + strings.Join(blocks, ",") + `]}`
	var m anthropic.Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("decode the fake message: %v\n%s", err, body)
	}
	return &m
}

// wire is the message as the SDK sends it.
func wire(t *testing.T, m anthropic.MessageParam) map[string]any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// toolResult is the tool_result block the API expects.
func toolResult(id, text string, isError bool) map[string]any {
	return map[string]any{"type": "tool_result", "tool_use_id": id, "is_error": isError,
		"content": []any{map[string]any{"type": "text", "text": text}}}
}

// TestDispatch answers a tool_use block of every scenario of the shared table (a real SQLite
// store) and checks the user message sent back: one tool_result block with the call's
// tool_use_id, is_error as the scenario wants, and its text.
func TestDispatch(t *testing.T) {
	t.Parallel()
	for i, s := range toolcalltest.Scenarios {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			e := toolcalltest.New(t)
			ctx := t.Context()
			if s.Before != nil {
				ctx = s.Before(t, e)
			}
			id := fmt.Sprintf("toolu_%02d", i)
			args := s.Arguments
			if !json.Valid([]byte(args)) {
				// The API sends input as a JSON object: a model's malformed arguments reach the
				// tool as a string, which latch refuses as not an object.
				b, _ := json.Marshal(args)
				args = string(b)
			}
			msg, results := latchanthropic.Dispatch(ctx, e.Reg, message(t, toolcall.Call{ID: id, Name: s.Tool, Arguments: json.RawMessage(args)}))
			if len(results) != 1 {
				t.Fatalf("%d results for one tool_use block", len(results))
			}
			s.Check(t, e, results[0])
			want := map[string]any{"role": "user", "content": []any{toolResult(id, results[0].Content, s.IsError)}}
			if diff := cmp.Diff(want, wire(t, msg)); diff != "" {
				t.Errorf("user message (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParallelToolUse answers three tool_use blocks of one message in their order, each with
// its own id: one runs, one waits for approval, one is refused (is_error).
func TestParallelToolUse(t *testing.T) {
	t.Parallel()
	e := toolcalltest.New(t)
	msg, results := latchanthropic.Dispatch(t.Context(), e.Reg, message(t,
		toolcall.Call{ID: "toolu_a", Name: "refund", Arguments: json.RawMessage(`{"order_id":"p-1","amount":100}`)},
		toolcall.Call{ID: "toolu_b", Name: "refund", Arguments: json.RawMessage(`{"order_id":"p-2","amount":7000}`)},
		toolcall.Call{ID: "toolu_c", Name: "delete_account", Arguments: json.RawMessage(`{"account_id":"a-1"}`)},
	))
	if len(results) != 3 {
		t.Fatalf("%d results, want 3", len(results))
	}
	if results[0].Status != toolcall.StatusOK || results[1].Status != toolcall.StatusPending || results[2].Status != toolcall.StatusRefused {
		t.Fatalf("statuses %s, %s, %s", results[0].Status, results[1].Status, results[2].Status)
	}
	want := map[string]any{"role": "user", "content": []any{
		toolResult("toolu_a", `{"refund_id":"rf_p-1","amount":100}`, false),
		toolResult("toolu_b", results[1].Content, false),
		toolResult("toolu_c", results[2].Content, true),
	}}
	if diff := cmp.Diff(want, wire(t, msg)); diff != "" {
		t.Errorf("user message (-want +got):\n%s", diff)
	}
	if !strings.Contains(results[1].Content, "approval_id: "+results[1].Refusal.ApprovalID) || !strings.HasPrefix(results[2].Content, "denied: ") {
		t.Errorf("texts %q, %q", results[1].Content, results[2].Content)
	}
}

// TestRetryAfterLostReply sends the same model message three times — its tool results never
// reached the model, so the agent re-runs the turn — and the refund runs once: the re-sends are
// answered with the stored result (the tool ran) or as ambiguous, is_error (its own reply was
// lost).
func TestRetryAfterLostReply(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		order, then string
		isError     bool
	}{{"o-3x", "committed: ", false}, {"lost-3x", "ambiguous: ", true}} {
		t.Run(tc.order, func(t *testing.T) {
			t.Parallel()
			e := toolcalltest.New(t)
			m := message(t, toolcall.Call{ID: "toolu_same", Name: "refund", Arguments: json.RawMessage(`{"order_id":"` + tc.order + `","amount":250}`)})
			for i := range 3 {
				msg, results := latchanthropic.Dispatch(t.Context(), e.Reg, m)
				if i == 0 {
					continue
				}
				if !strings.HasPrefix(results[0].Content, tc.then) {
					t.Errorf("re-send %d: text %q, want it to start with %q", i, results[0].Content, tc.then)
				}
				want := map[string]any{"role": "user", "content": []any{toolResult("toolu_same", results[0].Content, tc.isError)}}
				if diff := cmp.Diff(want, wire(t, msg)); diff != "" {
					t.Errorf("re-send %d (-want +got):\n%s", i, diff)
				}
			}
			if n := e.Runs("refund:" + tc.order); n != 1 {
				t.Errorf("the refund ran %d times, want 1", n)
			}
		})
	}
}

// TestNoToolUse gives no results and no blocks for a message that asks for no tool.
func TestNoToolUse(t *testing.T) {
	t.Parallel()
	e := toolcalltest.New(t)
	m := message(t)
	if calls := latchanthropic.Calls(m); len(calls) != 0 {
		t.Fatalf("Calls = %+v", calls)
	}
	msg, results := latchanthropic.Dispatch(t.Context(), e.Reg, m)
	if len(results) != 0 || msg.OfUser == nil || len(msg.OfUser.Content) != 0 {
		t.Errorf("Dispatch = %+v, %d results, want an empty user message and none", msg, len(results))
	}
}

// TestTurnAgainAfterApproval handles one message of three tool_use blocks, two of which wait
// for a person; once they answered, the same message is handled again with the approvals by
// tool_use id: the approved refund runs, the one that ran is answered with its stored result,
// the denied one is refused (is_error), each block with its own tool_use_id.
func TestTurnAgainAfterApproval(t *testing.T) {
	t.Parallel()
	e := toolcalltest.New(t)
	m := message(t, toolcalltest.Turn...)
	_, first := latchanthropic.Dispatch(t.Context(), e.Reg, m)
	approvals := e.AnswerTurn(t, first)
	msg, again := latchanthropic.Dispatch(toolcall.WithApprovals(t.Context(), approvals), e.Reg, m)
	e.CheckTurnAgain(t, again)
	want := map[string]any{"role": "user", "content": []any{
		toolResult("call_t1", again[0].Content, false),
		toolResult("call_t2", `{"refund_id":"rf_t-2","amount":7000}`, false),
		toolResult("call_t3", again[2].Content, true),
	}}
	if diff := cmp.Diff(want, wire(t, msg)); diff != "" {
		t.Errorf("user message (-want +got):\n%s", diff)
	}
}
