package latchopenai_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	latchopenai "github.com/latchkit/latch/integrations/openai"
	"github.com/latchkit/latch/internal/toolcalltest"
	"github.com/latchkit/latch/toolcall"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// chatCompletion is a model's answer asking for the given tool calls, as the API sends it,
// decoded by the SDK's own types.
func chatCompletion(t *testing.T, calls ...toolcall.Call) openai.ChatCompletion {
	t.Helper()
	var tcs []string
	for _, c := range calls {
		args, err := json.Marshal(string(c.Arguments)) // the API sends the arguments as a JSON string
		if err != nil {
			t.Fatal(err)
		}
		tcs = append(tcs, fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}`, c.ID, c.Name, args))
	}
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1764900000,"model":"gpt-test",
		"choices":[{"index":0,"finish_reason":"tool_calls","logprobs":null,
		"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[` + strings.Join(tcs, ",") + `]}}]}`
	var cc openai.ChatCompletion
	if err := json.Unmarshal([]byte(body), &cc); err != nil {
		t.Fatalf("decode the fake completion: %v\n%s", err, body)
	}
	return cc
}

// responseOutput is a Responses API answer whose output holds a reasoning item (skipped) and
// the given function calls.
func responseOutput(t *testing.T, calls ...toolcall.Call) []responses.ResponseOutputItemUnion {
	t.Helper()
	items := []string{`{"type":"reasoning","id":"rs_1","summary":[]}`}
	for i, c := range calls {
		args, err := json.Marshal(string(c.Arguments))
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":%q,"name":%q,"arguments":%s,"status":"completed"}`, i, c.ID, c.Name, args))
	}
	body := `{"id":"resp_1","object":"response","created_at":1764900000,"model":"gpt-test","status":"completed","output":[` + strings.Join(items, ",") + `]}`
	var r responses.Response
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("decode the fake response: %v\n%s", err, body)
	}
	return r.Output
}

// wire is a message or an input item as the SDK sends it.
func wire(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDispatchChat answers a chat completion's tool call of every scenario of the shared table
// (a real SQLite store) and checks the tool message sent back: role tool, the call's id, and
// the text the scenario wants.
func TestDispatchChat(t *testing.T) {
	t.Parallel()
	for i, s := range toolcalltest.Scenarios {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			e := toolcalltest.New(t)
			ctx := t.Context()
			if s.Before != nil {
				ctx = s.Before(t, e)
			}
			id := fmt.Sprintf("call_%d_abc", i)
			cc := chatCompletion(t, toolcall.Call{ID: id, Name: s.Tool, Arguments: json.RawMessage(s.Arguments)})
			msgs, results := latchopenai.DispatchChat(ctx, e.Reg, cc.Choices[0].Message)
			if len(msgs) != 1 || len(results) != 1 {
				t.Fatalf("%d messages, %d results for one tool call", len(msgs), len(results))
			}
			s.Check(t, e, results[0])
			want := map[string]any{"role": "tool", "tool_call_id": id, "content": results[0].Content}
			if diff := cmp.Diff(want, wire(t, msgs[0])); diff != "" {
				t.Errorf("tool message (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDispatchResponse answers the function calls of a Responses API output with
// function_call_output items, skipping the other items.
func TestDispatchResponse(t *testing.T) {
	t.Parallel()
	for i, s := range toolcalltest.Scenarios {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			e := toolcalltest.New(t)
			ctx := t.Context()
			if s.Before != nil {
				ctx = s.Before(t, e)
			}
			id := fmt.Sprintf("call_r%d", i)
			items, results := latchopenai.DispatchResponse(ctx, e.Reg, responseOutput(t, toolcall.Call{ID: id, Name: s.Tool, Arguments: json.RawMessage(s.Arguments)}))
			if len(items) != 1 || len(results) != 1 {
				t.Fatalf("%d items, %d results for one function call", len(items), len(results))
			}
			s.Check(t, e, results[0])
			want := map[string]any{"type": "function_call_output", "call_id": id, "output": results[0].Content}
			if diff := cmp.Diff(want, wire(t, items[0])); diff != "" {
				t.Errorf("function_call_output (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParallelToolCalls answers three tool calls of one message in their order, each with its
// own id: one runs, one waits for approval, one is refused.
func TestParallelToolCalls(t *testing.T) {
	t.Parallel()
	e := toolcalltest.New(t)
	cc := chatCompletion(t,
		toolcall.Call{ID: "call_a", Name: "refund", Arguments: json.RawMessage(`{"order_id":"p-1","amount":100}`)},
		toolcall.Call{ID: "call_b", Name: "refund", Arguments: json.RawMessage(`{"order_id":"p-2","amount":7000}`)},
		toolcall.Call{ID: "call_c", Name: "delete_account", Arguments: json.RawMessage(`{"account_id":"a-1"}`)},
	)
	msgs, results := latchopenai.DispatchChat(t.Context(), e.Reg, cc.Choices[0].Message)
	want := []struct {
		id     string
		status toolcall.Status
		prefix string
	}{
		{"call_a", toolcall.StatusOK, `{"refund_id":"rf_p-1"`},
		{"call_b", toolcall.StatusPending, "approval_required: "},
		{"call_c", toolcall.StatusRefused, "denied: "},
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d", len(msgs), len(want))
	}
	for i, w := range want {
		m := wire(t, msgs[i])
		content, _ := m["content"].(string)
		if m["tool_call_id"] != w.id || results[i].Status != w.status || !strings.HasPrefix(content, w.prefix) {
			t.Errorf("message %d = %v (%s), want %s, %s, %q…", i, m, results[i].Status, w.id, w.status, w.prefix)
		}
	}
	if !strings.Contains(wire(t, msgs[1])["content"].(string), "approval_id: "+results[1].Refusal.ApprovalID) {
		t.Errorf("the pending message does not name its approval %s", results[1].Refusal.ApprovalID)
	}
}

// TestRetryAfterLostReply sends the same model answer three times — its tool messages never
// reached the model, so the agent re-runs the turn — and the refund runs once: the re-sends are
// answered with the stored result (the tool ran) or as ambiguous (its own reply was lost).
func TestRetryAfterLostReply(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ order, then string }{{"o-3x", "committed: "}, {"lost-3x", "ambiguous: "}} {
		t.Run(tc.order, func(t *testing.T) {
			t.Parallel()
			e := toolcalltest.New(t)
			cc := chatCompletion(t, toolcall.Call{ID: "call_same", Name: "refund", Arguments: json.RawMessage(`{"order_id":"` + tc.order + `","amount":250}`)})
			for i := range 3 {
				msgs, _ := latchopenai.DispatchChat(t.Context(), e.Reg, cc.Choices[0].Message)
				m := wire(t, msgs[0])
				if content, _ := m["content"].(string); i > 0 && !strings.HasPrefix(content, tc.then) {
					t.Errorf("re-send %d: content %q, want it to start with %q", i, content, tc.then)
				}
				if m["tool_call_id"] != "call_same" {
					t.Errorf("re-send %d: tool_call_id %v", i, m["tool_call_id"])
				}
			}
			if n := e.Runs("refund:" + tc.order); n != 1 {
				t.Errorf("the refund ran %d times, want 1", n)
			}
		})
	}
}

// TestCustomToolCall passes a custom tool's free-text input as {"input": text} and answers it
// with a custom_tool_call_output.
func TestCustomToolCall(t *testing.T) {
	t.Parallel()
	e := toolcalltest.New(t)
	var r responses.Response
	if err := json.Unmarshal([]byte(`{"id":"resp_2","object":"response","created_at":1,"model":"gpt-test","status":"completed",
		"output":[{"type":"custom_tool_call","id":"ctc_1","call_id":"call_cu","name":"add_note","input":"call back Tuesday"}]}`), &r); err != nil {
		t.Fatal(err)
	}
	if got := latchopenai.ResponseCalls(r.Output); len(got) != 1 || string(got[0].Arguments) != `{"input":"call back Tuesday"}` {
		t.Fatalf("ResponseCalls = %+v", got)
	}
	items, results := latchopenai.DispatchResponse(t.Context(), e.Reg, r.Output)
	if len(items) != 1 {
		t.Fatalf("%d items", len(items))
	}
	want := map[string]any{"type": "custom_tool_call_output", "call_id": "call_cu", "output": results[0].Content}
	if diff := cmp.Diff(want, wire(t, items[0])); diff != "" {
		t.Errorf("custom_tool_call_output (-want +got):\n%s", diff)
	}
	if results[0].Status != toolcall.StatusOK || results[0].Content != `"noted: call back Tuesday"` || e.Runs("add_note:call back Tuesday") != 1 {
		t.Errorf("custom call: %s %q, runs %d", results[0].Status, results[0].Content, e.Runs("add_note:call back Tuesday"))
	}
}

// TestTurnAgainAfterApproval handles one model answer of three refunds, two of which wait for a
// person; once they answered, the same answer is handled again with the approvals by call id:
// the approved refund runs, the one that ran is answered with its stored result, the denied one
// is refused, each tool message with its own tool_call_id.
func TestTurnAgainAfterApproval(t *testing.T) {
	t.Parallel()
	e := toolcalltest.New(t)
	msg := chatCompletion(t, toolcalltest.Turn...).Choices[0].Message
	_, first := latchopenai.DispatchChat(t.Context(), e.Reg, msg)
	approvals := e.AnswerTurn(t, first)
	msgs, again := latchopenai.DispatchChat(toolcall.WithApprovals(t.Context(), approvals), e.Reg, msg)
	e.CheckTurnAgain(t, again)
	for i, m := range msgs {
		want := map[string]any{"role": "tool", "tool_call_id": toolcalltest.Turn[i].ID, "content": again[i].Content}
		if diff := cmp.Diff(want, wire(t, m)); diff != "" {
			t.Errorf("tool message %d (-want +got):\n%s", i, diff)
		}
	}
}
