// Package mcpop is the operator's side of latch as an MCP server: the tools a person (or the
// assistant they direct) needs when latch refuses something — list and show approval requests
// with the exact arguments, approve or deny them, list the effects that need a person, resolve
// one, inspect anything by id, list and count receipts, verify the receipt chain, and list the
// budgets in force with what each has consumed and holds. The
// tools answer as the CLI and latch serve do (package internal/operator), in the same shapes
// (package internal/jsonview): a field has one name and one null on every surface.
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
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	latchauth "github.com/latchkit/latch/auth"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the implementation version the server announces: the release of latch it is part
// of.
const Version = latch.Version

// Config configures an Operator. Guard is required.
type Config struct {
	// Guard's store is what the tools read and answer; its policy's display hints show
	// arguments as a person reads them. The guard runs no action.
	Guard *latch.Guard
	// Approver is who answers in sessions without a credential of their own (stdio). It is
	// recorded as the approver with method cli, not verified, as `latch approve --as` is. ""
	// refuses answers and resolutions in such sessions; the read tools still work.
	Approver string
	// Now is the clock that decides whether a lease lapsed (what needs a person); nil is
	// time.Now.
	Now func() time.Time
	// CheckpointKey is the public key of the store's signed checkpoints: with it,
	// verify_receipts checks every checkpoint against the chain, as `latch receipts --verify
	// --checkpoints` does; nil leaves them unchecked (the report's checkpoints is null).
	CheckpointKey ed25519.PublicKey
}

// Operator serves the operator tools.
type Operator struct {
	cfg Config
	op  *operator.Operator // the operator's questions, answered as on every surface
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
	op, err := operator.New(&operator.Config{Store: cfg.Guard.Store(), Policy: cfg.Guard.Policy(), Now: o.cfg.Now, CheckpointKey: cfg.CheckpointKey})
	if err != nil {
		return nil, fmt.Errorf("mcpop: new: %w", err)
	}
	o.op = op
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
	mcp.AddTool(s, &mcp.Tool{Name: "list_approvals", Annotations: read, OutputSchema: schemaFor[Approvals](),
		Description: "List approval requests by status (default pending; or granted, denied, expired, consumed, all) with the exact arguments each is bound to."}, o.listApprovals)
	mcp.AddTool(s, &mcp.Tool{Name: "show_approval", Annotations: read, OutputSchema: schemaFor[jsonview.Approval](),
		Description: "Show one approval request: the action, its exact arguments as a person reads them, who asked, the hash it is bound to, its status and expiry."}, o.showApproval)
	mcp.AddTool(s, &mcp.Tool{Name: "approve", Annotations: write(), OutputSchema: schemaFor[jsonview.Approval](),
		Description: "Grant a pending approval request as this session's approver. The grant is single use, expires, and matches only the exact action shown. With set, approve with an edit: the arguments the policy marks editable take narrower values (an amount lowered), and the request then matches only the edited action. With standing (not with set), it also grants a standing approval: up to uses further calls of the same action by the same principal, for a time, with the arguments the terms allow (only where the policy's approvers allow standing approvals)."}, o.answer(true))
	mcp.AddTool(s, &mcp.Tool{Name: "deny", Annotations: write(), OutputSchema: schemaFor[jsonview.Approval](),
		Description: "Deny a pending approval request as this session's approver."}, o.answer(false))
	mcp.AddTool(s, &mcp.Tool{Name: "list_effects", Annotations: read, OutputSchema: schemaFor[Effects](),
		Description: "List the effects that need a person (default: needs_person — ambiguous ones, executing ones whose lease lapsed, and resolved ones whose holder reported otherwise), or all effects in one stored state, or all."}, o.listEffects)
	mcp.AddTool(s, &mcp.Tool{Name: "resolve", Annotations: write(), InputSchema: schemaFor[ResolveArgs](), OutputSchema: schemaFor[jsonview.Effect](),
		Description: "Resolve an effect that needs a person: to committed (it happened; optionally with its result) or to failed (it did not; a retry may run), as this session's approver."}, o.resolve)
	mcp.AddTool(s, &mcp.Tool{Name: "inspect", Annotations: read, OutputSchema: schemaFor[jsonview.Inspection](),
		Description: "Everything about an action id (act_…), an approval id (apr_…) or an effect key: the record, the timeline of events and the receipts."}, o.inspect)
	mcp.AddTool(s, &mcp.Tool{Name: "list_receipts", Annotations: read, OutputSchema: schemaFor[Receipts](),
		Description: "List receipts in chain order, each with its hash and its document as stored: after a seq, at most limit (default 100)."}, o.listReceipts)
	mcp.AddTool(s, &mcp.Tool{Name: "stats", Annotations: read, OutputSchema: schemaFor[jsonview.Stats](),
		Description: "Count receipts by action and result over a window (since: 90m, 24h, 7d; default every receipt); in observe mode, what enforcement would have blocked."}, o.stats)
	mcp.AddTool(s, &mcp.Tool{Name: "coverage", Annotations: read, OutputSchema: schemaFor[jsonview.Coverage](),
		Description: "For each action of the policy and each of its rules, how many recorded calls it decided (since: an RFC 3339 time or 90m, 24h, 7d back; default every call); the rules that never fired, the actions never called and the effect templates that never produced a key."}, o.coverage)
	mcp.AddTool(s, &mcp.Tool{Name: "list_budgets", Annotations: read, OutputSchema: schemaFor[Budgets](),
		Description: "List the budgets in force (of policy grants, live delegations, and actions per principal): consumed and remaining within each rolling window, and every held charge with why it is held (an ambiguous effect holds its charge until a person resolves it)."}, o.listBudgets)
	mcp.AddTool(s, &mcp.Tool{Name: "inspect_grant", Annotations: read, OutputSchema: schemaFor[jsonview.GrantInspection](),
		Description: "One policy grant or delegation: whether it decides calls now, and each of its budgets with what it has consumed and every charge it holds."}, o.inspectGrant)
	mcp.AddTool(s, &mcp.Tool{Name: "inspect_hop", Annotations: read, OutputSchema: schemaFor[jsonview.HopTree](),
		Description: "What ran under one hop (dlg_…): the hop and its state (live, revoked, expired), its creation and revocation records, and each call decided under it with its receipts and its effect record now."}, o.inspectHop)
	mcp.AddTool(s, &mcp.Tool{Name: "verify_receipts", Annotations: read, OutputSchema: schemaFor[jsonview.ChainReport](),
		Description: "Verify the hash chain of receipts, the stored state against it and (when the server has the checkpoint public key) every signed checkpoint: ok, how many were verified, and each break with its seq."}, o.verify)
	mcp.AddTool(s, &mcp.Tool{Name: "list_standing", Annotations: read, OutputSchema: schemaFor[StandingList](),
		Description: "List standing approvals by state (default active; or exhausted, expired, revoked, all): what each admits, how many of its uses are spent, until when, and who granted it."}, o.listStanding)
	mcp.AddTool(s, &mcp.Tool{Name: "show_standing", Annotations: read, OutputSchema: schemaFor[jsonview.Standing](),
		Description: "Show one standing approval (sta_…): its action, the request's arguments, its bounds, its uses and its state."}, o.showStanding)
	mcp.AddTool(s, &mcp.Tool{Name: "revoke_standing", Annotations: write(), OutputSchema: schemaFor[jsonview.Standing](),
		Description: "Revoke a standing approval as this session's approver: calls presenting it afterwards are refused approval_revoked."}, o.revokeStanding)
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

// schemaFor is the JSON schema of T as the tools publish it: a json.RawMessage member
// (arguments, a result, a receipt document) is any JSON value, as it is written.
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {}}})
	if err != nil {
		panic(fmt.Sprintf("mcpop: schema of %T: %v", *new(T), err)) // the tool types are this package's own
	}
	return s
}

// toolError is a tool's error in the words of every surface: "reason: detail".
func toolError(err error) error {
	var fe *operator.FilterError
	var ref *operator.Refusal
	var ie *operator.InputError
	switch {
	case errors.As(err, &fe):
		return fmt.Errorf("invalid_argument: %s", fe.Error())
	case errors.As(err, &ie):
		return fmt.Errorf("%s: %s", ie.Reason, ie.Detail)
	case errors.As(err, &ref):
		return fmt.Errorf("%s: %s", ref.Reason, ref.Error())
	}
	return fmt.Errorf("internal: %s", strings.TrimPrefix(err.Error(), "latch: "))
}

// ListApprovalsArgs are the arguments of list_approvals.
type ListApprovalsArgs struct {
	Status string `json:"status,omitempty" jsonschema:"pending (default), granted, denied, expired, consumed, or all"`
}

// Approvals is the result of list_approvals: approval requests as `latch approvals --json`
// prints them and GET /v1/approvals lists them.
type Approvals struct {
	Approvals []jsonview.Approval `json:"approvals"`
}

func (o *Operator) listApprovals(ctx context.Context, _ *mcp.CallToolRequest, in ListApprovalsArgs) (*mcp.CallToolResult, Approvals, error) {
	status := in.Status
	if status == "" {
		status = string(store.Pending)
	}
	list, err := o.op.Approvals(ctx, status)
	if err != nil {
		return nil, Approvals{}, toolError(err)
	}
	return nil, Approvals{Approvals: list}, nil
}

// ApprovalArgs name one approval request.
type ApprovalArgs struct {
	ApprovalID string `json:"approval_id" jsonschema:"the request's id, apr_…"`
}

func (o *Operator) showApproval(ctx context.Context, _ *mcp.CallToolRequest, in ApprovalArgs) (*mcp.CallToolResult, jsonview.Approval, error) {
	a, err := o.op.Approval(ctx, in.ApprovalID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, jsonview.Approval{}, fmt.Errorf("approval_not_found: no approval request %q", in.ApprovalID)
	case err != nil:
		return nil, jsonview.Approval{}, toolError(err)
	}
	return nil, a, nil
}

// AnswerArgs are the arguments of approve and deny.
type AnswerArgs struct {
	ApprovalID string `json:"approval_id" jsonschema:"the request's id, apr_…"`
	Note       string `json:"note,omitempty" jsonschema:"kept with the answer"`
	// Set approves with an edit (docs/approvals.md#approve-with-edits).
	Set      map[string]any `json:"set,omitempty" jsonschema:"approve only: the arguments to change and the values they take instead; only arguments the policy marks editable, only narrowed (an amount lowered)"`
	Standing *StandingArgs  `json:"standing,omitempty" jsonschema:"approve only: also grant a standing approval with these terms"`
}

func (o *Operator) answer(grant bool) mcp.ToolHandlerFor[AnswerArgs, jsonview.Approval] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in AnswerArgs) (*mcp.CallToolResult, jsonview.Approval, error) {
		w, err := o.who(req)
		if err != nil {
			return nil, jsonview.Approval{}, err
		}
		var set json.RawMessage
		if len(in.Set) > 0 {
			if set, err = json.Marshal(in.Set); err != nil {
				return nil, jsonview.Approval{}, fmt.Errorf("edit_invalid: set: %w", err)
			}
		}
		ar := &store.AnswerRequest{ID: in.ApprovalID, Grant: grant, Approver: w.name, Method: w.method, Verified: w.verified, Note: in.Note, Set: set}
		if in.Standing != nil {
			if !grant {
				return nil, jsonview.Approval{}, errors.New("invalid_argument: a deny grants no standing approval")
			}
			if ar.Standing, err = in.Standing.terms(); err != nil {
				return nil, jsonview.Approval{}, err
			}
		}
		a, err := o.cfg.Guard.Answer(ctx, ar)
		var ae *store.AnswerError
		var se *store.StandingError
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, jsonview.Approval{}, fmt.Errorf("approval_not_found: no approval request %q", in.ApprovalID)
		case errors.As(err, &se):
			return nil, jsonview.Approval{}, fmt.Errorf("%s: %s", se.Reason, strings.TrimPrefix(err.Error(), "latch: "))
		case errors.As(err, &ae):
			return nil, jsonview.Approval{}, fmt.Errorf("%s: %s", ae.Reason, strings.TrimPrefix(err.Error(), "latch: "))
		case err != nil:
			return nil, jsonview.Approval{}, toolError(err)
		}
		v, err := o.op.ApprovalDetail(ctx, a)
		if err != nil {
			return nil, jsonview.Approval{}, toolError(err)
		}
		if ar.Standing != nil && a.Status == store.Granted {
			res, err := standingResult(v, ar.StandingID)
			return res, v, err
		}
		return nil, v, nil
	}
}

// ListEffectsArgs are the arguments of list_effects.
type ListEffectsArgs struct {
	State string `json:"state,omitempty" jsonschema:"needs_person (default: ambiguous, executing with a lapsed lease, or resolved with an outcome conflict), executing, committed, failed, ambiguous, or all"`
	After string `json:"after,omitempty" jsonschema:"list the effects whose keys come after this one (next_after of the page before)"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many effects, 1 to 1000 (default 100)"`
}

// Effects is the result of list_effects: effect records as `latch effects --json` prints them
// and GET /v1/effects lists them.
type Effects struct {
	Effects   []jsonview.Effect `json:"effects"`
	NextAfter string            `json:"next_after" jsonschema:"the key the next page starts after; empty on the last page"`
}

func (o *Operator) listEffects(ctx context.Context, _ *mcp.CallToolRequest, in ListEffectsArgs) (*mcp.CallToolResult, Effects, error) {
	state := in.State
	if state == "" {
		state = operator.StateNeedsPerson
	}
	limit, err := operator.PageSize(in.Limit, in.Limit != 0)
	if err != nil {
		return nil, Effects{}, fmt.Errorf("invalid_argument: %v", err)
	}
	if err := store.CheckText("after", in.After); err != nil {
		return nil, Effects{}, fmt.Errorf("invalid_argument: %v", err)
	}
	list, next, err := o.op.EffectPage(ctx, state, in.After, limit)
	if err != nil {
		return nil, Effects{}, toolError(err)
	}
	return nil, Effects{Effects: list, NextAfter: next}, nil
}

// ResolveArgs are the arguments of resolve: the effect's key, and the resolution every surface
// takes (to, result, note).
type ResolveArgs struct {
	EffectKey string          `json:"effect_key" jsonschema:"the key of the effect that needs a person"`
	To        string          `json:"to" jsonschema:"committed (it happened) or failed (it did not: a retry may run)"`
	Result    json.RawMessage `json:"result,omitempty" jsonschema:"with committed: the effect's result, handed to later duplicates"`
	Note      string          `json:"note,omitempty" jsonschema:"why: kept on the record and in its event"`
}

func (o *Operator) resolve(ctx context.Context, req *mcp.CallToolRequest, in ResolveArgs) (*mcp.CallToolResult, jsonview.Effect, error) {
	w, err := o.who(req)
	if err != nil {
		return nil, jsonview.Effect{}, err
	}
	r := &operator.Resolution{To: in.To, Result: in.Result, Note: in.Note}
	if _, err := r.Check(in.EffectKey, ""); err != nil {
		return nil, jsonview.Effect{}, toolError(err)
	}
	r.Note = w.note(in.Note)
	e, err := o.op.Resolve(ctx, o.cfg.Guard, in.EffectKey, r, w.resolvedBy())
	if err != nil {
		return nil, jsonview.Effect{}, toolError(err)
	}
	return nil, o.op.EffectView(e), nil
}

// InspectArgs name what to inspect.
type InspectArgs struct {
	ID string `json:"id" jsonschema:"an action id (act_…), an approval id (apr_…) or an effect key"`
}

func (o *Operator) inspect(ctx context.Context, _ *mcp.CallToolRequest, in InspectArgs) (*mcp.CallToolResult, jsonview.Inspection, error) {
	got, err := o.op.Inspect(ctx, in.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, jsonview.Inspection{}, fmt.Errorf("approval_not_found: no approval request %q", in.ID)
	case errors.Is(err, operator.ErrNothingRecorded):
		return nil, jsonview.Inspection{}, fmt.Errorf("not_found: nothing is recorded for %q in this store (no action id, approval id or effect key)", in.ID)
	case err != nil:
		return nil, jsonview.Inspection{}, toolError(err)
	}
	return nil, o.op.View(got), nil
}

// ListReceiptsArgs are the arguments of list_receipts.
type ListReceiptsArgs struct {
	After int64 `json:"after,omitempty" jsonschema:"list the receipts after this seq (default 0: from the first)"`
	Limit int   `json:"limit,omitempty" jsonschema:"at most this many, 1 to 1000 (default 100)"`
}

// Receipts is the result of list_receipts, as GET /v1/receipts answers: each receipt as
// `latch receipts --json` prints it, and the seq to list on from.
type Receipts struct {
	Receipts  []jsonview.Receipt `json:"receipts"`
	NextAfter int64              `json:"next_after"`
}

func (o *Operator) listReceipts(ctx context.Context, _ *mcp.CallToolRequest, in ListReceiptsArgs) (*mcp.CallToolResult, Receipts, error) {
	limit := in.Limit
	switch {
	case limit == 0:
		limit = 100
	case limit < 1 || limit > 1000:
		return nil, Receipts{}, fmt.Errorf("invalid_argument: limit %d: want 1 to 1000", in.Limit)
	}
	if in.After < 0 {
		return nil, Receipts{}, fmt.Errorf("invalid_argument: after %d: want a receipt seq (0 or more)", in.After)
	}
	list, next, err := o.op.ReceiptPage(ctx, in.After, limit)
	if err != nil {
		return nil, Receipts{}, toolError(err)
	}
	return nil, Receipts{Receipts: list, NextAfter: next}, nil
}

// StatsArgs are the arguments of stats.
type StatsArgs struct {
	Since string `json:"since,omitempty" jsonschema:"only receipts finished in this window: 90m, 24h, 7d (default: every receipt)"`
}

func (o *Operator) stats(ctx context.Context, _ *mcp.CallToolRequest, in StatsArgs) (*mcp.CallToolResult, jsonview.Stats, error) {
	var window time.Duration
	if in.Since != "" {
		d, err := operator.ParseWindow(in.Since)
		if err != nil {
			return nil, jsonview.Stats{}, fmt.Errorf("invalid_argument: %w", err)
		}
		window = d
	}
	out, err := o.op.Stats(ctx, window)
	if err != nil {
		return nil, jsonview.Stats{}, toolError(err)
	}
	return nil, out, nil
}

// CoverageArgs are the arguments of coverage.
type CoverageArgs struct {
	Since string `json:"since,omitempty" jsonschema:"only calls decided at or after this RFC 3339 time, or in this window back from now: 90m, 24h, 7d (default: every call)"`
}

func (o *Operator) coverage(ctx context.Context, _ *mcp.CallToolRequest, in CoverageArgs) (*mcp.CallToolResult, jsonview.Coverage, error) {
	var from time.Time
	if in.Since != "" {
		t, err := operator.ParseSince(in.Since, o.op.Now())
		if err != nil {
			return nil, jsonview.Coverage{}, fmt.Errorf("invalid_argument: %w", err)
		}
		from = t
	}
	out, err := o.op.Coverage(ctx, from)
	if err != nil {
		return nil, jsonview.Coverage{}, toolError(err)
	}
	return nil, out, nil
}

// BudgetsArgs are the (no) arguments of list_budgets.
type BudgetsArgs struct{}

// Budgets is the result of list_budgets: the budgets in force as `latch budgets --json` prints
// them and GET /v1/budgets lists them.
type Budgets struct {
	Budgets []jsonview.Budget `json:"budgets"`
}

func (o *Operator) listBudgets(ctx context.Context, _ *mcp.CallToolRequest, _ BudgetsArgs) (*mcp.CallToolResult, Budgets, error) {
	list, err := o.op.Budgets(ctx)
	if err != nil {
		return nil, Budgets{}, toolError(err)
	}
	return nil, Budgets{Budgets: list}, nil
}

// GrantArgs name a policy grant or a delegation.
type GrantArgs struct {
	GrantID string `json:"grant_id" jsonschema:"a policy grant's id, or a delegation's (dlg_…)"`
}

func (o *Operator) inspectGrant(ctx context.Context, _ *mcp.CallToolRequest, in GrantArgs) (*mcp.CallToolResult, jsonview.GrantInspection, error) {
	got, err := o.op.InspectGrant(ctx, in.GrantID)
	switch {
	case errors.Is(err, operator.ErrNoGrant):
		return nil, jsonview.GrantInspection{}, fmt.Errorf("not_found: no grant or delegation %q", in.GrantID)
	case err != nil:
		return nil, jsonview.GrantInspection{}, toolError(err)
	}
	return nil, got, nil
}

// HopArgs name a hop.
type HopArgs struct {
	Hop string `json:"hop" jsonschema:"the hop's id (dlg_…)"`
}

func (o *Operator) inspectHop(ctx context.Context, _ *mcp.CallToolRequest, in HopArgs) (*mcp.CallToolResult, jsonview.HopTree, error) {
	got, err := o.op.Hop(ctx, in.Hop)
	switch {
	case errors.Is(err, operator.ErrNothingRecorded):
		return nil, jsonview.HopTree{}, fmt.Errorf("not_found: nothing recorded for hop %q", in.Hop)
	case err != nil:
		return nil, jsonview.HopTree{}, toolError(err)
	}
	return nil, *got, nil
}

// VerifyArgs are the (no) arguments of verify_receipts.
type VerifyArgs struct{}

func (o *Operator) verify(ctx context.Context, _ *mcp.CallToolRequest, _ VerifyArgs) (*mcp.CallToolResult, jsonview.ChainReport, error) {
	rep, err := o.op.VerifyChain(ctx, nil)
	if err != nil {
		return nil, jsonview.ChainReport{}, toolError(err)
	}
	return nil, rep, nil
}
