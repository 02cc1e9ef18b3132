// Package mcpgo protects the tools of an MCP server written with github.com/mark3labs/mcp-go
// with latch, in process: every tools/call of a protected tool is decided by the guard's policy,
// held to at most once by its effect key, sent to a person when the policy says so, and
// receipted — exactly as latch's MCP gateway decides a call it forwards, with no gateway process
// in between.
//
//	mw, err := mcpgo.New(&mcpgo.Config{Guard: guard, Principal: latch.Principal{Agent: "support-bot"},
//		Tools: map[string]mcpgo.Tool{"refund": {Action: "payments.refund"}}})
//	...
//	s := server.NewMCPServer("payments", "1.0.0", server.WithToolHandlerMiddleware(mw.Middleware()))
//
// A protected tool's calls are the policy's actions: tool refund above is the action
// payments.refund, with the call's arguments as the action's arguments, so the action's effect
// template names its effect key, its rules decide, its approvals apply. A call that needs a
// person's approval is refused approval_required with the request's id (or held open,
// Config.ApprovalWait), and the same call re-sent once the request is granted runs once. A
// call's _meta latch/request_key is its request key, its latch/task (or Latch-Task header over
// HTTP) names its task, and its latch/hop (or Latch-Hop header) the hop it acts under, as at
// the gateway.
//
// # Refusals
//
// The decision and its data are the gateway's (package mcpwire, shared with it): the same
// JSON-RPC code, reason words and fields. mcp-go answers every error a tool handler or its
// middleware returns as -32603 with no data, so a refusal cannot travel as the gateway's
// JSON-RPC error; it is answered as a tool result that says isError, whose _meta
// latch/refusal (MetaRefusal) is the JSON-RPC error object the gateway would have sent
// ({"code", "message", "data"}), and whose text is that same object as JSON, so that a model
// reads the reason, the approval id or the stored result. RefusalOf reads it back.
//
// What the handler returns decides the outcome as an upstream's answer does at the gateway: a
// result is committed and stored; a result with isError is ambiguous unless the tool's
// ErrorsMean is not_executed; an error is ambiguous, unless it wraps latch.ErrNotExecuted
// (latch.NotExecuted), which says the tool did not act.
package mcpgo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/mcpwire"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// MetaRefusal is the _meta key of a refused call's result: the JSON-RPC error object
// (mcpwire.Error) the MCP gateway sends for the same refusal.
const MetaRefusal = "latch/refusal"

// Config configures a Middleware. Guard is required.
type Config struct {
	// Guard decides and records every protected call.
	Guard *latch.Guard
	// Principal is the agent every call acts as, unless PrincipalOf says otherwise.
	Principal latch.Principal
	// PrincipalOf, when set, is the principal of a call (from the session in ctx, a bearer
	// token's subject, …); false refuses the call unauthenticated. Nil uses Principal.
	PrincipalOf func(ctx context.Context, req mcp.CallToolRequest) (latch.Principal, bool)
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
		return nil, errors.New("mcpgo: new: Config.Guard is required")
	}
	m := &Middleware{cfg: *cfg}
	if m.cfg.Now == nil {
		m.cfg.Now = time.Now
	}
	if err := mcpwire.CheckTools("mcpgo", m.cfg.Tools); err != nil {
		return nil, err
	}
	return m, nil
}

// Middleware returns the tool handler middleware to give the server
// (server.WithToolHandlerMiddleware, or MCPServer.Use): it decides each call of a protected
// tool and calls the tool's handler only when latch lets the call run.
func (m *Middleware) Middleware() server.ToolHandlerMiddleware {
	return func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			t, ok := m.tool(req.Params.Name)
			if !ok {
				return next(ctx, req)
			}
			return m.call(ctx, t, req, next), nil
		}
	}
}

// tool is how calls of the tool named name are decided; false when it is not protected.
func (m *Middleware) tool(name string) (Tool, bool) {
	return mcpwire.SelectTool(m.cfg.Tools, m.cfg.All, m.cfg.Prefix, name)
}

func (m *Middleware) principal(ctx context.Context, req mcp.CallToolRequest) (latch.Principal, bool) {
	if m.cfg.PrincipalOf != nil {
		p, ok := m.cfg.PrincipalOf(ctx, req)
		return p, ok && p.Agent != ""
	}
	return m.cfg.Principal, m.cfg.Principal.Agent != ""
}

// call decides one call of tool t and runs it through next when latch lets it run; a refusal
// is its isError result (refused).
func (m *Middleware) call(ctx context.Context, t Tool, req mcp.CallToolRequest, next server.ToolHandlerFunc) *mcp.CallToolResult {
	p, ok := m.principal(ctx, req)
	if !ok {
		return refused(mcpwire.NewError(mcpwire.Unauthenticated(t.Action,
			"the session carries no principal: set mcpgo.Config.Principal, or make Config.PrincipalOf name the call's")))
	}
	var meta map[string]any
	if req.Params.Meta != nil {
		meta = req.Params.Meta.AdditionalFields
	}
	var taskHeader, hopHeader []string
	if req.Header != nil {
		taskHeader, hopHeader = req.Header.Values(mcpwire.TaskHeader), req.Header.Values(mcpwire.HopHeader)
	}
	task, err := mcpwire.Task(taskHeader, meta)
	if err != nil {
		return refused(mcpwire.NewError(mcpwire.Map(t.Action, nil, err)))
	}
	hop, err := mcpwire.Hop(hopHeader, meta)
	if err != nil {
		return refused(mcpwire.NewError(mcpwire.Map(t.Action, nil, err)))
	}
	key, err := mcpwire.RequestKey(meta)
	if err != nil {
		return refused(mcpwire.NewError(mcpwire.Map(t.Action, nil, err)))
	}
	args, err := arguments(req)
	if err != nil {
		return refused(mcpwire.NewError(mcpwire.Map(t.Action, nil,
			&latch.InvalidArgumentError{Reason: "invalid_argument", Err: err})))
	}
	tc := &mcpwire.ToolCall{Action: t.Action, Arguments: args, RequestKey: key, ErrorsMean: t.ErrorsMean,
		ApprovalWait: m.cfg.ApprovalWait, Interrupter: m.cfg.Interrupter, Now: m.cfg.Now}
	if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
		if srv := server.ServerFromContext(ctx); srv != nil {
			tok, sent := req.Params.Meta.ProgressToken, 0
			tc.Held = func(id string, until time.Time) {
				sent++
				_ = srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": tok, "progress": sent,
					"message": fmt.Sprintf("waiting for a person to answer approval request %s (until %s)", id, until.UTC().Format(time.RFC3339))})
			}
		}
	}
	res, err := mcpwire.Run(latch.WithHop(latch.WithTask(latch.WithPrincipal(ctx, p), task), hop), m.cfg.Guard, tc,
		func(ctx context.Context, canonical json.RawMessage) (any, bool, error) {
			// The handler runs on the canonical arguments latch decided and hashed.
			var decoded map[string]any
			if err := json.Unmarshal(canonical, &decoded); err != nil {
				return nil, false, latch.NotExecuted(fmt.Errorf("decode the canonical arguments: %w", err))
			}
			r := req
			r.Params.Arguments, r.Params.RawArguments = decoded, canonical
			out, err := next(ctx, r)
			if err != nil {
				return nil, false, err
			}
			if out == nil {
				return nil, false, fmt.Errorf("the handler of %s returned no result", req.Params.Name)
			}
			if out.NeedsInput() || len(out.InputRequests) > 0 {
				// Each answer would come back as a new call, decided again: a protected tool
				// finishes in one call.
				return nil, false, latch.NotExecuted(fmt.Errorf("tool %s asked the client for input: a tool latch protects must finish in one call", req.Params.Name))
			}
			return out, out.IsError, nil
		})
	if err != nil {
		var we *mcpwire.Error
		if !errors.As(err, &we) {
			we = mcpwire.NewError(mcpwire.Internal(t.Action, err))
		}
		return refused(we)
	}
	return res.(*mcp.CallToolResult)
}

// arguments are the call's arguments as JSON: the bytes the client sent when the transport kept
// them, else its Arguments encoded.
func arguments(req mcp.CallToolRequest) (json.RawMessage, error) {
	if len(req.Params.RawArguments) > 0 {
		return req.Params.RawArguments, nil
	}
	if req.Params.Arguments == nil {
		return nil, nil
	}
	if raw, ok := req.Params.Arguments.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(req.Params.Arguments)
	if err != nil {
		return nil, fmt.Errorf("the arguments of %s do not encode as JSON: %w", req.Params.Name, err)
	}
	return b, nil
}

// refused is the result a refusal is answered with: isError, the gateway's JSON-RPC error
// object as its text and as its _meta latch/refusal.
func refused(we *mcpwire.Error) *mcp.CallToolResult {
	text, err := json.Marshal(we)
	if err != nil { // an Error always encodes; keep the message if it did not
		text = []byte(we.Message)
	}
	return &mcp.CallToolResult{
		Result:  mcp.Result{Meta: &mcp.Meta{AdditionalFields: map[string]any{MetaRefusal: we}}},
		Content: []mcp.Content{mcp.NewTextContent(string(text))},
		IsError: true,
	}
}

// RefusalOf reads the refusal a result carries in its _meta latch/refusal, as a client
// receives it: false when the result is not a refusal of latch's.
func RefusalOf(res *mcp.CallToolResult) (*mcpwire.Error, bool) {
	if res == nil || !res.IsError || res.Meta == nil {
		return nil, false
	}
	v, ok := res.Meta.AdditionalFields[MetaRefusal]
	if !ok {
		return nil, false
	}
	if we, ok := v.(*mcpwire.Error); ok { // an in-process client's result is the server's value
		return we, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	var we mcpwire.Error
	if json.Unmarshal(b, &we) != nil || we.Data.Reason == "" {
		return nil, false
	}
	return &we, true
}
