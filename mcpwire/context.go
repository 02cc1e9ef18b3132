package mcpwire

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/authority"
)

// TaskHeader is the HTTP header of a tool call that names the task the call is part of (a job,
// a ticket, a workflow): matched against the tasks a grant names and recorded on the receipt
// (docs/authority.md#tasks). MetaTask is the same in the call's _meta, for transports without
// headers (stdio) and for agents that set it per call.
const (
	TaskHeader = "Latch-Task"
	MetaTask   = "latch/task"
)

// HopHeader is the HTTP header of a tool call that presents a hop (docs/agents.md): the call is
// decided by that hop's chain alone. MetaHop is the same in the call's _meta, for transports
// without headers.
const (
	HopHeader = "Latch-Hop"
	MetaHop   = "latch/hop"
)

// Task is the task a tool call names, "" when none: header holds the values of its Latch-Task
// header (none on a transport without headers), meta is its _meta. A header given twice, a _meta
// value that is not a string, or a header and a _meta that differ is an
// *latch.InvalidArgumentError: a call has one task, and latch does not pick one.
func Task(header []string, meta map[string]any) (string, error) {
	return oneOf(header, meta, TaskHeader, MetaTask, "a call has one task", func(msg string) error {
		return &latch.InvalidArgumentError{Reason: "invalid_argument", Err: errors.New("invalid task: " + msg)}
	})
}

// Hop is the hop a tool call presents, "" when none, read as Task reads the task: from its
// Latch-Hop header values and its _meta latch/hop. A hop that cannot be read is refused as a
// call presenting two hops is: an *latch.AuthorityError, authority_hop.
func Hop(header []string, meta map[string]any) (string, error) {
	return oneOf(header, meta, HopHeader, MetaHop, "a call presents one hop", func(msg string) error {
		return &latch.AuthorityError{Reason: authority.ReasonHop, Dimension: authority.DimHop, Detail: msg}
	})
}

// oneOf reads a value a call may give as a header or in _meta, or both when they agree.
func oneOf(header []string, meta map[string]any, headerName, metaKey, one string, bad func(string) error) (string, error) {
	var h, m string
	var hasHeader, hasMeta bool
	if len(header) > 1 {
		return "", bad(fmt.Sprintf("the %s header is given %d times (%s)", headerName, len(header), one))
	}
	if len(header) == 1 {
		h, hasHeader = header[0], true
	}
	if v, ok := meta[metaKey]; ok && v != nil {
		s, isString := v.(string)
		if !isString {
			return "", bad(fmt.Sprintf("_meta %s is %T, not a string", metaKey, v))
		}
		m, hasMeta = s, true
	}
	switch {
	case hasHeader && hasMeta && h != m:
		return "", bad(fmt.Sprintf("the %s header %s and _meta %s %s differ (%s)",
			headerName, strconv.QuoteToASCII(h), metaKey, strconv.QuoteToASCII(m), one))
	case hasHeader:
		return h, nil
	}
	return m, nil
}
