// Package gateway puts MCP tool calls through latch's pipeline. It connects to the upstream MCP
// servers named in the policy's gateway section, lists their tools to the agent as
// <alias>.<tool>, and runs every tools/call as the action mcp.<alias>.<tool> with the tool's
// arguments as the action's arguments, so policy decisions, approvals and effect keys apply to
// tool calls unchanged.
//
// Outcomes follow what the gateway can know: a call refused before it is sent failed and nothing
// ran; a transport error, a deadline (Config.CallTimeout, never past the call's lease) or a
// cancellation (the agent cancelled or went away) after the request may have reached the
// upstream is ambiguous; a result with isError is ambiguous unless the policy says the tool's
// errors mean it did not act (errors_mean: not_executed); any other result is committed and
// stored, so a duplicate is refused with it — or, when it is larger than Config.MaxAnswer,
// committed with a marker of its size and hash, never held whole. Refusals reach the agent as JSON-RPC errors with a stable code
// and a structured data object (see [Refusal]). docs/gateway.md explains the reasoning.
//
// A call a person must approve is refused approval_required, and the agent re-sends it once the
// request is granted; an agent whose client takes elicitation is shown the request instead and,
// if its user accepts, its call is held open until an approver answers, the request expires or
// Config.ApprovalWait passes (elicit.go) — the elicitation's own answer is never an approval.
//
// The agent's principal comes from the MCP session — a bearer token on HTTP, the configured
// principal on stdio — and never from tool arguments.
package gateway
