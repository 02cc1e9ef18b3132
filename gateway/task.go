package gateway

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/latchkit/latch"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TaskHeader is the HTTP header of a tool call that names the task the call is part of (a job,
// a ticket, a workflow): matched against the tasks a grant names and recorded on the receipt
// (docs/authority.md#tasks). MetaTask is the same in the call's _meta, for transports without
// headers (stdio) and for agents that set it per call.
const (
	TaskHeader = "Latch-Task"
	MetaTask   = "latch/task"
)

// taskOf is the task a tool call names, "" when none: the Latch-Task header of the HTTP request
// that carried it, or _meta latch/task, which must agree when both are given. A header given
// twice, a _meta value that is not a string, or two different tasks is an invalid_argument:
// a call has one task, and the gateway does not pick one.
func taskOf(req *mcp.CallToolRequest) (string, error) {
	var header, meta string
	var hasHeader, hasMeta bool
	if req.Extra != nil && req.Extra.Header != nil {
		vs := req.Extra.Header.Values(TaskHeader)
		if len(vs) > 1 {
			return "", invalidTask(fmt.Sprintf("the %s header is given %d times (a call has one task)", TaskHeader, len(vs)))
		}
		if len(vs) == 1 {
			header, hasHeader = vs[0], true
		}
	}
	if req.Params != nil {
		if v, ok := req.Params.Meta[MetaTask]; ok && v != nil {
			s, isString := v.(string)
			if !isString {
				return "", invalidTask(fmt.Sprintf("_meta %s is %T, not a string", MetaTask, v))
			}
			meta, hasMeta = s, true
		}
	}
	switch {
	case hasHeader && hasMeta && header != meta:
		return "", invalidTask(fmt.Sprintf("the %s header %s and _meta %s %s differ (a call has one task)",
			TaskHeader, strconv.QuoteToASCII(header), MetaTask, strconv.QuoteToASCII(meta)))
	case hasHeader:
		return header, nil
	}
	return meta, nil
}

// invalidTask refuses a call whose task cannot be read, as latch refuses a task no call may
// carry: invalid_argument, before anything is decided or written.
func invalidTask(msg string) error {
	return &latch.InvalidArgumentError{Reason: "invalid_argument", Err: errors.New("invalid task: " + msg)}
}
