// Package toolcall runs the tool calls a language model asks for through a latch guard, and turns
// latch's answer into the tool result the model reads next.
//
// An agent that calls a model API directly (the OpenAI or Anthropic SDKs, or any other) gets
// back a list of tool calls: a name, JSON arguments and an id. A Registry maps each tool name to
// a latch action, an effect key template rendered from the arguments, and the Go function that
// does the work. Dispatch runs one call through Guard.Execute — decide, approve, reserve the
// effect key, run, record — and classifies what happened:
//
//	StatusOK         the tool ran; Content is its result as JSON
//	StatusDuplicate  the effect already happened (a re-sent tool call); the tool did not run
//	                 again, and Content carries the result stored when it did
//	StatusPending    a person must approve the call first; it has not run. Content names the
//	                 approval request (id, action hash, effect key, expiry)
//	StatusRefused    latch refused the call (denied, invalid arguments, approval refused, …);
//	                 Content says why, with latch's reason word, and what the model can do
//	StatusUnknown    the outcome is unknown — this call's or an earlier attempt's — and retrying
//	                 is blocked until a person resolves the effect
//	StatusFailed     the tool failed without acting (latch.NotExecuted); calling it again may
//	                 succeed
//
// Content is text for the model: it starts with the reason word of latch's one refusal
// vocabulary (docs/errors.md) — the same word the HTTP API, the MCP gateway and the task
// integrations use — followed by what happened and what to do. IsError says whether the result
// reports a failure to the model (Anthropic's is_error); a pending approval is not one.
//
// The integrations github.com/latchkit/latch/integrations/openai and
// github.com/latchkit/latch/integrations/anthropic build the SDKs' tool-result messages from a
// Result; anything else can use Content and IsError directly.
package toolcall

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
)

// Handler does the work of one tool call. args are the canonical arguments latch decided on —
// what was hashed and approved — never the model's own bytes. Its result is encoded as JSON: it
// is the tool result the model reads, and the result latch stores for a later duplicate.
//
// An error means the outcome is unknown (the call is recorded ambiguous, and no retry runs until
// a person resolves it), unless it is latch.NotExecuted(err): the handler knows nothing happened,
// and the call may be retried.
type Handler func(ctx context.Context, args json.RawMessage) (any, error)

// Func adapts a typed function to a Handler: the canonical arguments are decoded into A. A
// decoding failure is latch.NotExecuted — fn was not called.
func Func[A, R any](fn func(context.Context, A) (R, error)) Handler {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		var a A
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, latch.NotExecuted(fmt.Errorf("decode arguments: %w", err))
		}
		return fn(ctx, a)
	}
}

// Tool is one protected tool.
type Tool struct {
	// Name is the tool's name as the model calls it (the function name of its definition).
	Name string
	// Action is the latch action the policy decides; "" means Name.
	Action string
	// Effect is the effect key template, rendered from the call's arguments
	// ("refund:{order_id}"); it overrides the policy's effect template for the action. "" keeps
	// the policy's (an action with neither has no effect key: nothing stops it from running
	// twice).
	Effect string
	// Handler does the work. Required.
	Handler Handler
	// Options are the other options of the protected call: the lease, a reconcile hook, the
	// task, Wait. Options.Effect must be empty when Effect is set.
	Options *latch.Options
}

// Config configures a Registry. A nil *Config means all defaults.
type Config struct {
	// Principal is who the tool calls act as (Agent required when set). Zero: the principal of
	// the context passed to Dispatch, or the guard's identity provider; with neither, every
	// call is refused no_principal.
	Principal latch.Principal
	// Interrupter, when set, is the wait of a call latch answers approval_required, or whose
	// effect's outcome is unknown (named by its effect key): Dispatch hands it the refusal and,
	// when it answers interrupt.Resume, dispatches the call once more, unchanged (the guard finds
	// the grant for its exact action and spends it; a resolved effect runs again or is a
	// duplicate). On interrupt.Denied and interrupt.Expired the call presents the answered
	// request, which the guard refuses (approval_denied, approval_expired) with a receipt. An
	// error of the wait leaves the first result. Nil answers such a call at once
	// (StatusPending, StatusUnknown).
	Interrupter interrupt.Interrupter[context.Context]
}

// Registry holds the protected tools of one agent and runs their calls through one guard. It
// is safe for concurrent use.
type Registry struct {
	g   *latch.Guard
	cfg Config

	mu    sync.RWMutex
	tools map[string]*Tool
}

// ErrInvalidTool is matched by the error of Register for a tool that cannot be registered.
var ErrInvalidTool = errors.New("toolcall: invalid tool")

// New returns an empty registry running calls through g.
func New(g *latch.Guard, cfg *Config) *Registry {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	return &Registry{g: g, cfg: c, tools: map[string]*Tool{}}
}

// Register adds t. A tool without a name or a handler, a name registered already, or an Effect
// set together with Options.Effect is refused with an error matching ErrInvalidTool; nothing
// is added.
func (r *Registry) Register(t Tool) error {
	switch {
	case t.Name == "":
		return fmt.Errorf("%w: the name is empty", ErrInvalidTool)
	case t.Handler == nil:
		return fmt.Errorf("%w %q: no handler", ErrInvalidTool, t.Name)
	case t.Effect != "" && t.Options != nil && t.Options.Effect != "":
		return fmt.Errorf("%w %q: both Effect and Options.Effect are set", ErrInvalidTool, t.Name)
	}
	if t.Action == "" {
		t.Action = t.Name
	}
	var opts latch.Options
	if t.Options != nil {
		opts = *t.Options
	}
	if t.Effect != "" {
		opts.Effect = t.Effect
	}
	t.Options = &opts
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[t.Name]; ok {
		return fmt.Errorf("%w %q: registered already", ErrInvalidTool, t.Name)
	}
	r.tools[t.Name] = &t
	return nil
}

// Tool returns the registered tool named name.
func (r *Registry) Tool(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	if !ok {
		return Tool{}, false
	}
	return *t, true
}

// Call is one tool call of a model's response.
type Call struct {
	ID        string          // the model's id of the call, handed back with its result
	Name      string          // the tool's name
	Arguments json.RawMessage // a JSON object; empty means {}
}

// Dispatch runs c through the guard and returns its result; it never returns nil. Every outcome
// — a refusal, an unknown outcome, latch unable to reach its store — is a Result, since the
// model is owed an answer to each of its tool calls; Result.Err is latch's error for the
// program to log or branch on.
//
// To run a call whose approval was granted, pass ctx carrying it: WithApprovals (by the call's
// id), or latch.WithApproval for a single call. The approval is spent on this call only if it
// binds the same action and arguments.
//
// With Config.Interrupter, a call answered approval_required (or unknown, with its effect key)
// waits on it first, and its result is that of the call dispatched again on resume.
func (r *Registry) Dispatch(ctx context.Context, c Call) *Result {
	t, ok := r.Tool(c.Name)
	if !ok {
		return unlisted(c)
	}
	res := r.dispatch(ctx, t, c)
	if r.cfg.Interrupter == nil || !interrupt.Interruptible(res.Refusal) {
		return res
	}
	ans, err := r.cfg.Interrupter.Interrupt(ctx, res.Refusal)
	switch {
	case err != nil:
		return res
	case ans.Status == interrupt.Resume:
		// Once: the call run again meets the answer; what it answers now is its result.
		return r.dispatch(ctx, t, c)
	case ans.Status == interrupt.Denied || ans.Status == interrupt.Expired:
		id := cmp.Or(ans.ApprovalID, res.Refusal.ApprovalID)
		if id == "" {
			out := Classify(ans.Refusal().Err())
			out.CallID, out.Name = c.ID, c.Name
			return out
		}
		// The call presents the answered request (and no other), and the guard refuses it by
		// the request's own status (approval_denied, approval_expired), with a receipt.
		return r.dispatch(latch.WithApproval(WithApprovals(ctx, nil), id), t, c)
	}
	return res
}

// dispatch runs c, a call of t, through the guard once.
func (r *Registry) dispatch(ctx context.Context, t Tool, c Call) *Result {
	if id := approvalsFrom(ctx)[c.ID]; id != "" {
		ctx = latch.WithApproval(ctx, id)
	}
	if r.cfg.Principal.Agent != "" {
		ctx = latch.WithPrincipal(ctx, r.cfg.Principal)
	}
	call := &latch.Call{Action: t.Action, Arguments: c.Arguments, Options: t.Options}
	var value json.RawMessage
	rc, err := r.g.Execute(ctx, call, func(ctx context.Context, args json.RawMessage) (any, error) {
		v, err := t.Handler(ctx, args)
		if err == nil {
			// Encoded here, as latch encodes it for the store: a later duplicate reads back
			// these bytes.
			value, err = json.Marshal(v)
			if err != nil {
				// The handler ran and returned: its effect happened, but its result cannot be
				// handed on.
				return v, nil
			}
		}
		return v, err
	})
	res := Classify(err)
	res.CallID, res.Name, res.Receipt = c.ID, c.Name, rc
	if res.Status == StatusOK {
		if value == nil {
			value = json.RawMessage("null")
		}
		res.Value, res.Content = value, string(value)
	}
	return res
}

// DispatchAll runs calls one after another, in order, and returns their results in the same
// order. They run sequentially: a model's parallel calls may touch the same effect.
func (r *Registry) DispatchAll(ctx context.Context, calls []Call) []*Result {
	out := make([]*Result, len(calls))
	for i, c := range calls {
		out[i] = r.Dispatch(ctx, c)
	}
	return out
}

// unlisted is the result of a call of a tool the registry does not hold: refused
// unknown_action, as the policy refuses an action it does not list. Nothing is recorded: there
// is no action to record it under.
func unlisted(c Call) *Result {
	err := &latch.DeniedError{Action: c.Name, Reason: string(latch.ReasonUnknownAction)}
	res := Classify(err)
	res.CallID, res.Name = c.ID, c.Name
	res.Content = string(latch.ReasonUnknownAction) + ": there is no tool named " + quote(c.Name) +
		"; it did not run. Call only the tools you were given."
	return res
}

type approvalsKey struct{}

// WithApprovals returns ctx carrying approval ids by tool call id: Dispatch presents
// approvals[c.ID] with the call c, and no approval with the others. It is how a turn whose call
// waited for approval is run again once a person answered: the approved call runs, a call of
// the turn that ran already is answered with its stored result (its effect is committed), and a
// denied request is refused approval_denied. A call whose action has no effect key would run
// again: give every tool that acts an effect key. Present them for that one run: a spent
// approval presented again is refused approval_consumed, where a run without it answers the
// call committed, with its stored result.
func WithApprovals(ctx context.Context, approvals map[string]string) context.Context {
	return context.WithValue(ctx, approvalsKey{}, approvals)
}

func approvalsFrom(ctx context.Context) map[string]string {
	m, _ := ctx.Value(approvalsKey{}).(map[string]string)
	return m
}

// Pending returns the approval id of every pending result, by tool call id: what
// WithApprovals takes to run the turn again once people answered.
func Pending(results []*Result) map[string]string {
	m := map[string]string{}
	for _, r := range results {
		if r.Status == StatusPending && r.Refusal != nil && r.Refusal.ApprovalID != "" {
			m[r.CallID] = r.Refusal.ApprovalID
		}
	}
	return m
}
