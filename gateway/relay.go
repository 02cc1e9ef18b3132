package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch"
)

// An upstream may need its client's input in the middle of a tool call (MCP elicitation:
// "which account?"): it answers the call with input requests and an opaque state, and the
// client calls again with its responses and that state. The gateway is that client; the one who
// can answer is the agent's client behind it. The gateway relays the question through a
// suspension round of the call (latch.Suspend): the effect stays executing under the same
// attempt, its lease extended; the agent is answered the upstream's input requests with a state
// of the gateway's own, which carries the round's resume token; the agent's call with its
// responses resumes the round (latch.Guard.Resume: the exact token, the same principal, the
// same arguments, a live lease — once) and sends the responses, with the upstream's state, to
// the upstream. The store records the round (execution_suspended, then execution_resumed with
// the responses' ids and digest, never their values), the rounds count against the guard's
// bound, and the call keeps its one receipt.
//
// Only elicitation is relayed, to an agent's client that supports it, on calls without a
// request key; any other input request is an unknown outcome, as any answer the gateway cannot
// use.

// relayStatePrefix starts the request state the gateway gives an agent for a suspended call.
const relayStatePrefix = "latch-resume:"

// relayRequest is what a relayed round asks for, kept with the suspension: the upstream's input
// requests and its state.
type relayRequest struct {
	InputRequests mcp.InputRequestMap `json:"input_requests"`
	RequestState  string              `json:"request_state,omitempty"`
}

type relayKey struct{}

// relayCtx is what an upstream call's context says of relaying: the agent's session that may be
// asked, and the responses and state of a resumed round.
type relayCtx struct {
	down      *mcp.ServerSession
	responses mcp.InputResponseMap
	state     string
}

// withRelay returns ctx letting the upstream call it makes relay input requests to the agent's
// session down.
func withRelay(ctx context.Context, down *mcp.ServerSession) context.Context {
	return context.WithValue(ctx, relayKey{}, &relayCtx{down: down})
}

// retryParams fills the upstream call p with the responses and state of a resumed round.
func retryParams(ctx context.Context, p *mcp.CallToolParams) {
	if rc, ok := ctx.Value(relayKey{}).(*relayCtx); ok {
		p.InputResponses, p.RequestState = rc.responses, rc.state
	}
}

// relayInput is what an upstream's input-required answer r makes of the call: a suspension
// round asking what the upstream asked, when ctx may relay it to an agent that can answer;
// otherwise an error, the outcome unknown.
func relayInput(ctx context.Context, r *mcp.CallToolResult) error {
	rc, _ := ctx.Value(relayKey{}).(*relayCtx)
	switch {
	case rc == nil || rc.down == nil:
		return errors.New("the upstream asked for input, which the gateway relays only on calls without a request key")
	case len(r.InputRequests) == 0:
		return errors.New("the upstream asked for input and named none")
	}
	for id, ir := range r.InputRequests {
		if _, ok := ir.(*mcp.ElicitParams); !ok {
			return fmt.Errorf("the upstream asked for input %q of a kind the gateway does not relay (%T): only elicitation is", id, ir)
		}
	}
	if ip := rc.down.InitializeParams(); ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return errors.New("the upstream asked for input, and the agent's client does not support elicitation")
	}
	b, err := json.Marshal(relayRequest{InputRequests: r.InputRequests, RequestState: r.RequestState})
	if err != nil {
		return fmt.Errorf("the upstream's input requests do not encode: %w", err)
	}
	return latch.Suspend(json.RawMessage(b))
}

// relayAnswer is the agent's answer for a call whose round suspended (err a
// *latch.SuspendedError): the upstream's input requests, with the gateway's state; nil for
// any other error.
func relayAnswer(err error) *mcp.CallToolResult {
	var s *latch.SuspendedError
	if !errors.As(err, &s) {
		return nil
	}
	var rr relayRequest
	if json.Unmarshal(s.Request, &rr) != nil {
		return nil
	}
	return &mcp.CallToolResult{InputRequests: rr.InputRequests, RequestState: relayStatePrefix + s.ActionID + ":" + s.Token}
}

// relayed reports whether the agent's call carries the gateway's state of a suspended call.
func relayed(req *mcp.CallToolRequest) bool {
	return strings.HasPrefix(req.Params.RequestState, relayStatePrefix)
}

// resumeRelayed answers an agent's call that carries its responses to a relayed round: it
// resumes the suspended call (which refuses anything but its exact token, principal and
// arguments) and sends the responses, with the upstream's state, to the upstream.
func (g *Gateway) resumeRelayed(ctx context.Context, up *upstream, t *Tool, args json.RawMessage, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	actionID, token, _ := strings.Cut(strings.TrimPrefix(req.Params.RequestState, relayStatePrefix), ":")
	input := make(map[string]json.RawMessage, len(req.Params.InputResponses))
	for id, r := range req.Params.InputResponses {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, wireError(refusal(t.Action, nil, &latch.InvalidArgumentError{Reason: string(latch.ReasonInvalidArgument),
				Pointer: "/inputResponses/" + id, Err: err}))
		}
		input[id] = b
	}
	var result *mcp.CallToolResult
	rc, err := g.cfg.Guard.Resume(ctx, &latch.ResumeRequest{ActionID: actionID, Token: token, Arguments: args, Input: input},
		func(ctx context.Context, a json.RawMessage) (any, error) {
			var rr relayRequest
			if r := latch.ResumedFrom(ctx); r == nil || json.Unmarshal(r.Request, &rr) != nil {
				return nil, errors.New("the suspended call holds no relayed request")
			}
			ctx, cancel, err := g.deadline(ctx)
			if err != nil {
				return nil, err
			}
			defer cancel()
			ctx = context.WithValue(ctx, relayKey{}, &relayCtx{down: req.Session, responses: req.Params.InputResponses, state: rr.RequestState})
			r, err := up.call(ctx, t, a, time.Now())
			if err != nil {
				return nil, err
			}
			result = r
			return r, nil
		})
	if ir := relayAnswer(err); ir != nil {
		return ir, nil // the upstream asked again: another round
	}
	if err != nil {
		return nil, wireError(refusal(t.Action, rc, err))
	}
	return result, nil
}
