package latch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Call is one proposed call for the dynamic API (Guard.Execute, Guard.Evaluate).
type Call struct {
	Action      string
	Arguments   json.RawMessage // a JSON object; nil means {}
	Resource    string          // an explicit resource; else rendered from the template
	Environment string          // "" means the guard's environment
	Options     *Options

	// encodeErr is set by Protect when the arguments did not encode as JSON (a NaN, a cycle, a
	// channel): the call is refused invalid_argument and its refusal recorded like any other.
	encodeErr error
}

// Options adjusts one protected function or call.
type Options struct {
	Effect   string        // effect key template; overrides the policy's
	Resource string        // resource template; overrides the policy's
	Lease    time.Duration // overrides the policy's and the guard's lease
	// Reconcile is asked about an earlier attempt of the call's effect key whose outcome is
	// unknown, before the call reserves the key (see ReconcileFunc). Protect also registers it
	// for the sweeper, which asks it without a call (Guard.RegisterReconcile).
	Reconcile ReconcileFunc
	Wait      bool // block until an approval request is answered or expires
	// Task is the id of the task the call is part of — a job, a ticket, a workflow — matched
	// against the tasks a grant names (docs/authority.md#tasks) and recorded on the receipt. It
	// is not part of the action hash. WithTask gives one per call to a protected function; when
	// both are set they must be equal. At most MaxTaskLength bytes, no control or format
	// characters (CheckTask).
	Task string
	// Hop is the id of a hop (Guard.Hop) the call acts under: the call is then decided on the
	// authority axis by that hop's chain alone, never by the caller's own grants, and is refused
	// authority_hop when the hop is missing, not live or addressed to another agent
	// (docs/agents.md). WithHop gives one per context; when both are set they must be equal.
	Hop string
	// Scope is this call's scope provider, overriding Config.Scope and the policy's scopes
	// section (docs/scopes.md); ScopeTimeout, when positive, bounds the question to whichever
	// provider the call asks.
	Scope        ScopeFunc
	ScopeTimeout time.Duration
	// Precondition is this call's precondition provider, overriding the action's precondition
	// entry in the policy (docs/governance.md#precondition-fingerprints). Recheck says when it is
	// asked (RecheckOnApproval when both this and the policy leave it empty);
	// PreconditionTimeout, when positive, bounds its answer (else the policy's, else
	// DefaultPreconditionTimeout).
	Precondition        PreconditionFunc
	Recheck             Recheck
	PreconditionTimeout time.Duration
}

// Outcome is a reconcile hook's answer to "did this effect happen?". The names carry an Outcome
// prefix because NotExecuted is already the executor's error constructor.
type Outcome int

// Reconcile outcomes.
const (
	OutcomeUnknown     Outcome = iota // cannot tell: the effect stays ambiguous
	OutcomeCommitted                  // it happened: resolved committed, the call is a duplicate
	OutcomeNotExecuted                // it did not happen: resolved failed, the call renews the key
)

func (o Outcome) String() string {
	switch o {
	case OutcomeCommitted:
		return "committed"
	case OutcomeNotExecuted:
		return "not_executed"
	}
	return "unknown"
}

// Decision is a policy decision.
type Decision = policy.Decision

// Evaluation is what Evaluate decides about a call, without writing anything.
type Evaluation struct {
	Action     string
	ActionHash string
	Arguments  json.RawMessage // canonical
	Resource   string
	EffectKey  string
	Decision   Decision
	Reason     string
	Trace      []policy.RuleTrace
	PolicyHash string
	Authority  *authority.Decision // nil when the policy has no authority section
	// ArgumentCheck is the check of the arguments against what the action needs, made before
	// any rule (docs/policy.md#arguments); when it fails, Reason is missing_argument or
	// invalid_arguments and no rule was evaluated.
	ArgumentCheck policy.ArgumentCheck
}

// prepared is a call after normalization.
type prepared struct {
	call      *Call
	opts      Options
	principal Principal
	action    *policy.Action // nil when the policy does not list the action
	args      map[string]any
	canonArgs []byte
	resource  string
	env       string
	hash      string
	doc       []byte // canonical action document
	key       string
	eval      policy.Evaluation
	auth      *authority.Decision // nil when the policy has no authority section
	charges   []store.Charge      // the budget charges its reservation makes (budget.go)
	remote    bool                // begun by Begin: the executor runs elsewhere
	scopeHash string              // the hash of the scope the resource was checked against, if any
	started   time.Time
	task      string // the call's task (callTask), "" when none
	// The precondition fingerprints (precondition.go): the state read for this call ("" for
	// none), whether it was read, when; and the one captured with a presented approval.
	precondition     string
	preconditionRead bool
	preconditionAt   time.Time
	captured         string
	capturedAt       time.Time
	// pol is the policy the call is decided under, read once: a policy swapped in meanwhile
	// (Guard.SetPolicy) decides later calls, never half of this one.
	pol *policy.Policy
	// requestKey is the call's request key (WithRequestKey), "" when none; keyNamed says the
	// effect key was rendered from it ({$request_key}), so the key and the effect are one name
	// (store.ReserveRequest.KeyNamesEffect).
	requestKey string
	keyNamed   bool
}

func (g *Guard) principal(ctx context.Context) (Principal, error) {
	if g.cfg.Identity != nil {
		p, err := g.cfg.Identity.Principal(ctx)
		if err != nil {
			return Principal{}, fmt.Errorf("%w: %w", ErrIdentity, err)
		}
		return p, nil
	}
	p, _ := principalFrom(ctx)
	return p, nil
}

// normalize builds the action of docs/guarantees.md#actions-and-the-action-hash: canonical arguments, resource, hash, effect key.
// The returned error is an *InvalidArgumentError; pr is usable for a receipt even then.
func (g *Guard) normalize(call *Call, p Principal, requestKey string) (*prepared, error) {
	pr := &prepared{call: call, principal: p, env: call.Environment, pol: g.current(), requestKey: requestKey}
	if call.Options != nil {
		pr.opts = *call.Options
	}
	if pr.env == "" {
		pr.env = g.env
	}
	pr.action = pr.pol.Actions[call.Action]
	if err := checkNames("action name", call.Action, "agent", p.Agent, "user", p.User, "environment", pr.env,
		"resource", call.Resource); err != nil {
		return pr, err
	}
	if call.encodeErr != nil {
		pr.canonArgs = []byte("{}")
		return pr, &InvalidArgumentError{Reason: "invalid_argument", Err: call.encodeErr}
	}
	raw := call.Arguments
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	v, canonArgs, err := canon.ParseCanonical(raw)
	if err != nil {
		pr.canonArgs = []byte("{}")
		var ce *canon.Error
		ptr, reason := "", "invalid_argument"
		if errors.As(err, &ce) {
			ptr = ce.Pointer
			if ce.KeyClash {
				// Two keys an executor decoding with encoding/json would read as one field: the
				// arguments as a whole could mean two things, as for a schema violation.
				reason = policy.ReasonInvalidArguments
			}
		}
		return pr, &InvalidArgumentError{Reason: reason, Pointer: ptr, Err: err}
	}
	args, ok := v.(map[string]any)
	if !ok {
		pr.canonArgs = []byte("{}")
		return pr, &InvalidArgumentError{Reason: "invalid_argument", Err: errors.New("arguments must be a JSON object")}
	}
	pr.args, pr.canonArgs = args, canonArgs
	if call.Action == "" {
		return pr, &InvalidArgumentError{Reason: "invalid_argument", Err: errors.New("action name is empty")}
	}
	if p.Agent == "" {
		return pr, &InvalidArgumentError{Reason: "invalid_argument", Err: errors.New("principal has no agent")}
	}

	// Arguments that do not fit what the action needs are denied by decide (missing_argument,
	// invalid_arguments), naming the argument: a template that cannot render because of that
	// argument is not the reason to report. In observe mode such a call still runs, so it needs
	// its effect key, and a template that cannot render is refused as it always was.
	tolerate := !pr.pol.CheckArguments(call.Action, args).OK() && pr.pol.Mode != policy.ModeObserve
	if rerr := g.render(pr, args); rerr != nil {
		if !tolerate {
			return pr, rerr
		}
		pr.resource, pr.key = call.Resource, ""
	}
	pr.doc, pr.hash, err = actionDocument(call.Action, canonArgs, pr.resource, p, pr.env)
	if err != nil {
		return pr, &InvalidArgumentError{Reason: "invalid_argument", Err: err}
	}
	if err := checkNames("resource", pr.resource, "effect key", pr.key); err != nil {
		return pr, err
	}
	return pr, nil
}

// checkNames refuses, as invalid_argument, a name or key that no store can keep (a NUL byte):
// field/value pairs, first refusal wins. The error wraps store.ErrInvalidInput, and such a call
// is refused before anything is written, since its receipt could not be stored either.
func checkNames(pairs ...string) *InvalidArgumentError {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := store.CheckText(pairs[i], pairs[i+1]); err != nil {
			return &InvalidArgumentError{Reason: "invalid_argument", Err: err}
		}
	}
	return nil
}

// render fills pr.resource (unless the call gave one) and pr.key from the templates.
func (g *Guard) render(pr *prepared, args map[string]any) *InvalidArgumentError {
	pr.resource = pr.call.Resource
	if pr.resource == "" {
		tmpl, err := g.template(pr.opts.Resource, pr.action, false)
		if err != nil {
			return &InvalidArgumentError{Reason: "effect_key_error", Err: fmt.Errorf("resource template: %w", err)}
		}
		if tmpl != nil {
			if pr.resource, err = tmpl.Render(args, ""); err != nil {
				return &InvalidArgumentError{Reason: "effect_key_error", Err: fmt.Errorf("resource: %w", err)}
			}
		}
	}
	tmpl, err := g.template(pr.opts.Effect, pr.action, true)
	if err != nil {
		return &InvalidArgumentError{Reason: "effect_key_error", Err: fmt.Errorf("effect template: %w", err)}
	}
	if tmpl != nil {
		if pr.key, err = tmpl.RenderKeyed(args, pr.resource, pr.requestKey); err != nil {
			if errors.Is(err, policy.ErrNoRequestKey) {
				return &InvalidArgumentError{Reason: string(ReasonRequestKeyRequired), Err: fmt.Errorf("effect key %s: %w: "+
					"the caller names this effect with its own request key (an MCP client's _meta %s, an HTTP begin's Idempotency-Key header, latch.WithRequestKey)",
					safetext.Quote(tmpl.String()), err, "latch/request_key")}
			}
			return &InvalidArgumentError{Reason: "effect_key_error", Err: fmt.Errorf("effect key: %w", err)}
		}
		pr.keyNamed = tmpl.UsesRequestKey()
	}
	return nil
}

// template picks the call's override or the policy's template.
func (g *Guard) template(override string, a *policy.Action, effect bool) (*policy.Template, error) {
	if override != "" {
		return policy.ParseTemplate(override)
	}
	if a == nil {
		return nil, nil
	}
	if effect {
		return a.Effect, nil
	}
	return a.Resource, nil
}

// actionDocument returns the canonical form of an action (docs/guarantees.md#the-canonical-form) and its hash.
func actionDocument(name string, canonArgs []byte, resource string, p Principal, env string) ([]byte, string, error) {
	var res, user any
	if resource != "" {
		res = resource
	}
	if p.User != "" {
		user = p.User
	}
	doc, err := canon.Marshal(map[string]any{
		"schema":      "latch.action/v1",
		"name":        name,
		"arguments":   json.RawMessage(canonArgs),
		"resource":    res,
		"principal":   map[string]any{"agent": p.Agent, "user": user},
		"environment": env,
	})
	if err != nil {
		return nil, "", fmt.Errorf("action document: %w", err)
	}
	return doc, canon.Sum(doc), nil
}

// decide evaluates the authority axis, when the policy has one, and the policy; they combine as
// the stricter (docs/guarantees.md#the-pipeline-of-one-call). Authority either allows or denies, so a denial replaces the
// policy's decision and an allow leaves it.
func (g *Guard) decide(ctx context.Context, pr *prepared) {
	pr.eval = pr.pol.Evaluate(pr.call.Action, pr.args)
	if pr.pol.Authority == nil {
		return
	}
	ad := g.authorize(ctx, pr)
	pr.auth = &ad
	if !ad.Allowed {
		pr.eval = policy.Evaluation{Decision: policy.Deny, Reason: ad.Reason, Trace: pr.eval.Trace}
	}
}

// refusal is the error of a call decided deny.
func (pr *prepared) refusal() error {
	if pr.auth != nil && !pr.auth.Allowed {
		return &AuthorityError{Reason: pr.auth.Reason, Dimension: pr.auth.Dimension}
	}
	if a := pr.eval.Arguments; !a.OK() {
		return &DeniedError{Action: pr.call.Action, Reason: a.Reason, Argument: a.Argument, Pointer: a.Pointer, Detail: a.Msg}
	}
	return &DeniedError{Action: pr.call.Action, Reason: pr.eval.Reason}
}

// Evaluate decides a call without writing anything: the decision, its reason and trace, the
// action hash and the effect key a call would use. The principal comes from ctx as for Execute.
func (g *Guard) Evaluate(ctx context.Context, call *Call) (*Evaluation, error) {
	p, err := g.principal(ctx)
	var expired *ExpiredCredentialError
	switch {
	case errors.As(err, &expired) && expired.Principal.Agent != "":
		p = expired.Principal
	case err != nil:
		return nil, err
	case p.Agent == "":
		return nil, &DeniedError{Action: call.Action, Reason: "no_principal"}
	}
	task, err := callTask(ctx, call)
	if err != nil {
		return nil, err
	}
	pr, err := g.normalize(call, p, requestKeyFrom(ctx))
	if err != nil {
		return nil, err
	}
	pr.task = task
	g.decide(ctx, pr)
	if pr.eval.Decision != policy.Deny {
		// A budget the call could never be charged against refuses it, as Execute would.
		if _, err := g.charges(pr); err != nil {
			pr.eval = policy.Evaluation{Decision: policy.Deny, Reason: ReasonOf(err), Trace: pr.eval.Trace, Arguments: pr.eval.Arguments}
		}
	}
	if deny, err := g.unapproved(ctx, pr); err != nil {
		return nil, err
	} else if deny {
		// Execute would refuse it so, whatever the policy says.
		pr.eval = policy.Evaluation{Decision: policy.Deny, Reason: string(ReasonPolicyUnapproved), Arguments: pr.eval.Arguments}
	}
	if g.principalExpired(p, expired, g.cfg.Now()) {
		// Execute would refuse it so, whatever the policy says.
		pr.eval = policy.Evaluation{Decision: policy.Deny, Reason: "principal_expired", Trace: pr.eval.Trace, Arguments: pr.eval.Arguments}
	}
	return &Evaluation{
		Action: call.Action, ActionHash: pr.hash, Arguments: pr.canonArgs, Resource: pr.resource,
		EffectKey: pr.key, Decision: pr.eval.Decision, Reason: pr.eval.Reason, Trace: pr.eval.Trace,
		PolicyHash: pr.pol.Hash, Authority: pr.auth, ArgumentCheck: pr.eval.Arguments,
	}, nil
}

// draft is the receipt of a call before its result is known.
func (g *Guard) draft(pr *prepared, actionID string, started time.Time) *receipt.Receipt {
	mode := string(pr.pol.Mode)
	if mode == "" {
		mode = string(policy.ModeEnforce)
	}
	return &receipt.Receipt{
		ReceiptID: newID("rcp_"), ActionID: actionID, Action: pr.call.Action, ActionHash: pr.hash,
		Arguments: receiptArguments(pr.pol, pr.call.Action, pr.canonArgs), Resource: pr.resource,
		Principal:   receipt.Principal{Agent: pr.principal.Agent, User: pr.principal.User, Issuer: pr.principal.Issuer},
		Environment: pr.env, Task: pr.task, Decision: string(pr.eval.Decision), DecisionReason: pr.eval.Reason,
		EffectKey: pr.key, StartedAt: started, PolicyHash: pr.pol.Hash, PolicyVersion: pr.pol.Version, Mode: mode,
		Authority: pr.authorityRecord(), ScopeHash: pr.scopeHash,
	}
}

// authorityRecord is the receipt's authority field: the grant (and delegation) that allowed the
// call, or that came nearest when it was denied.
func (pr *prepared) authorityRecord() *receipt.Authority {
	if pr.auth == nil || pr.auth.GrantID == "" {
		return nil
	}
	return &receipt.Authority{GrantID: pr.auth.GrantID, DelegationID: pr.auth.DelegationID, BreakGlass: pr.auth.BreakGlass}
}

// proposal returns the events that open every decided call.
func (g *Guard) proposal(pr *prepared, actionID string, now time.Time) []store.Event {
	evs := g.proposalEvents(pr, actionID, now)
	if a := pr.auth; a != nil {
		var data map[string]any
		kind := store.EventAuthorityResolved
		if a.Allowed {
			data = map[string]any{"grant_id": a.GrantID, "delegation_id": a.DelegationID}
			if a.BreakGlass != "" {
				data["break_glass"] = a.BreakGlass
			}
		} else {
			kind = store.EventAuthorityDenied
			data = map[string]any{"reason": a.Reason, "dimension": a.Dimension, "grant_id": a.GrantID, "delegation_id": a.DelegationID}
		}
		if pr.task != "" {
			data["task"] = pr.task // what the task dimension was decided on
		}
		evs = append(evs, store.NewEvent(kind, now, actionID, pr.key, "", data))
	}
	return evs
}

func (g *Guard) proposalEvents(pr *prepared, actionID string, now time.Time) []store.Event {
	if !pr.remote && !pr.preconditionRead && pr.captured == "" && pr.capturedAt.IsZero() {
		// The usual call: both payloads written directly, without building maps.
		proposed, ok1 := stringObject("action", pr.call.Action, "action_hash", pr.hash, "agent", pr.principal.Agent,
			"environment", pr.env, "resource", pr.resource, "user", pr.principal.User)
		evaluated, ok2 := stringObject("decision", string(pr.eval.Decision), "policy_hash", pr.pol.Hash, "reason", pr.eval.Reason)
		if ok1 && ok2 {
			return []store.Event{
				{Kind: store.EventActionProposed, Time: now, ActionID: actionID, EffectKey: pr.key, Payload: proposed},
				{Kind: store.EventPolicyEvaluated, Time: now, ActionID: actionID, EffectKey: pr.key, Payload: evaluated},
			}
		}
	}
	proposed := map[string]any{
		"action": pr.call.Action, "action_hash": pr.hash, "agent": pr.principal.Agent, "user": pr.principal.User,
		"environment": pr.env, "resource": pr.resource,
	}
	if pr.remote {
		proposed["remote"] = g.remoteRecord(pr)
	}
	evaluated := map[string]any{"decision": string(pr.eval.Decision), "reason": pr.eval.Reason, "policy_hash": pr.pol.Hash}
	// The fingerprints the call was decided on, never the state itself: the one read for this
	// call and the one captured with the approval it presents.
	if pr.preconditionRead {
		evaluated["precondition"] = orNone(pr.precondition)
	}
	if pr.captured != "" || !pr.capturedAt.IsZero() {
		evaluated["precondition_captured"] = orNone(pr.captured)
	}
	return []store.Event{
		store.NewEvent(store.EventActionProposed, now, actionID, pr.key, "", proposed),
		store.NewEvent(store.EventPolicyEvaluated, now, actionID, pr.key, "", evaluated),
	}
}

// orNone is a fingerprint as an event records it: "none" for a target without state.
func orNone(h string) string {
	if h == "" {
		return "none"
	}
	return h
}

// stringObject writes the JSON object of keys kv[0], kv[2], … (given in canonical order) and
// their string values kv[1], kv[3], …, byte for byte as canon.Marshal writes the same map, in
// one allocation; false when a value is not valid UTF-8 (then the caller uses Marshal, which
// refuses it, and its fallback).
func stringObject(kv ...string) ([]byte, bool) {
	n := 2
	for _, s := range kv {
		n += len(s) + 4
	}
	out := make([]byte, 0, n+n/8)
	out = append(out, '{')
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = canon.AppendString(out, kv[i]); err != nil {
			return nil, false
		}
		out = append(out, ':')
		if out, err = canon.AppendString(out, kv[i+1]); err != nil {
			return nil, false
		}
	}
	return append(out, '}'), true
}
