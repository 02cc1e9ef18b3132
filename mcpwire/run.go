package mcpwire

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// Error is a refusal as an MCP server answers it: the JSON-RPC code and the data object. Its
// JSON form is the JSON-RPC error object ({"code", "message", "data"}) the gateway sends.
type Error struct {
	Code    int64   `json:"code"`
	Message string  `json:"message"`
	Data    Refusal `json:"data"`
}

// NewError is the Error of code and r; its message is r.Detail.
func NewError(code int64, r Refusal) *Error { return &Error{Code: code, Message: r.Detail, Data: r} }

func (e *Error) Error() string { return e.Message }

// ToolCall is one tools/call an in-process MCP server received for a tool latch protects.
type ToolCall struct {
	// Action is the policy action the tool's calls are decided as.
	Action string
	// Arguments are the call's arguments as the client sent them; empty or null is {}.
	Arguments json.RawMessage
	// RequestKey is the call's request key (RequestKey of its _meta), "" when none.
	RequestKey string
	// ErrorsMean says what a result the tool marks isError means: policy.ErrorsMeanUnknown
	// ("" too: it may come after the tool acted, so the outcome is ambiguous) or
	// policy.ErrorsMeanNotExecuted (the tool reports errors only before it acts: the call
	// failed, and may be retried).
	ErrorsMean string
	// ApprovalWait, when positive, holds a call the policy sends to a person open for at most
	// that long, until an approver answers or the request expires: granted, the call runs then
	// and its result is the answer. Zero or negative answers approval_required at once (unless
	// Interrupter is set), and the client re-sends the call once the request is granted.
	ApprovalWait time.Duration
	// Interrupter, when set, is the wait of a call answered approval_required: Run hands it the
	// refusal and, when it answers interrupt.Resume, runs the call again, unchanged (the guard
	// finds the grant by the call's exact action and spends it once); on interrupt.Denied and
	// interrupt.Expired the call presents the answered request (Answer.ApprovalID), which the
	// guard refuses approval_denied or approval_expired with a receipt. A positive ApprovalWait bounds its wait (its context's deadline); past
	// it, or when it returns an error matching its context's, the call is answered
	// approval_required as without a wait. Nil holds the call, when ApprovalWait is positive, by
	// polling the store (as interrupt.Poller does, more often at first, calling Held).
	Interrupter interrupt.Interrupter[context.Context]
	// Now is the clock a grant's expiry and the wait are read by; nil is time.Now. Give it the
	// guard's clock.
	Now func() time.Time
	// Held, when set, is called about once a second while the call is held for its approval
	// request by the default wait (not by an Interrupter of the caller's), with the request's id and the latest the call waits (to send the client a
	// progress notification).
	Held func(approvalID string, until time.Time)
}

// Tool runs the protected tool on args, the canonical arguments latch decided and hashed
// (never the client's own bytes), and returns its result — what is stored for the effect and
// handed, as Refusal.Result, to every duplicate — and whether the result says isError. An
// error wrapping latch.ErrNotExecuted (latch.NotExecuted) says the tool did not act: the call
// failed. Any other error leaves the outcome unknown: the call is ambiguous.
type Tool func(ctx context.Context, args json.RawMessage) (result any, isError bool, err error)

// Run decides the call through g and runs tool for it when the policy, its effect key and its
// approval allow, exactly as the MCP gateway decides a call it forwards. ctx must carry the
// call's principal (latch.WithPrincipal). It returns the tool's result, or an *Error: the
// refusal as the gateway would answer the same call — denied, approval_required with the
// request's id, a committed duplicate with the stored result, an ambiguous outcome, ….
//
// A call the policy sends to a person is answered approval_required with the request's id, or
// held open (ToolCall.ApprovalWait), or waits on the caller's interrupt.Interrupter
// (ToolCall.Interrupter) and runs again when it answers resume. The same call re-sent after the request was granted runs
// once: the guard finds the grant bound to its exact action hash and spends it. A call carrying
// a request key is begun under it (latch.WithRequestKey): a retry under the same key while the
// first still holds its effect waits for the first's outcome, and is then decided as any
// duplicate of the effect is; the tool is never run twice for one key.
func Run(ctx context.Context, g *latch.Guard, c *ToolCall, tool Tool) (any, error) {
	if c.Now == nil {
		c.Now = time.Now
	}
	args := c.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if c.RequestKey != "" {
		// Before the grant is looked for: an effect template may render the key.
		ctx = latch.WithRequestKey(ctx, c.RequestKey)
	}
	res, err := attempt(ctx, g, c, args, tool)
	if c.ApprovalWait <= 0 && c.Interrupter == nil {
		return res, err
	}
	var we *Error
	if !errors.As(err, &we) || we.Code != CodeApprovalRequired || we.Data.ApprovalID == "" {
		return res, err
	}
	id := we.Data.ApprovalID
	r := &latch.Refusal{Kind: latch.KindApprovalRequired, Reason: latch.Reason(we.Data.Reason), ApprovalID: id,
		EffectKey: we.Data.EffectKey, ActionHash: we.Data.ActionHash, Detail: we.Data.Detail}
	if we.Data.ExpiresAt != nil {
		r.ExpiresAt = *we.Data.ExpiresAt
	}
	wctx, itr := ctx, c.Interrupter
	if c.ApprovalWait > 0 {
		a, rerr := g.Store().Approval(ctx, id)
		if rerr != nil {
			return nil, err // the refusal is the answer: the request stays stored
		}
		until := c.Now().Add(c.ApprovalWait)
		if a.ExpiresAt.Before(until) {
			until = a.ExpiresAt
		}
		if itr == nil {
			itr = &hold{g: g, c: c, until: until}
		} else {
			var cancel context.CancelFunc
			wctx, cancel = context.WithDeadline(ctx, until)
			defer cancel()
		}
	}
	ans, werr := itr.Interrupt(wctx, r)
	switch {
	case werr != nil && (errors.Is(werr, ErrWaitEnded) || wctx.Err() != nil):
		return nil, err // waited as long as allowed: the client re-sends later
	case werr != nil:
		return nil, NewError(CodeInternal, Refusal{Reason: "internal", Action: c.Action, ApprovalID: id, Detail: werr.Error()})
	case ans.Status == interrupt.Resume:
		// The call run again, unchanged, meets the answer: the guard finds the grant for its
		// exact action and spends it once.
		return attempt(ctx, g, c, args, tool)
	case ans.Status == interrupt.Denied || ans.Status == interrupt.Expired:
		// The call presents the answered request, and the guard refuses it by the request's
		// own status (approval_denied, approval_expired), writing the refusal's receipt.
		return attempt(latch.WithApproval(ctx, cmp.Or(ans.ApprovalID, id)), g, c, args, tool)
	}
	return nil, err // still waiting: the client re-sends later
}

// hold is the default wait of a held call: AwaitAnswer until the request is answered, expires or
// until passes (calling c.Held about once a second), then where the wait stands (interrupt.Check).
type hold struct {
	g     *latch.Guard
	c     *ToolCall
	until time.Time
}

func (h *hold) Interrupt(ctx context.Context, r *latch.Refusal) (interrupt.Answer, error) {
	var tick func()
	if h.c.Held != nil {
		next := time.Now()
		tick = func() {
			if !time.Now().Before(next) {
				h.c.Held(r.ApprovalID, h.until)
				next = time.Now().Add(time.Second)
			}
		}
		tick()
	}
	if err := AwaitAnswer(ctx, h.g.Store(), r.ApprovalID, h.until, h.c.Now, tick); err != nil {
		return interrupt.Answer{}, err
	}
	ans, err := interrupt.Check(ctx, h.g, r)
	if err != nil {
		return ans, err
	}
	if ans.Status == interrupt.Waiting {
		// AwaitAnswer ended on a request pending past its expiry by the guard's clock, which
		// Check does not read.
		a, rerr := h.g.Store().Approval(ctx, r.ApprovalID)
		if rerr == nil && a.Status == store.Pending && !h.c.Now().Before(a.ExpiresAt) {
			ans.Status = interrupt.Expired
		}
	}
	return ans, nil
}

// attempt decides and runs the call once, keyed or not.
func attempt(ctx context.Context, g *latch.Guard, c *ToolCall, args json.RawMessage, tool Tool) (any, error) {
	call := &latch.Call{Action: c.Action, Arguments: args}
	if c.RequestKey != "" {
		return keyed(ctx, g, c, call, tool)
	}
	var result any
	rc, err := g.Execute(ctx, call, func(ctx context.Context, a json.RawMessage) (any, error) {
		r, isError, err := tool(ctx, a)
		if err == nil && isError {
			err = errorResult(c, r)
		}
		if err != nil {
			return nil, err
		}
		result = r
		return r, nil
	})
	if err != nil {
		return nil, NewError(Map(c.Action, rc, err))
	}
	return result, nil
}

// errorResult is the error of a tool result that says isError: the call failed when the tool's
// errors mean it did not act, else its outcome is unknown.
func errorResult(c *ToolCall, r any) error {
	text := "(result not encodable)"
	if b, err := json.Marshal(r); err == nil {
		text = string(b)
	}
	err := fmt.Errorf("tool of %s returned an error result: %s", c.Action, text)
	if c.ErrorsMean == policy.ErrorsMeanNotExecuted {
		return latch.NotExecuted(err)
	}
	return err
}

// Bounds of how often a replayed keyed call asks again whether its first call has finished.
const (
	replayPollMin = 50 * time.Millisecond
	replayPollMax = time.Second
)

// keyed runs a call that carries a request key: begun with the key (Guard.Begin), so that the
// reservation is stored with it, run, and finished (Guard.Finish) — the same decisions,
// reservation, receipts and outcomes as Execute's. A replay (the same key, principal and
// arguments while the first call still holds the effect) never runs the tool: it asks again,
// at growing intervals, until the first call's outcome is recorded, and is then decided as any
// duplicate of the effect is.
func keyed(ctx context.Context, g *latch.Guard, c *ToolCall, call *latch.Call, tool Tool) (any, error) {
	poll := replayPollMin
	for {
		p, err := g.Begin(ctx, call)
		if err != nil {
			return nil, NewError(Map(c.Action, nil, err))
		}
		if !p.Replayed {
			return runBegun(ctx, g, c, p, tool)
		}
		wait := time.NewTimer(poll)
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return nil, NewError(CodeInternal, Refusal{Reason: "internal", Action: c.Action, ActionID: p.ActionID,
				Detail: fmt.Sprintf("the replayed call was abandoned while its first call was still running: %v", context.Cause(ctx))})
		}
		poll = min(2*poll, replayPollMax)
	}
}

// runBegun runs the tool for the call p began and records its outcome with Guard.Finish, as
// Execute would record it. The outcome is recorded whatever becomes of the client's request.
func runBegun(ctx context.Context, g *latch.Guard, c *ToolCall, p *latch.Pending, tool Tool) (any, error) {
	fctx := context.WithoutCancel(ctx)
	cctx := ctx
	if !p.LeaseExpiresAt.IsZero() {
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadlineCause(ctx, p.LeaseExpiresAt, errors.New("the lease on the effect key lapsed"))
		defer cancel()
	}
	r, isError, err := tool(cctx, p.Arguments)
	if err == nil && isError {
		err = errorResult(c, r)
	}
	if err != nil {
		outcome := latch.OutcomeUnknown
		if errors.Is(err, latch.ErrNotExecuted) {
			outcome = latch.OutcomeNotExecuted
		}
		rc, ferr := g.Finish(fctx, p.ActionID, outcome, nil, err.Error())
		if ferr == nil {
			ferr = err
		}
		return nil, NewError(Map(c.Action, rc, ferr))
	}
	stored, merr := json.Marshal(r)
	if merr != nil {
		rc, ferr := g.Finish(fctx, p.ActionID, latch.OutcomeUnknown, nil, "the result could not be encoded: "+merr.Error())
		if ferr == nil {
			ferr = merr
		}
		return nil, NewError(Map(c.Action, rc, ferr))
	}
	rc, ferr := g.Finish(fctx, p.ActionID, latch.OutcomeCommitted, stored, "")
	if ferr != nil {
		return nil, NewError(Map(c.Action, rc, ferr))
	}
	return r, nil
}
