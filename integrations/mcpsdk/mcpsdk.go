// Package mcpsdk protects the tools of an MCP server written with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) with latch, in process: every tools/call of a
// protected tool is decided by the guard's policy, held to at most once by its effect key,
// sent to a person when the policy says so, and receipted — exactly as latch's MCP gateway
// decides a call it forwards, with no gateway process in between.
//
//	mw, err := mcpsdk.New(&mcpsdk.Config{Guard: guard, Principal: latch.Principal{Agent: "support-bot"},
//		Tools: map[string]mcpsdk.Tool{"refund": {Action: "payments.refund"}}})
//	...
//	server.AddReceivingMiddleware(mw.Middleware())
//
// A protected tool's calls are the policy's actions: tool refund above is the action
// payments.refund, with the call's arguments as the action's arguments, so the action's
// effect template names its effect key, its rules decide, its approvals apply. Refusals reach
// the client as the gateway sends them: a JSON-RPC error with the code of the refusal's kind
// and a data object (package mcpwire, shared with the gateway: the same codes, reason words and
// fields). A duplicate of a committed effect is refused -31004 with the stored result; a call
// that needs a person's approval is refused -31002 with the request's id (or held open,
// Config.ApprovalWait), and the same call re-sent once the request is granted runs once. A
// call's _meta latch/request_key is its request key, its latch/task (or Latch-Task header over
// HTTP) names its task, and its latch/hop (or Latch-Hop header) the hop it acts under, as at
// the gateway.
//
// What the handler returns decides the outcome as an upstream's answer does at the gateway: a
// result is committed and stored; a result with isError is ambiguous unless the tool's
// ErrorsMean is not_executed; an error is ambiguous, unless it wraps latch.ErrNotExecuted
// (latch.NotExecuted), which says the tool did not act, or is a JSON-RPC invalid-params error
// (the SDK's answer to a tool it does not have). A handler added with the generic mcp.AddTool
// has its errors, and its arguments that fail the tool's input schema, turned into isError
// results by the SDK: give such a tool ErrorsMean not_executed when its errors come before it
// acts, or check the arguments with the policy's arguments schema, which refuses them before
// anything runs.
package mcpsdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/mcpwire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config configures a Middleware. Guard is required.
type Config struct {
	// Guard decides and records every protected call.
	Guard *latch.Guard
	// Principal is the agent every call acts as, unless PrincipalOf says otherwise.
	Principal latch.Principal
	// PrincipalOf, when set, is the principal of a call's session (a bearer token's subject,
	// say); false refuses the call unauthenticated. Nil uses Principal for every call.
	PrincipalOf func(ctx context.Context, req *mcp.CallToolRequest) (latch.Principal, bool)
	// Tools are the protected tools, by the name the server lists them under.
	Tools map[string]Tool
	// All protects every tool: one not in Tools is the action Prefix + its name. Without All,
	// a tool not in Tools is called as if there were no middleware.
	All bool
	// Prefix begins the action of a tool All protects; "" is "mcp.".
	Prefix string
	// ApprovalWait, when positive, holds a call the policy sends to a person open until an
	// approver answers, the request expires or ApprovalWait passes, sending progress
	// notifications when the call carries a progress token; granted, the call runs then. Zero
	// refuses such a call approval_required with the request's id at once, and the client
	// re-sends it once the request is granted.
	ApprovalWait time.Duration
	// Interrupter, when set, is the wait of a call the policy sends to a person (a framework's
	// own pause: interrupt.Interrupter): the call is handed to it, and runs again when it
	// answers interrupt.Resume; denied or expired, it is refused approval_denied or
	// approval_expired. ApprovalWait, when positive, bounds its wait. Nil holds the call only
	// when ApprovalWait is positive, polling the store.
	Interrupter interrupt.Interrupter[context.Context]
	// Now is the clock a grant's expiry and the wait are read by; nil is time.Now. Give it the
	// guard's clock.
	Now func() time.Time
}

// Tool is how one protected tool's calls are decided: its action, and what an isError result
// means (mcpwire.ToolSpec).
type Tool = mcpwire.ToolSpec

// Middleware protects the tools of one MCP server. It is safe for concurrent use.
type Middleware struct {
	cfg Config
}

// New checks cfg and returns its Middleware: Guard is required, and every tool's ErrorsMean
// must be one of policy's words.
func New(cfg *Config) (*Middleware, error) {
	if cfg == nil || cfg.Guard == nil {
		return nil, errors.New("mcpsdk: new: Config.Guard is required")
	}
	m := &Middleware{cfg: *cfg}
	if m.cfg.Now == nil {
		m.cfg.Now = time.Now
	}
	if err := mcpwire.CheckTools("mcpsdk", m.cfg.Tools); err != nil {
		return nil, err
	}
	return m, nil
}

// Middleware returns the receiving middleware to add to the server
// (mcp.Server.AddReceivingMiddleware): it decides each tools/call of a protected tool and calls
// the tool's handler only when latch lets the call run.
func (m *Middleware) Middleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ctr, ok := req.(*mcp.CallToolRequest)
			if method != "tools/call" || !ok || ctr.Params == nil {
				return next(ctx, method, req)
			}
			t, ok := m.tool(ctr.Params.Name)
			if !ok {
				return next(ctx, method, req)
			}
			return m.call(ctx, t, ctr, func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res, err := next(ctx, method, r)
				if err != nil {
					return nil, err
				}
				ctres, ok := res.(*mcp.CallToolResult)
				if !ok {
					return nil, fmt.Errorf("tools/call %s answered %T, not a tool result", r.Params.Name, res)
				}
				return ctres, nil
			})
		}
	}
}

// tool is how calls of the tool named name are decided; false when it is not protected.
func (m *Middleware) tool(name string) (Tool, bool) {
	return mcpwire.SelectTool(m.cfg.Tools, m.cfg.All, m.cfg.Prefix, name)
}

func (m *Middleware) principal(ctx context.Context, req *mcp.CallToolRequest) (latch.Principal, bool) {
	if m.cfg.PrincipalOf != nil {
		p, ok := m.cfg.PrincipalOf(ctx, req)
		return p, ok && p.Agent != ""
	}
	return m.cfg.Principal, m.cfg.Principal.Agent != ""
}

// call decides one call of tool t and runs it through next when latch lets it run.
func (m *Middleware) call(ctx context.Context, t Tool, req *mcp.CallToolRequest,
	next func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error)) (*mcp.CallToolResult, error) {
	p, ok := m.principal(ctx, req)
	if !ok {
		return nil, wire(mcpwire.NewError(mcpwire.Unauthenticated(t.Action,
			"the session carries no principal: set mcpsdk.Config.Principal, or make Config.PrincipalOf name the session's")))
	}
	var taskHeader, hopHeader []string
	if req.Extra != nil && req.Extra.Header != nil {
		taskHeader, hopHeader = req.Extra.Header.Values(mcpwire.TaskHeader), req.Extra.Header.Values(mcpwire.HopHeader)
	}
	task, err := mcpwire.Task(taskHeader, req.Params.Meta)
	if err != nil {
		return nil, wire(mcpwire.NewError(mcpwire.Map(t.Action, nil, err)))
	}
	hop, err := mcpwire.Hop(hopHeader, req.Params.Meta)
	if err != nil {
		return nil, wire(mcpwire.NewError(mcpwire.Map(t.Action, nil, err)))
	}
	key, err := mcpwire.RequestKey(req.Params.Meta)
	if err != nil {
		return nil, wire(mcpwire.NewError(mcpwire.Map(t.Action, nil, err)))
	}
	tc := &mcpwire.ToolCall{Action: t.Action, Arguments: req.Params.Arguments, RequestKey: key, ErrorsMean: t.ErrorsMean,
		ApprovalWait: m.cfg.ApprovalWait, Interrupter: m.cfg.Interrupter, Now: m.cfg.Now}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		sent := 0
		tc.Held = func(id string, until time.Time) {
			sent++
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(sent),
				Message: fmt.Sprintf("waiting for a person to answer approval request %s (until %s)", id, until.UTC().Format(time.RFC3339))})
		}
	}
	res, err := mcpwire.Run(latch.WithHop(latch.WithTask(latch.WithPrincipal(ctx, p), task), hop), m.cfg.Guard, tc,
		func(ctx context.Context, args json.RawMessage) (any, bool, error) {
			// The handler runs on the canonical arguments latch decided and hashed.
			params := *req.Params
			params.Arguments = args
			r := *req
			r.Params = &params
			out, err := next(ctx, &r)
			if je := (*jsonrpc.Error)(nil); errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams {
				// The SDK's answer to a tool it does not have, or a handler's refusal of its
				// arguments: nothing ran.
				return nil, false, latch.NotExecuted(err)
			}
			if err != nil {
				return nil, false, err
			}
			if out == nil {
				return nil, false, fmt.Errorf("tools/call %s answered no result", req.Params.Name)
			}
			if out.NeedsInput() || len(out.InputRequests) > 0 {
				// Each answer would come back as a new call, decided again: a protected tool
				// finishes in one call.
				return nil, false, latch.NotExecuted(fmt.Errorf("tool %s asked the client for input: a tool latch protects must finish in one call", req.Params.Name))
			}
			return out, out.IsError, nil
		})
	if err != nil {
		return nil, wire(err)
	}
	return res.(*mcp.CallToolResult), nil
}

// wire is err as the client receives it: an *mcpwire.Error becomes the JSON-RPC error the
// gateway sends for the same refusal.
func wire(err error) error {
	var we *mcpwire.Error
	if !errors.As(err, &we) {
		return err
	}
	return &jsonrpc.Error{Code: we.Code, Message: we.Message, Data: mcpwire.Data(we.Data)}
}
