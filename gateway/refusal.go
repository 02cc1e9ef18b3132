package gateway

import (
	"github.com/latchkit/latch"
	"github.com/latchkit/latch/mcpwire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// JSON-RPC error codes of the gateway's refusals, stable across releases: package mcpwire's,
// which the in-process MCP middlewares answer with too. Each code has one reason family;
// Refusal.Reason says which reason within it.
const (
	CodeInternal         = mcpwire.CodeInternal
	CodeDenied           = mcpwire.CodeDenied
	CodeApprovalRequired = mcpwire.CodeApprovalRequired
	CodeApprovalRefused  = mcpwire.CodeApprovalRefused
	CodeDuplicate        = mcpwire.CodeDuplicate
	CodeEffectAmbiguous  = mcpwire.CodeEffectAmbiguous
	CodeAmbiguous        = mcpwire.CodeAmbiguous
	CodeNotExecuted      = mcpwire.CodeNotExecuted
	CodeAuthority        = mcpwire.CodeAuthority
	CodeUnauthenticated  = mcpwire.CodeUnauthenticated
	CodeExhausted        = mcpwire.CodeExhausted
	CodeKeyConflict      = mcpwire.CodeKeyConflict
	CodeAnswerTooLarge   = mcpwire.CodeAnswerTooLarge
)

// Refusal is the data object of every gateway error (mcpwire.Refusal): what an agent needs to
// tell "ask a human" from "already done" from "denied" without parsing the message.
type Refusal = mcpwire.Refusal

// refusal maps an error of Guard.Execute to its JSON-RPC code and data: mcpwire.Map, the one
// mapping every MCP surface of latch answers with.
func refusal(action string, rc *latch.Receipt, err error) (int64, Refusal) {
	return mcpwire.Map(action, rc, err)
}

// wireError is the JSON-RPC error an agent receives.
func wireError(code int64, r Refusal) error {
	return &jsonrpc.Error{Code: code, Message: r.Detail, Data: mcpwire.Data(r)}
}
