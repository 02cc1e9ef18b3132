package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/mcpwire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MetaRequestKey is the _meta key of a tools/call carrying the agent's own request key: a
// string it chose for this one call (a UUID, say) and sends again unchanged when it retries the
// call because the answer was lost (mcpwire.MetaRequestKey). It is the call's request key
// (latch.WithRequestKey), with the replay semantics of the Idempotency-Key header of
// POST /v1/actions (docs/gateway.md#request-keys).
const MetaRequestKey = mcpwire.MetaRequestKey

// requestKeyOf is the request key a tool call carries in _meta, "" when none. A value that is
// not a string, or not a request key (store.CheckRequestKey), is an invalid_argument, refused
// before anything is decided, written or sent.
func requestKeyOf(req *mcp.CallToolRequest) (string, error) {
	if req.Params == nil {
		return "", nil
	}
	return mcpwire.RequestKey(req.Params.Meta)
}

// keyedRun is a keyed call this process is sending upstream: a replay of it that reaches this
// process waits for its answer rather than send it again.
type keyedRun struct {
	done   chan struct{}
	result *mcp.CallToolResult
	err    error
}

// keyedRuns are the keyed calls of a gateway in flight, by action id.
type keyedRuns struct {
	mu sync.Mutex
	m  map[string]*keyedRun
}

func (k *keyedRuns) start(actionID string) *keyedRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]*keyedRun{}
	}
	r := &keyedRun{done: make(chan struct{})}
	k.m[actionID] = r
	return r
}

func (k *keyedRuns) get(actionID string) *keyedRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.m[actionID]
}

func (k *keyedRuns) end(actionID string, r *keyedRun, result *mcp.CallToolResult, err error) {
	r.result, r.err = result, err
	close(r.done)
	k.mu.Lock()
	delete(k.m, actionID)
	k.mu.Unlock()
}

// replayPoll bounds how often a replay of a call held elsewhere asks again.
const (
	replayPollMin = 50 * time.Millisecond
	replayPollMax = time.Second
)

// keyedCall runs a tool call that carries a request key. It begins the call with the key
// (Guard.Begin), so that the reservation is stored with it, sends it upstream and finishes it:
// the same decisions, reservation, receipts and outcomes as the unkeyed path's Guard.Execute.
//
// A retried call under the same key, by the same principal with the same arguments, is handed
// the reservation of the first while that still holds the effect (a replay); the upstream is
// never called for a replay. If the first call runs in this process, the replay waits for it and
// answers what it answers. If it runs elsewhere (another gateway process sharing the store, or
// one that was restarted), the replay asks again, at growing intervals, until the first
// call's reservation no longer holds: its outcome recorded, the call is decided as any duplicate
// of the effect is — refused committed with the stored result, refused ambiguous, or, after a
// failure, a new attempt — and a lease that lapsed is ambiguous. Another principal's call, or
// another call, under the key is refused request_key_mismatch, and nothing is written.
func (g *Gateway) keyedCall(ctx context.Context, t *Tool, args json.RawMessage) (*mcp.CallToolResult, error) {
	call := &latch.Call{Action: t.Action, Arguments: args}
	poll := replayPollMin
	for {
		p, err := g.cfg.Guard.Begin(ctx, call)
		if err != nil {
			return nil, wireError(refusal(t.Action, nil, err))
		}
		if !p.Replayed {
			return g.runKeyed(ctx, t, p)
		}
		if r := g.keyed.get(p.ActionID); r != nil {
			select {
			case <-r.done:
				return r.result, r.err
			case <-ctx.Done():
				return nil, wireError(CodeInternal, Refusal{Reason: "internal", Action: t.Action, ActionID: p.ActionID,
					Detail: fmt.Sprintf("the replayed call was abandoned while its first call was still running: %v", context.Cause(ctx))})
			}
		}
		wait := time.NewTimer(poll)
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return nil, wireError(CodeInternal, Refusal{Reason: "internal", Action: t.Action, ActionID: p.ActionID,
				Detail: fmt.Sprintf("the replayed call was abandoned while its first call was still running elsewhere: %v", context.Cause(ctx))})
		}
		poll = min(2*poll, replayPollMax)
	}
}

// runKeyed sends the call p began upstream and records its outcome with Guard.Finish, as
// Execute would record it; a replay in this process meanwhile waits for its answer.
func (g *Gateway) runKeyed(ctx context.Context, t *Tool, p *latch.Pending) (res *mcp.CallToolResult, err error) {
	run := g.keyed.start(p.ActionID)
	defer func() { g.keyed.end(p.ActionID, run, res, err) }()
	up := g.upstreams[t.Upstream]
	d := g.cfg.CallTimeout
	if !p.LeaseExpiresAt.IsZero() {
		left := p.LeaseExpiresAt.Sub(g.cfg.Now())
		left -= min(left/10, leaseMargin)
		d = min(d, left)
	}
	// The outcome is recorded whatever becomes of the agent's request.
	fctx := context.WithoutCancel(ctx)
	if d <= 0 {
		rc, ferr := g.cfg.Guard.Finish(fctx, p.ActionID, latch.OutcomeNotExecuted, nil, "the lease on the effect key lapsed before the call was sent")
		return nil, wireError(refusal(t.Action, rc, ferr))
	}
	cctx, cancel := context.WithTimeoutCause(ctx, d, fmt.Errorf("no answer within %v, the call's deadline", d))
	r, cerr := up.call(cctx, t, p.Arguments, time.Now())
	cancel()
	if cerr != nil {
		outcome := latch.OutcomeUnknown
		if errors.Is(cerr, latch.ErrNotExecuted) {
			outcome = latch.OutcomeNotExecuted
		}
		rc, ferr := g.cfg.Guard.Finish(fctx, p.ActionID, outcome, nil, cerr.Error())
		if ferr == nil {
			ferr = cerr
		}
		return nil, wireError(refusal(t.Action, rc, ferr))
	}
	var big *answerInfo
	if a, ok := g.tooLarge(r); ok {
		g.cfg.Logger.Warn("latch gateway: an answer too large to keep: the call is committed with a marker in its place",
			"action", t.Action, "bytes", a.Bytes, "limit", a.Limit, "sha256", a.SHA256)
		big, r = &a, answerMarker(a)
	}
	stored, merr := json.Marshal(r)
	if merr != nil {
		rc, ferr := g.cfg.Guard.Finish(fctx, p.ActionID, latch.OutcomeUnknown, nil, "the answer could not be encoded: "+merr.Error())
		if ferr == nil {
			ferr = merr
		}
		return nil, wireError(refusal(t.Action, rc, ferr))
	}
	rc, ferr := g.cfg.Guard.Finish(fctx, p.ActionID, latch.OutcomeCommitted, stored, "")
	if ferr != nil {
		return nil, wireError(refusal(t.Action, rc, ferr))
	}
	if big != nil {
		return nil, wireError(tooLargeRefusal(t.Action, rc, r, *big))
	}
	return r, nil
}
