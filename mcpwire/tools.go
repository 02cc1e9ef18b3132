package mcpwire

import (
	"fmt"

	"github.com/latchkit/latch/policy"
)

// ToolSpec is how one protected tool of an MCP server is decided: the in-process middlewares'
// Config.Tools values (integrations/mcpsdk, integrations/mcpgo).
type ToolSpec struct {
	// Action is the policy action of the tool's calls; "" is the middleware's prefix + the
	// tool's name.
	Action string
	// ErrorsMean is what a result with isError means: policy.ErrorsMeanUnknown ("" too: the
	// tool may have acted, the call is ambiguous) or policy.ErrorsMeanNotExecuted (it reports
	// errors only before it acts: the call failed).
	ErrorsMean string
}

// DefaultPrefix begins the action of a tool a middleware protects without listing it.
const DefaultPrefix = "mcp."

// CheckTools refuses a list of protected tools with an ErrorsMean that is not one of policy's
// words, naming the tool; who begins the error (the middleware's name).
func CheckTools(who string, tools map[string]ToolSpec) error {
	for name, t := range tools {
		switch t.ErrorsMean {
		case "", policy.ErrorsMeanUnknown, policy.ErrorsMeanNotExecuted:
		default:
			return fmt.Errorf("%s: new: Config.Tools[%q].ErrorsMean %q is not %q or %q",
				who, name, t.ErrorsMean, policy.ErrorsMeanUnknown, policy.ErrorsMeanNotExecuted)
		}
	}
	return nil
}

// SelectTool reports whether a middleware protects the tool named name — listed in tools, or
// any tool with all — and how: its ToolSpec, with Action filled in (prefix + name when the list
// names none; "" prefix is DefaultPrefix).
func SelectTool(tools map[string]ToolSpec, all bool, prefix, name string) (ToolSpec, bool) {
	t, ok := tools[name]
	if !ok && !all {
		return ToolSpec{}, false
	}
	if t.Action == "" {
		if prefix == "" {
			prefix = DefaultPrefix
		}
		t.Action = prefix + name
	}
	return t, true
}
