package gateway

import (
	"github.com/latchkit/latch/mcpwire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TaskHeader is the HTTP header of a tool call that names the task the call is part of (a job,
// a ticket, a workflow): matched against the tasks a grant names and recorded on the receipt
// (docs/authority.md#tasks). MetaTask is the same in the call's _meta, for transports without
// headers (stdio) and for agents that set it per call. Both are package mcpwire's.
const (
	TaskHeader = mcpwire.TaskHeader
	MetaTask   = mcpwire.MetaTask
)

// taskOf is the task a tool call names, "" when none: the Latch-Task header of the HTTP request
// that carried it, or _meta latch/task, which must agree when both are given (mcpwire.Task).
func taskOf(req *mcp.CallToolRequest) (string, error) {
	var header []string
	if req.Extra != nil && req.Extra.Header != nil {
		header = req.Extra.Header.Values(TaskHeader)
	}
	var meta map[string]any
	if req.Params != nil {
		meta = req.Params.Meta
	}
	return mcpwire.Task(header, meta)
}
