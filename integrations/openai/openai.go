// Package latchopenai runs the tool calls of an OpenAI model's answer through latch, with the
// official Go SDK (github.com/openai/openai-go/v3), and builds the messages that hand each
// call's result back to the model.
//
// A chat completion's message, or a Responses API output, lists tool calls: a name, JSON
// arguments and an id. DispatchChat and DispatchResponse run each call through a
// toolcall.Registry — decide, approve, reserve its effect key, run, record — and return one
// message per call, in the order of the calls, with the call's id:
//
//	chat completions  openai.ToolMessage(text, tool_call_id)
//	Responses API     a function_call_output (custom_tool_call_output) item with its call_id
//
// The text is toolcall.Result.Content: a tool that ran answers its result as JSON; a refusal,
// a pending approval, a duplicate or an unknown outcome answers latch's reason word first
// (denied, approval_required, committed, ambiguous, …), then what happened and what the model
// can do, then the approval id, effect key and the rest, one per line. The Result of each call
// is returned too, for the program: Status says whether a person must approve
// (toolcall.StatusPending) or resolve (toolcall.StatusUnknown) before the conversation goes on.
//
// A model that re-sends a tool call — after a lost reply, a crash, a retried turn — gets the
// stored result of the effect (committed), or is told its outcome is unknown (ambiguous): the
// tool runs once. docs/integrations/openai.md of the latch repository has the walk-through.
package latchopenai

import (
	"context"
	"encoding/json"

	"github.com/latchkit/latch/toolcall"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// ChatCalls returns the tool calls of a chat completion message, in order. A custom tool's
// call, whose input is free text, is given the arguments {"input": text}.
func ChatCalls(msg openai.ChatCompletionMessage) []toolcall.Call {
	calls := make([]toolcall.Call, 0, len(msg.ToolCalls))
	for _, tc := range msg.ToolCalls {
		c := toolcall.Call{ID: tc.ID}
		switch tc.Type {
		case "custom":
			c.Name, c.Arguments = tc.Custom.Name, customInput(tc.Custom.Input)
		default:
			c.Name, c.Arguments = tc.Function.Name, json.RawMessage(tc.Function.Arguments)
		}
		calls = append(calls, c)
	}
	return calls
}

// DispatchChat runs every tool call of msg through reg, one after another, and returns the tool
// messages to append to the conversation after msg (msg.ToParam()), one per call, in order,
// with the results they were built from.
func DispatchChat(ctx context.Context, reg *toolcall.Registry, msg openai.ChatCompletionMessage) ([]openai.ChatCompletionMessageParamUnion, []*toolcall.Result) {
	results := reg.DispatchAll(ctx, ChatCalls(msg))
	out := make([]openai.ChatCompletionMessageParamUnion, len(results))
	for i, r := range results {
		out[i] = ToolMessage(r)
	}
	return out, results
}

// ToolMessage is the chat completion tool message of one result: its text, for its call's id.
func ToolMessage(r *toolcall.Result) openai.ChatCompletionMessageParamUnion {
	return openai.ToolMessage(r.Content, r.CallID)
}

// ResponseCalls returns the function calls (and custom tool calls, with the arguments
// {"input": text}) of a Responses API output, in order; other items are skipped.
func ResponseCalls(output []responses.ResponseOutputItemUnion) []toolcall.Call {
	var calls []toolcall.Call
	for _, item := range output {
		switch item.Type {
		case "function_call":
			fc := item.AsFunctionCall()
			calls = append(calls, toolcall.Call{ID: fc.CallID, Name: fc.Name, Arguments: json.RawMessage(fc.Arguments)})
		case "custom_tool_call":
			cc := item.AsCustomToolCall()
			calls = append(calls, toolcall.Call{ID: cc.CallID, Name: cc.Name, Arguments: customInput(cc.Input)})
		}
	}
	return calls
}

// DispatchResponse runs every tool call of a Responses API output (Response.Output) through
// reg, one after another, and returns the input items that answer them — a
// function_call_output per function call, a custom_tool_call_output per custom tool call — in
// order, with the results they were built from. Send them as the next request's input (with
// PreviousResponseID, or after the output items).
func DispatchResponse(ctx context.Context, reg *toolcall.Registry, output []responses.ResponseOutputItemUnion) ([]responses.ResponseInputItemUnionParam, []*toolcall.Result) {
	var items []responses.ResponseInputItemUnionParam
	var results []*toolcall.Result
	for _, item := range output {
		var r *toolcall.Result
		switch item.Type {
		case "function_call":
			fc := item.AsFunctionCall()
			r = reg.Dispatch(ctx, toolcall.Call{ID: fc.CallID, Name: fc.Name, Arguments: json.RawMessage(fc.Arguments)})
			items = append(items, FunctionCallOutput(r))
		case "custom_tool_call":
			cc := item.AsCustomToolCall()
			r = reg.Dispatch(ctx, toolcall.Call{ID: cc.CallID, Name: cc.Name, Arguments: customInput(cc.Input)})
			items = append(items, responses.ResponseInputItemParamOfCustomToolCallOutput(r.CallID, r.Content))
		default:
			continue
		}
		results = append(results, r)
	}
	return items, results
}

// FunctionCallOutput is the Responses API function_call_output item of one result: its text,
// for its call's id.
func FunctionCallOutput(r *toolcall.Result) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(r.Content)
	item.OfFunctionCallOutput.CallID = param.NewOpt(r.CallID)
	return item
}

// customInput is the arguments of a custom tool's call: its free-text input as {"input": text}.
func customInput(input string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"input": input}) // a string map always encodes
	return b
}
