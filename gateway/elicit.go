package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Holding a call open for its approval.
//
// A tools/call the policy sends to a person is answered approval_required, and the agent
// re-sends it once the request is granted (the guard finds the grant by the action hash). An agent whose MCP client declared the
// elicitation capability is spared the round trip. The call is answered with an input request
// (MCP's multi round-trip form: an elicitation of form mode carrying what is asked, the exact
// arguments and their display form, who may approve, the expiry and where to answer, and the
// request's id in the call's requestState); the client shows it to its user and, in the same
// tools/call from its side, sends the call again with the user's answer. "Accept" means wait:
// the gateway keeps that call open until an approver answers on one of latch's own surfaces —
// the console, `latch approve`/`latch deny`, the operator MCP server — or the request expires,
// or Config.ApprovalWait passes, sending progress notifications meanwhile when the call carries a
// progress token. Granted, the call runs there and then, exactly once, and its result is the
// call's answer; denied or expired, the answer is the refusal the re-sent call would have
// received (approval_denied, approval_expired); the wait bounded, it is approval_required.
// A client of an older protocol revision is asked the same question by the SDK with an
// elicitation/create request, and the answer reaches the handler the same way.
//
// The elicitation's answer is never an approval: the client that answers it is the agent's,
// and an agent must not approve its own call. Accepting only waits; declining or cancelling
// ends the call with today's approval_required answer, so the agent may re-send later as
// without elicitation. The request state is the agent's to echo and so the agent's to forge: the
// gateway waits on the named request only if it is bound to this very call's action hash (the
// same tool, arguments, principal and environment), and a request it cannot use that way makes
// the call a new one.

// Defaults of Config.ApprovalWait and Config.ProgressEvery.
const (
	DefaultApprovalWait  = 10 * time.Minute
	DefaultProgressEvery = 15 * time.Second
)

// MetaApproval is the _meta key of the elicitation a held call sends: the request as every
// operator surface shows it (ApprovalAsk), for a client that renders it itself.
const MetaApproval = "latch/approval"

// ApprovalAsk is the _meta[MetaApproval] of an elicitation: what a person is asked to approve and
// how long the call would wait for it.
type ApprovalAsk struct {
	// Approval is the stored request as `latch approvals --json`, GET /v1/approvals/{id} and the
	// operator MCP show it: its action, exact canonical arguments, their display form, the
	// principal, the expiry and how many grants it needs.
	Approval jsonview.Approval `json:"approval"`
	// Roles are the approver roles whose members may answer (empty: anyone but the requesting
	// principal); Verified says only verified answers count.
	Roles    []string `json:"roles"`
	Verified bool     `json:"verified"`
	// AnswerURL is the request's page in the console (Config.ConsoleURL), "" without one.
	AnswerURL string `json:"answer_url,omitempty"`
	// WaitsUntil is the latest the call would wait, if the user accepts now (RFC 3339, as the
	// expiry): the sooner of the request's expiry and Config.ApprovalWait from now.
	WaitsUntil string `json:"waits_until"`
}

// elicitID is the id of the gateway's one input request in a call's input requests and
// responses; statePrefix begins the request state naming the request the call waits for.
const (
	elicitID    = "latch_approval"
	statePrefix = "latch-approval/v1:"
)

// elicitSchema is the form of the elicitation: no fields. Accepting it waits; what the user
// sends back is not an approval, so nothing is asked of them.
var elicitSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// elicits reports whether the agent's client takes form elicitations.
func (g *Gateway) elicits(req *mcp.CallToolRequest) bool {
	if g.cfg.ApprovalWait <= 0 || req.Session == nil {
		return false
	}
	ip := req.Session.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return false
	}
	c := ip.Capabilities.Elicitation
	return c.Form != nil || c.URL == nil // neither named is form
}

// pendingApproval is the request a call refused with err waits for: "" unless err is an
// approval_required refusal.
func pendingApproval(err error) string {
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != CodeApprovalRequired {
		return ""
	}
	var r Refusal
	if json.Unmarshal(we.Data, &r) != nil {
		return ""
	}
	return r.ApprovalID
}

// askToWait answers a call refused approval_required (err) with the elicitation of its request,
// when the agent's client takes one; ok is false when it does not, and err is then the answer.
func (g *Gateway) askToWait(ctx context.Context, req *mcp.CallToolRequest, err error) (_ *mcp.CallToolResult, ok bool) {
	id := pendingApproval(err)
	if id == "" || !g.elicits(req) {
		return nil, false
	}
	a, rerr := g.cfg.Guard.Store().Approval(ctx, id)
	if rerr != nil {
		return nil, false // the refusal is the answer: the request stays stored
	}
	ask := g.ask(a, g.waitUntil(a))
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{elicitID: &mcp.ElicitParams{Mode: "form", Message: elicitMessage(ask),
			RequestedSchema: elicitSchema, Meta: mcp.Meta{MetaApproval: ask}}},
		RequestState: statePrefix + id,
	}, true
}

// waitUntil is the latest a call would wait for request a from now.
func (g *Gateway) waitUntil(a *store.Approval) time.Time {
	until := g.cfg.Now().Add(g.cfg.ApprovalWait)
	if a.ExpiresAt.Before(until) {
		return a.ExpiresAt
	}
	return until
}

// heldRequest is the approval request a call sent again with its user's answer may wait for:
// the one its request state names, if it is bound to this call's action hash or was requested
// with it (an approver edited it since). nil otherwise: the call is decided as a new one.
func (g *Gateway) heldRequest(ctx context.Context, req *mcp.CallToolRequest, t *Tool, args json.RawMessage) (*store.Approval, error) {
	if req.Params == nil || !strings.HasPrefix(req.Params.RequestState, statePrefix) || !g.elicits(req) {
		return nil, nil // holding off, or a client that was never asked: decided as a new call
	}
	id := strings.TrimPrefix(req.Params.RequestState, statePrefix)
	a, err := g.cfg.Guard.Store().Approval(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read approval request %s: %w", safetext.Quote(id), err)
	}
	ev, err := g.cfg.Guard.Evaluate(ctx, &latch.Call{Action: t.Action, Arguments: args})
	if err != nil {
		return nil, nil
	}
	if ev.ActionHash == a.ActionHash {
		return a, nil
	}
	// An approver may have edited the request before the call came back: it then binds the
	// edited hash, and the call is the one it was requested with (its first edit's From).
	evs, err := g.cfg.Guard.Store().Events(ctx, store.EventFilter{ApprovalID: a.ID})
	if err != nil {
		return nil, fmt.Errorf("read approval request %s: events: %w", safetext.Quote(id), err)
	}
	if edits, err := store.EditsOf(evs); err == nil && len(edits) > 0 && edits[0].From == ev.ActionHash {
		return a, nil
	}
	return nil, nil
}

// answered is the user's answer to the elicitation a call sends back: accepted (wait), or not.
func answered(req *mcp.CallToolRequest) bool {
	r, ok := req.Params.InputResponses[elicitID].(*mcp.ElicitResult)
	return ok && r != nil && r.Action == "accept"
}

// holdOpen answers a call sent again with its user's answer to the elicitation of request a.
// Declined or cancelled: approval_required, as without elicitation. Accepted: the call waits
// until the request is answered or expires, or the wait ends (approval_required), and then run
// makes the call presenting the request: granted, it runs; denied or expired, it is refused with
// the reason.
func (g *Gateway) holdOpen(ctx context.Context, req *mcp.CallToolRequest, t *Tool, a *store.Approval,
	run func(context.Context) (*mcp.CallToolResult, error)) (*mcp.CallToolResult, error) {
	pending := wireError(refusal(t.Action, nil, &latch.ApprovalRequiredError{ApprovalID: a.ID, ActionHash: a.ActionHash, ExpiresAt: a.ExpiresAt}))
	if !answered(req) {
		return nil, pending
	}
	st := g.cfg.Guard.Store()
	until := g.waitUntil(a)
	g.cfg.Logger.Info("latch gateway: holding a call open for its approval", "action", t.Action, "approval", a.ID,
		"until", until.UTC().Format(time.RFC3339))
	progress := req.Params.GetProgressToken()
	nextProgress, sent := time.Now().Add(g.cfg.ProgressEvery), 0
	delay := 20 * time.Millisecond
	for {
		cur, err := st.Approval(ctx, a.ID)
		if err != nil {
			if ctx.Err() != nil {
				return nil, pending
			}
			return nil, wireError(CodeInternal, Refusal{Reason: "internal", Action: t.Action, ApprovalID: a.ID,
				Detail: fmt.Sprintf("read approval request %s while holding the call open: %v", a.ID, err)})
		}
		now := g.cfg.Now()
		if cur.Status != store.Pending || !now.Before(cur.ExpiresAt) {
			// Answered or expired: the call presents the request, and the reservation decides —
			// it spends a grant exactly once, and refuses a denied or expired request by its
			// reason, as it would refuse the agent's re-sent call.
			return run(latch.WithApproval(ctx, a.ID))
		}
		if !now.Before(until) {
			return nil, pending // waited as long as allowed: the agent re-sends later
		}
		if progress != nil && !time.Now().Before(nextProgress) {
			sent++
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: progress,
				Progress: float64(sent), Message: fmt.Sprintf("waiting for a person to answer approval request %s (until %s)",
					a.ID, until.UTC().Format(time.RFC3339))})
			nextProgress = time.Now().Add(g.cfg.ProgressEvery)
		}
		wait := min(delay, until.Sub(now))
		if progress != nil {
			wait = min(wait, time.Until(nextProgress))
		}
		timer := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, pending // the agent went away; the request stays stored
		case <-timer.C:
		}
		delay = min(delay*2, time.Second)
	}
}

// ask is what the elicitation of request a shows, waiting until until.
func (g *Gateway) ask(a *store.Approval, until time.Time) ApprovalAsk {
	pol := g.cfg.Guard.Policy()
	rule := pol.ApproversFor(a.ActionName)
	out := ApprovalAsk{Approval: jsonview.NewApproval(a, pol), Roles: append([]string{}, rule.Roles...), Verified: rule.Verified,
		WaitsUntil: *jsonview.Stamp(until)}
	if g.cfg.ConsoleURL != "" {
		out.AnswerURL = strings.TrimSuffix(g.cfg.ConsoleURL, "/") + "/approvals/" + url.PathEscape(a.ID)
	}
	return out
}

// elicitMessage is the text a client shows its user. Whatever the agent supplied (arguments,
// names) is escaped: it must not carry escape sequences or invisible characters to the reader.
func elicitMessage(ask ApprovalAsk) string {
	a := ask.Approval
	var b strings.Builder
	fmt.Fprintf(&b, "latch: %s needs a person's approval before it runs (request %s).\n",
		safetext.Escape(a.Action), safetext.Escape(a.ApprovalID))
	who := "the agent"
	if a.Principal.Agent != nil {
		who = "agent " + safetext.Escape(*a.Principal.Agent)
	}
	if a.Principal.User != nil {
		who += " for " + safetext.Escape(*a.Principal.User)
	}
	fmt.Fprintf(&b, "Asked by %s, with exactly these arguments: %s\n", who, safetext.Escape(string(a.Arguments)))
	for _, d := range a.Display {
		name := d.Name
		if d.Label != nil {
			name = *d.Label
		}
		v := d.Raw
		if d.Human != nil {
			v = *d.Human
		}
		fmt.Fprintf(&b, "  %s: %s\n", safetext.Escape(name), safetext.Escape(v))
	}
	switch {
	case len(ask.Roles) == 0:
		fmt.Fprintf(&b, "Who may approve: anyone but the requester; %d grant(s) needed", a.Required)
	default:
		fmt.Fprintf(&b, "Who may approve: members of %s; %d grant(s) needed", strings.Join(ask.Roles, ", "), a.Required)
	}
	if ask.Verified {
		b.WriteString(", verified answers only")
	}
	b.WriteString(".\n")
	if a.ExpiresAt != nil {
		fmt.Fprintf(&b, "The request expires at %s; accepted, this call waits for the answer until %s.\n", *a.ExpiresAt, ask.WaitsUntil)
	}
	if ask.AnswerURL != "" {
		fmt.Fprintf(&b, "Answer it in the latch console: %s — or with `latch approve %s` / `latch deny %s`.\n", ask.AnswerURL, a.ApprovalID, a.ApprovalID)
	} else {
		fmt.Fprintf(&b, "Answer it with `latch approve %s` / `latch deny %s`, in the latch console, or through the operator MCP server.\n", a.ApprovalID, a.ApprovalID)
	}
	b.WriteString("Your answer here is not an approval: accept to wait for an approver's answer, decline to stop waiting.")
	return b.String()
}

// checkConsoleURL refuses a Config.ConsoleURL that is not an absolute http or https URL.
func checkConsoleURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("gateway: new: Config.ConsoleURL %q is not an absolute http(s) URL without a query", s)
	}
	return nil
}
