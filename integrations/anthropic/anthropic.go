// Package latchanthropic runs the tool_use blocks of a Claude model's message through latch,
// with the official Go SDK (github.com/anthropics/anthropic-sdk-go/v2), and builds the user
// message of tool_result blocks that answers them.
//
// A Message whose stop reason is tool_use holds one tool_use block per call: an id, a name and
// the input. Dispatch runs each through a toolcall.Registry — decide, approve, reserve its
// effect key, run, record — and returns the user message to send next, holding one tool_result
// block per tool_use block, in their order, each with its tool_use_id.
//
// The block's text is toolcall.Result.Content: a tool that ran answers its result as JSON; a
// refusal, a pending approval, a duplicate or an unknown outcome answers latch's reason word
// first (denied, approval_required, committed, ambiguous, …), then what happened and what the
// model can do, then the approval id, effect key and the rest, one per line. is_error is set for
// a refusal, an unknown outcome and a tool that failed (toolcall.Result.IsError); not for a tool
// that ran, a duplicate answered with its stored result, or a call waiting for approval. The
// Result of each call is returned too, for the program: Status says whether a person must
// approve (toolcall.StatusPending) or resolve (toolcall.StatusUnknown) before the conversation
// goes on.
//
// A model that re-sends a tool call — after a lost reply, a crash, a retried turn — gets the
// stored result of the effect (committed), or is told its outcome is unknown (ambiguous): the
// tool runs once. docs/integrations/anthropic.md of the latch repository has the walk-through.
package latchanthropic

import (
	"context"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/latchkit/latch/toolcall"
)

// Calls returns the tool_use blocks of msg as tool calls, in order; other blocks (text,
// thinking, server tools' blocks) are skipped.
func Calls(msg *anthropic.Message) []toolcall.Call {
	var calls []toolcall.Call
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			tu := b.AsToolUse()
			calls = append(calls, toolcall.Call{ID: tu.ID, Name: tu.Name, Arguments: tu.Input})
		}
	}
	return calls
}

// Dispatch runs every tool_use block of msg through reg, one after another, and returns the
// user message of their tool_result blocks, to send after msg (msg.ToParam()), with the
// results it was built from. A message without tool_use blocks gives an empty message and no
// results: check len(results) first.
func Dispatch(ctx context.Context, reg *toolcall.Registry, msg *anthropic.Message) (anthropic.MessageParam, []*toolcall.Result) {
	results := reg.DispatchAll(ctx, Calls(msg))
	blocks := make([]anthropic.ContentBlockParamUnion, len(results))
	for i, r := range results {
		blocks[i] = ToolResult(r)
	}
	return anthropic.NewUserMessage(blocks...), results
}

// ToolResult is the tool_result block of one result: its text, for its call's tool_use_id,
// with is_error when the result reports a failure.
func ToolResult(r *toolcall.Result) anthropic.ContentBlockParamUnion {
	return anthropic.NewToolResultBlock(r.CallID, r.Content, r.IsError)
}
