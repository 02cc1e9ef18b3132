// Package mcpop is the operator's side of latch as an MCP server: the tools a person (or the
// assistant they direct) needs when latch refuses something — list and show approval requests
// with the exact arguments, approve or deny them, list the effects that need attention, resolve
// one, inspect anything by id, and verify the receipt chain.
//
// Who answers is never a tool argument. Over streamable HTTP (Handler) it is the credential of
// the session: an approver token of `latch token create --approver NAME`, or a JWT the
// configured identity provider verifies as a person's (it carries an approver mark; an agent's
// JWT is refused); its answers are verified (method token or jwt). A session
// without a credential (stdio) answers as Config.Approver, a name given when the server was
// started, recorded as the command line's answers are: method cli, not verified (a policy that
// requires verified approvers refuses them). docs/gateway.md describes the tools.
package mcpop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	latchauth "github.com/latchkit/latch/auth"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the implementation version the server announces.
const Version = "0.1.0"

// Config configures an Operator. Guard is required.
type Config struct {
	// Guard's store is what the tools read and answer; its policy's display hints show
	// arguments as a person reads them. The guard runs no action.
	Guard *latch.Guard
	// Approver is who answers in sessions without a credential of their own (stdio). It is
	// recorded as the approver with method cli, not verified, as `latch approve --as` is. ""
	// refuses answers and resolutions in such sessions; the read tools still work.
	Approver string
	// Now is the clock of "needs attention" (a lapsed lease); nil is time.Now.
	Now func() time.Time
}

// Operator serves the operator tools.
type Operator struct {
	cfg Config
}

// New returns an Operator.
func New(cfg *Config) (*Operator, error) {
	if cfg == nil || cfg.Guard == nil {
		return nil, errors.New("mcpop: new: Config.Guard is required")
	}
	o := &Operator{cfg: *cfg}
	if o.cfg.Now == nil {
		o.cfg.Now = time.Now
	}
	if o.cfg.Approver != "" {
		if err := store.CheckApprover(o.cfg.Approver); err != nil {
			return nil, fmt.Errorf("mcpop: new: approver: %w", err)
		}
	}
	return o, nil
}

// identityKey is the TokenInfo.Extra key of the approver a session's credential names.
const identityKey = "latch.approver"

// who is the identity answering in a session: its name, how it was established, and whether
// anything verified it.
type who struct {
	name     string
	method   string // store.MethodToken, MethodJWT or MethodCLI
	via      string // "approver token tok_…", "JWT", "stdio"
	verified bool
}

func (o *Operator) who(req *mcp.CallToolRequest) (who, error) {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if w, ok := req.Extra.TokenInfo.Extra[identityKey].(who); ok && w.name != "" {
			return w, nil
		}
		return who{}, errors.New("unauthenticated: the session's credential names no approver")
	}
	if o.cfg.Approver == "" {
		return who{}, errors.New("unauthenticated: this session has no credential and the server was started with no approver name (--as): it can read but not answer")
	}
	return who{name: o.cfg.Approver, method: store.MethodCLI, via: "stdio", verified: false}, nil
}

// note is a resolution's note: the person's own, after a mark when nothing verified who they
// are (a resolution keeps no method of its own; an answer does).
func (w who) note(own string) string {
	if w.verified {
		return own
	}
	mark := fmt.Sprintf("[unverified: %s named when mcp-operator started on %s]", w.name, w.via)
	if own == "" {
		return mark
	}
	return mark + " " + own
}

// resolvedBy is the resolved_by of a resolution made in the session.
func (w who) resolvedBy() string {
	if w.verified {
		return "mcp:" + w.name
	}
	return "mcp-" + w.via + ":" + w.name
}

// Server returns the MCP server with the operator tools. Serve it over any transport:
// mcp.StdioTransport, or streamable HTTP (see Handler).
func (o *Operator) Server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "latch-operator", Version: Version}, nil)
	read := &mcp.ToolAnnotations{ReadOnlyHint: true}
	write := func() *mcp.ToolAnnotations {
		f := false
		return &mcp.ToolAnnotations{DestructiveHint: &f}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "list_approvals", Annotations: read,
		Description: "List approval requests (default: pending) with the exact arguments each is bound to."}, o.listApprovals)
	mcp.AddTool(s, &mcp.Tool{Name: "show_approval", Annotations: read,
		Description: "Show one approval request: the action, its exact arguments as a person reads them, who asked, the hash it is bound to, its status and expiry."}, o.showApproval)
	mcp.AddTool(s, &mcp.Tool{Name: "approve", Annotations: write(),
		Description: "Grant a pending approval request as this session's approver. The grant is single use, expires, and matches only the exact action shown."}, o.answer(true))
	mcp.AddTool(s, &mcp.Tool{Name: "deny", Annotations: write(),
		Description: "Deny a pending approval request as this session's approver."}, o.answer(false))
	mcp.AddTool(s, &mcp.Tool{Name: "list_effects", Annotations: read,
		Description: "List effects that need a person (default): ambiguous ones and executing ones whose lease lapsed; or all effects in one state."}, o.listEffects)
	mcp.AddTool(s, &mcp.Tool{Name: "resolve", Annotations: write(),
		Description: "Resolve an ambiguous effect as committed (it happened; optionally with its result) or failed (it did not; a retry may run), as this session's approver."}, o.resolve)
	mcp.AddTool(s, &mcp.Tool{Name: "inspect", Annotations: read,
		Description: "Everything about an action id (act_…), an approval id (apr_…) or an effect key: the record, the timeline of events and the receipts."}, o.inspect)
	mcp.AddTool(s, &mcp.Tool{Name: "verify_receipts", Annotations: read,
		Description: "Verify the hash chain of receipts: ok, how many were verified, and each break with its seq."}, o.verify)
	return s
}

// Handler serves the operator over streamable HTTP. Every request must carry a credential a
// authenticates as a person: an approver token (Authorization: Bearer latch_…), or — when
// a.Identity tells people from agents (latchauth.PeopleProvider: identity.Config's approver
// marks) — a person's JWT. An agent's credential, token or JWT, is refused 401: agents ask,
// people answer.
func (o *Operator) Handler(a *latchauth.Authenticator) http.Handler {
	srv := o.Server()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	verify := func(ctx context.Context, cred string, _ *http.Request) (*auth.TokenInfo, error) {
		c, err := a.Authenticate(ctx, cred)
		if err != nil {
			var ae *latchauth.AuthError
			if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
				return nil, fmt.Errorf("%w: %s (%s)", auth.ErrInvalidToken, ae.Detail, ae.Reason)
			}
			return nil, fmt.Errorf("mcpop: authenticate: %w", err)
		}
		var w who
		switch {
		case c.Kind != store.TokenApprover && c.TokenID != "":
			return nil, fmt.Errorf("%w: token %s is an agent token: the operator tools need a person's credential", auth.ErrInvalidToken, c.TokenID)
		case c.Kind != store.TokenApprover:
			return nil, fmt.Errorf("%w: the JWT is an agent's (it carries no approver mark): the operator tools need a person's credential", auth.ErrInvalidToken)
		case c.Method == store.MethodJWT:
			w = who{name: c.Approver, method: store.MethodJWT, via: "JWT", verified: true}
		default:
			w = who{name: c.Approver, method: store.MethodToken, via: "approver token " + c.TokenID, verified: true}
		}
		user := c.TokenID
		if user == "" {
			user = fmt.Sprintf("jwt %q", c.Approver)
		}
		return &auth.TokenInfo{UserID: user, Expiration: c.ExpiresAt, Extra: map[string]any{identityKey: w}}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}

// Approval is an approval request as the tools show it; the fields are those of
// `latch approvals --json`, with display. It is a type of its own rather than the CLI's and the
// API's shape because the tools' output schema is derived from it and already published: absent
// values are omitted here where those print null, display lists every argument (not only the
// hinted ones), and the request's own note is kept.
type Approval struct {
	ApprovalID string         `json:"approval_id"`
	Status     string         `json:"status"`
	Action     string         `json:"action"`
	ActionHash string         `json:"action_hash"`
	Arguments  any            `json:"arguments"`
	Display    []DisplayedArg `json:"display,omitempty"`
	Principal  Principal      `json:"principal"`
	Resource   string         `json:"resource,omitempty"`
	CreatedAt  string         `json:"created_at"`
	ExpiresAt  string         `json:"expires_at"`
	Approver   string         `json:"approver,omitempty"`
	Note       string         `json:"note,omitempty"`
	// PreviousDenied is the request for the same action denied before this one was asked, and
	// PreviousDeniedBy who denied it: the person answering sees the agent asked again.
	PreviousDenied   string `json:"previous_denied,omitempty"`
	PreviousDeniedBy string `json:"previous_denied_by,omitempty"`
	// Answers are the answers given so far, oldest first; Required is how many distinct grants
	// the request needs and Grants how many it has (docs/approvals.md).
	Answers  []Answer `json:"answers"`
	Required int      `json:"required"`
	Grants   int      `json:"grants"`
}

// Answer is one person's answer to an approval request.
type Answer struct {
	Approver   string `json:"approver"`
	Method     string `json:"method"` // cli, token, jwt, session or proxy
	Verified   bool   `json:"verified"`
	Grant      bool   `json:"grant"`
	Note       string `json:"note,omitempty"`
	AnsweredAt string `json:"answered_at"`
}

// DisplayedArg is one argument read through the policy's display hints.
type DisplayedArg struct {
	Name  string `json:"name"`
	Label string `json:"label,omitempty"`
	Raw   string `json:"raw"`             // canonical JSON, exactly as hashed
	Human string `json:"human,omitempty"` // as a person reads it ("€2,500.00 (250000 minor units)")
}

// Principal is who asked.
type Principal struct {
	Agent string `json:"agent"`
	User  string `json:"user,omitempty"`
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(receipt.TimeFormat)
}

func (o *Operator) approvalOf(a *store.Approval) Approval {
	var d struct {
		Arguments json.RawMessage `json:"arguments"`
		Resource  string          `json:"resource"`
	}
	_ = json.Unmarshal(a.Action, &d) // a document the store could not read shows no arguments
	out := Approval{ApprovalID: a.ID, Status: string(a.Status), Action: a.ActionName, ActionHash: a.ActionHash,
		Principal: Principal{Agent: a.Agent, User: a.User}, Resource: d.Resource,
		CreatedAt: stamp(a.CreatedAt), ExpiresAt: stamp(a.ExpiresAt), Approver: a.Approver, Note: a.Note,
		PreviousDenied: a.PreviousDenied, PreviousDeniedBy: a.PreviousDeniedBy}
	_ = json.Unmarshal(d.Arguments, &out.Arguments)
	// The count as `latch approvals --json` and latch serve give it (package jsonview).
	n, verified := jsonview.Required(o.cfg.Guard.Policy(), a)
	out.Required, out.Grants = n, store.Grants(a.Answers, verified)
	out.Answers = make([]Answer, len(a.Answers))
	for i, x := range a.Answers {
		out.Answers[i] = Answer{Approver: x.Name, Method: x.Method, Verified: x.Verified, Grant: x.Grant, Note: x.Note, AnsweredAt: stamp(x.At)}
	}
	// The policy reads the arguments as canonical values, exactly as they were hashed.
	if v, err := canon.Parse(d.Arguments); err == nil {
		if args, ok := v.(map[string]any); ok {
			for _, av := range o.cfg.Guard.Policy().View(a.ActionName, args) {
				out.Display = append(out.Display, DisplayedArg{Name: av.Name, Label: av.Label, Raw: av.Raw, Human: av.Human})
			}
		}
	}
	return out
}

// ListApprovalsArgs are the arguments of list_approvals.
type ListApprovalsArgs struct {
	Status string `json:"status,omitempty" jsonschema:"pending (default), granted, denied, expired, consumed, or all"`
}

// Approvals is the result of list_approvals.
type Approvals struct {
	Approvals []Approval `json:"approvals"`
}

var approvalStatuses = map[string]bool{"pending": true, "granted": true, "denied": true, "expired": true, "consumed": true, "all": true}

func (o *Operator) listApprovals(ctx context.Context, _ *mcp.CallToolRequest, in ListApprovalsArgs) (*mcp.CallToolResult, Approvals, error) {
	status := in.Status
	if status == "" {
		status = "pending"
	}
	if !approvalStatuses[status] {
		return nil, Approvals{}, fmt.Errorf("invalid_argument: status %q is not one of pending, granted, denied, expired, consumed, all", in.Status)
	}
	f := store.ApprovalFilter{Status: store.ApprovalStatus(status)}
	if status == "all" {
		f = store.ApprovalFilter{}
	}
	list, err := o.cfg.Guard.Store().Approvals(ctx, f)
	if err != nil {
		return nil, Approvals{}, fmt.Errorf("internal: list approvals: %w", err)
	}
	out := Approvals{Approvals: []Approval{}}
	for _, a := range list {
		out.Approvals = append(out.Approvals, o.approvalOf(a))
	}
	return nil, out, nil
}

// ApprovalArgs name one approval request.
type ApprovalArgs struct {
	ApprovalID string `json:"approval_id" jsonschema:"the request's id, apr_…"`
}

func (o *Operator) showApproval(ctx context.Context, _ *mcp.CallToolRequest, in ApprovalArgs) (*mcp.CallToolResult, Approval, error) {
	a, err := o.cfg.Guard.Store().Approval(ctx, in.ApprovalID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, Approval{}, fmt.Errorf("approval_not_found: no approval request %q", in.ApprovalID)
	case err != nil:
		return nil, Approval{}, fmt.Errorf("internal: read approval %s: %w", in.ApprovalID, err)
	}
	return nil, o.approvalOf(a), nil
}

// AnswerArgs are the arguments of approve and deny.
type AnswerArgs struct {
	ApprovalID string `json:"approval_id" jsonschema:"the request's id, apr_…"`
	Note       string `json:"note,omitempty" jsonschema:"kept with the answer"`
}

func (o *Operator) answer(grant bool) mcp.ToolHandlerFor[AnswerArgs, Approval] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in AnswerArgs) (*mcp.CallToolResult, Approval, error) {
		w, err := o.who(req)
		if err != nil {
			return nil, Approval{}, err
		}
		a, err := o.cfg.Guard.Answer(ctx, &store.AnswerRequest{ID: in.ApprovalID, Grant: grant, Approver: w.name,
			Method: w.method, Verified: w.verified, Note: in.Note})
		var ae *store.AnswerError
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, Approval{}, fmt.Errorf("approval_not_found: no approval request %q", in.ApprovalID)
		case errors.As(err, &ae):
			return nil, Approval{}, fmt.Errorf("%s: %s", ae.Reason, strings.TrimPrefix(err.Error(), "latch: "))
		case err != nil:
			return nil, Approval{}, fmt.Errorf("internal: %w", err)
		}
		return nil, o.approvalOf(a), nil
	}
}

// ListEffectsArgs are the arguments of list_effects.
type ListEffectsArgs struct {
	State string `json:"state,omitempty" jsonschema:"attention (default: ambiguous, and executing with a lapsed lease), executing, committed, failed, ambiguous, or all"`
}

// Effect is an effect record as the tools show it; the fields are those of `latch effects --json`.
type Effect struct {
	EffectKey string `json:"effect_key"`
	State     string `json:"state"`
	// LeaseLapsed: the holder's lease passed without an outcome (executing past it, or written
	// ambiguous by a contender or the sweeper), as in `latch effects --json`.
	LeaseLapsed    bool   `json:"lease_lapsed,omitempty"`
	Attempt        int    `json:"attempt"`
	Action         string `json:"action"`
	ActionID       string `json:"action_id"`
	ActionHash     string `json:"action_hash"`
	LeaseExpiresAt string `json:"lease_expires_at,omitempty"`
	Result         any    `json:"result,omitempty"`
	Error          string `json:"error,omitempty"`
	ResolvedBy     string `json:"resolved_by,omitempty"`
	CreatedAt      string `json:"created_at"`
	UpdatedAt      string `json:"updated_at"`
}

// Effects is the result of list_effects.
type Effects struct {
	Effects []Effect `json:"effects"`
}

func (o *Operator) effectOf(e *store.Effect) Effect {
	out := Effect{EffectKey: e.Key, State: string(e.State), Attempt: e.Attempt, Action: e.Action, ActionID: e.ActionID,
		ActionHash: e.ActionHash, LeaseExpiresAt: stamp(e.LeaseExpiresAt), Error: e.Error, ResolvedBy: e.ResolvedBy,
		CreatedAt: stamp(e.CreatedAt), UpdatedAt: stamp(e.UpdatedAt),
		LeaseLapsed: jsonview.LeaseLapsed(e, o.cfg.Now())}
	if len(e.Result) > 0 {
		_ = json.Unmarshal(e.Result, &out.Result)
	}
	return out
}

var effectStates = map[string]bool{"attention": true, "executing": true, "committed": true, "failed": true, "ambiguous": true, "all": true}

func (o *Operator) listEffects(ctx context.Context, _ *mcp.CallToolRequest, in ListEffectsArgs) (*mcp.CallToolResult, Effects, error) {
	state := in.State
	if state == "" {
		state = "attention"
	}
	if !effectStates[state] {
		return nil, Effects{}, fmt.Errorf("invalid_argument: state %q is not one of attention, executing, committed, failed, ambiguous, all", in.State)
	}
	f := store.EffectFilter{State: store.State(state)}
	if state == "attention" || state == "all" {
		f = store.EffectFilter{}
	}
	list, err := o.cfg.Guard.Store().Effects(ctx, f)
	if err != nil {
		return nil, Effects{}, fmt.Errorf("internal: list effects: %w", err)
	}
	out := Effects{Effects: []Effect{}}
	for _, e := range list {
		v := o.effectOf(e)
		if state == "attention" && e.State != store.Ambiguous && !v.LeaseLapsed {
			continue
		}
		out.Effects = append(out.Effects, v)
	}
	return nil, out, nil
}

// ResolveArgs are the arguments of resolve.
type ResolveArgs struct {
	EffectKey string `json:"effect_key" jsonschema:"the ambiguous effect's key"`
	Outcome   string `json:"outcome" jsonschema:"committed (it happened) or failed (it did not: a retry may run)"`
	Result    any    `json:"result,omitempty" jsonschema:"with committed: the effect's result, handed to later duplicates"`
	Note      string `json:"note,omitempty" jsonschema:"why: kept on the record and in its event"`
}

func (o *Operator) resolve(ctx context.Context, req *mcp.CallToolRequest, in ResolveArgs) (*mcp.CallToolResult, Effect, error) {
	w, err := o.who(req)
	if err != nil {
		return nil, Effect{}, err
	}
	var to store.State
	switch in.Outcome {
	case "committed":
		to = store.Committed
	case "failed":
		to = store.Failed
	default:
		return nil, Effect{}, fmt.Errorf("invalid_argument: outcome %q is not committed or failed", in.Outcome)
	}
	r := &store.ResolveRequest{Key: in.EffectKey, To: to, By: w.resolvedBy(), Note: w.note(in.Note)}
	if in.Result != nil {
		if to != store.Committed {
			return nil, Effect{}, errors.New("invalid_argument: a result goes with outcome committed")
		}
		b, err := json.Marshal(in.Result)
		if err != nil {
			return nil, Effect{}, fmt.Errorf("invalid_argument: result: %w", err)
		}
		r.Result = b
	}
	e, err := o.cfg.Guard.ResolveEffect(ctx, r)
	var re *store.ResolveError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, Effect{}, fmt.Errorf("effect_not_found: no effect %q", in.EffectKey)
	case errors.Is(err, store.ErrNotAmbiguous):
		return nil, Effect{}, fmt.Errorf("not_ambiguous: %s", strings.TrimPrefix(err.Error(), "latch: "))
	case errors.As(err, &re):
		return nil, Effect{}, fmt.Errorf("%s: %s", re.Reason, strings.TrimPrefix(err.Error(), "latch: "))
	case err != nil:
		return nil, Effect{}, fmt.Errorf("refused: %s", strings.TrimPrefix(err.Error(), "latch: "))
	}
	return nil, o.effectOf(e), nil
}

// InspectArgs name what to inspect.
type InspectArgs struct {
	ID string `json:"id" jsonschema:"an action id (act_…), an approval id (apr_…) or an effect key"`
}

// Inspection is everything about one id.
type Inspection struct {
	Approval *Approval `json:"approval,omitempty"`
	Effect   *Effect   `json:"effect,omitempty"`
	Events   []Event   `json:"events"`
	Receipts []any     `json:"receipts"` // each the receipt document
}

// Event is one event of the timeline.
type Event struct {
	ID         int64  `json:"id"`
	Kind       string `json:"kind"`
	Time       string `json:"time"`
	ActionID   string `json:"action_id,omitempty"`
	EffectKey  string `json:"effect_key,omitempty"`
	ApprovalID string `json:"approval_id,omitempty"`
	Payload    any    `json:"payload,omitempty"`
}

var (
	actionID   = regexp.MustCompile(`^act_[0-9a-f]{32}$`)
	approvalID = regexp.MustCompile(`^apr_[0-9a-f]{32}$`)
)

func (o *Operator) inspect(ctx context.Context, _ *mcp.CallToolRequest, in InspectArgs) (*mcp.CallToolResult, Inspection, error) {
	st := o.cfg.Guard.Store()
	out := Inspection{Events: []Event{}, Receipts: []any{}}
	var ef store.EventFilter
	var rf store.ReceiptFilter
	switch {
	case actionID.MatchString(in.ID):
		ef.ActionID, rf.ActionID = in.ID, in.ID
	case approvalID.MatchString(in.ID):
		a, err := st.Approval(ctx, in.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, Inspection{}, fmt.Errorf("approval_not_found: no approval request %q", in.ID)
		} else if err != nil {
			return nil, Inspection{}, fmt.Errorf("internal: %w", err)
		}
		v := o.approvalOf(a)
		out.Approval = &v
		ef.ApprovalID, rf.ApprovalID = in.ID, in.ID
	default:
		e, err := st.Effect(ctx, in.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, Inspection{}, fmt.Errorf("not_found: %q is no action id, approval id or effect key in this store", in.ID)
		} else if err != nil {
			return nil, Inspection{}, fmt.Errorf("internal: %w", err)
		}
		v := o.effectOf(e)
		out.Effect = &v
		ef.EffectKey, rf.EffectKey = in.ID, in.ID
	}
	events, err := st.Events(ctx, ef)
	if err != nil {
		return nil, Inspection{}, fmt.Errorf("internal: read events: %w", err)
	}
	for _, e := range events {
		ev := Event{ID: e.ID, Kind: e.Kind, Time: stamp(e.Time), ActionID: e.ActionID, EffectKey: e.EffectKey, ApprovalID: e.ApprovalID}
		if len(e.Payload) > 0 {
			_ = json.Unmarshal(e.Payload, &ev.Payload)
		}
		out.Events = append(out.Events, ev)
	}
	for r, err := range st.Receipts(ctx, rf) {
		if err != nil {
			return nil, Inspection{}, fmt.Errorf("internal: read receipts: %w", err)
		}
		var doc any
		if err := json.Unmarshal(r.Doc, &doc); err != nil {
			return nil, Inspection{}, fmt.Errorf("internal: receipt %d: %w", r.Seq, err)
		}
		out.Receipts = append(out.Receipts, doc)
	}
	if actionID.MatchString(in.ID) && len(out.Events) == 0 && len(out.Receipts) == 0 {
		return nil, Inspection{}, fmt.Errorf("not_found: no action %q in this store", in.ID)
	}
	return nil, out, nil
}

// VerifyArgs are the (no) arguments of verify_receipts.
type VerifyArgs struct{}

func (o *Operator) verify(ctx context.Context, _ *mcp.CallToolRequest, _ VerifyArgs) (*mcp.CallToolResult, receipt.Report, error) {
	rep, err := store.VerifyChain(ctx, o.cfg.Guard.Store())
	if err != nil {
		return nil, receipt.Report{}, fmt.Errorf("internal: verify: %w", err)
	}
	if rep.Breaks == nil {
		rep.Breaks = []receipt.Break{}
	}
	return nil, rep, nil
}
