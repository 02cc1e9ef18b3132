package latch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// requestApproval stores a pending approval request bound to the call's action hash, unless
// the call's reservation would be refused: a human is asked only about a call that can still
// run. The store decides that with a probe of the reservation in the request's own transaction
// (store.ApprovalRequest); a refused probe writes the receipt the reservation would have
// written, and the call gets the reservation's error. reconciled are the events of a reconcile
// hook asked first, as the reservation would have asked it.
func (g *Guard) requestApproval(ctx context.Context, pr *prepared, actionID string, started time.Time, reconciled []store.Event) (*store.Approval, *Receipt, error) {
	now := g.cfg.Now()
	ttl := g.cfg.ApprovalTTL
	if pr.action != nil && pr.action.ApprovalTTL > 0 {
		ttl = pr.action.ApprovalTTL
	}
	req := &store.ApprovalRequest{
		Now: now,
		Approval: &store.Approval{
			ID: newID("apr_"), Status: store.Pending, ActionHash: pr.hash, Action: pr.doc, ActionName: pr.call.Action,
			Agent: pr.principal.Agent, User: pr.principal.User, PolicyHash: pr.pol.Hash, CreatedAt: now, ExpiresAt: now.Add(ttl),
			PreconditionHash: pr.precondition, PreconditionAt: pr.preconditionAt,
		},
		Events: append(g.proposal(pr, actionID, now), reconciled...),
		Probe: &store.ReserveRequest{
			Now: now, ActionID: actionID, Action: pr.call.Action, ActionHash: pr.hash, EffectKey: pr.key,
			Arguments: pr.canonArgs, Lease: g.lease(pr), MaxAttempts: g.maxAttempts(pr), Receipt: g.draft(pr, actionID, started),
			// A budget already exhausted refuses the call before a person is asked about it.
			Charges: pr.charges,
		},
	}
	t0 := time.Now()
	res, err := g.store.CreateApproval(ctx, req)
	g.obs.storeTransaction("create_approval", t0, err)
	if err != nil {
		return nil, nil, wrapOp("request approval for "+safetext.Quote(pr.call.Action), err)
	}
	if r := res.Refused; r != nil {
		out := newReceipt(r.Document, derefSealed(r.Receipt), nil)
		g.emit(ctx, out, res.Events)
		return nil, out, refusalError(pr.key, "", r)
	}
	g.emit(ctx, nil, res.Events)
	return res.Approval, nil, nil
}

// waitApproval blocks until a is answered or expires, polling with backoff
// (docs/guarantees.md#approvals). It returns nil once the request is no longer waiting — granted,
// denied or expired — and the reservation decides: it spends a granted request, and refuses a
// denied or expired one with its blocked receipt (writing expired). A context that ends first
// returns an *ApprovalRequiredError that also matches the context's error, so the program can
// present the request later with WithApproval.
func (g *Guard) waitApproval(ctx context.Context, a *store.Approval, hash, key string) error {
	delay := 20 * time.Millisecond
	for {
		cur, err := g.store.Approval(ctx, a.ID)
		if err != nil {
			if ctx.Err() != nil {
				return &ApprovalRequiredError{ApprovalID: a.ID, ActionHash: hash, EffectKey: key, ExpiresAt: a.ExpiresAt, Err: ctx.Err()}
			}
			return wrapOp("wait for approval "+a.ID, err)
		}
		if cur.Status != store.Pending || !g.cfg.Now().Before(cur.ExpiresAt) {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return &ApprovalRequiredError{ApprovalID: a.ID, ActionHash: hash, EffectKey: key, ExpiresAt: a.ExpiresAt, Err: ctx.Err()}
		case <-t.C:
		}
		delay = min(delay*2, time.Second)
	}
}

// Approve grants a pending approval request as approver, named by someone with access to the
// store and so not verified (store.MethodCLI): Answer records how an approver was
// authenticated. A principal may not approve its own request; an expired request is written
// expired and refused.
func (g *Guard) Approve(ctx context.Context, approvalID, approver string) (*store.Approval, error) {
	return g.answer(ctx, approvalID, approver, true)
}

// Deny denies a pending approval request as approver (unverified, as Approve).
func (g *Guard) Deny(ctx context.Context, approvalID, approver string) (*store.Approval, error) {
	return g.answer(ctx, approvalID, approver, false)
}

func (g *Guard) answer(ctx context.Context, id, approver string, grant bool) (*store.Approval, error) {
	return g.Answer(ctx, &store.AnswerRequest{ID: id, Grant: grant, Approver: approver})
}

// Answer records one person's answer to an approval request — who (req.Approver), how they were
// authenticated (req.Method, req.Verified), grant or deny, an optional note — and returns the
// request as it then stands: its status, the answers so far and how many grants it needs
// (store.Progress reads "1 of 2"). It is the one entry point for every surface that answers:
// the CLI, the API of latch serve and its console (docs/approvals.md).
//
// The action's `approvers:` in the guard's policy decide: an approver who is not a member of
// one of its roles — listed in the policy, or given the role by the store's approver accounts
// (store.RoleLookup), or, once the request has waited the action's escalate_after, of a role or
// among the people its escalate_to names — is refused approver_not_entitled (escalation adds
// who may answer, never changes how many must grant); with `verified: true` an unverified
// answer is refused approver_not_verified; `required` distinct people must grant (req.Required
// may ask for more, never fewer), and one entitled deny denies. The requesting agent or user
// never counts, in any spelling (self_approval); one person answers once, whatever the spelling,
// session or token (already_answered); a request already decided refuses every answer. A
// refused answer writes nothing, except that a request found expired is written expired — or
// denied, by store.ExpiryApprover, when its action's approvers.on_expiry is deny.
//
// A zero req.Now is the guard's clock. What the answer commits reaches the guard's sinks.
func (g *Guard) Answer(ctx context.Context, req *store.AnswerRequest) (*store.Approval, error) {
	if req == nil {
		return nil, wrapOp("answer approval", errors.New("no request"))
	}
	r := *req
	if r.Now.IsZero() {
		r.Now = g.cfg.Now()
	}
	if err := g.entitle(ctx, &r); err != nil {
		return nil, wrapOp("", err)
	}
	req.StandingID = r.StandingID // the id a standing grant was given, for the caller to show
	t0 := time.Now()
	a, err := g.store.AnswerApproval(ctx, &r)
	g.obs.storeTransaction("answer_approval", t0, err)
	var ae *store.AnswerError
	if err == nil || errors.As(err, &ae) && ae.Reason == "expired" { // expired: written so, and refused
		g.emitWritten(ctx, store.EventFilter{ApprovalID: r.ID}, 1,
			store.EventApprovalGranted, store.EventApprovalDenied, store.EventApprovalAnswered, store.EventApprovalInvalidated,
			store.EventStandingGranted, store.EventApprovalDeniedAtExpiry)
	}
	if err != nil {
		return a, wrapOp("", err) // the store's error names the request: "answer approval ID: …"
	}
	return a, nil
}

// entitle applies the policy's approvers of the request's action to r: it refuses an approver
// the action's roles do not name (approver_not_entitled), and sets how many grants are required
// and whether only verified answers count. It reads the request (its action name) and, for an
// action with roles, the approver's roles in the store's accounts; it writes nothing.
func (g *Guard) entitle(ctx context.Context, r *store.AnswerRequest) error {
	if err := r.Check(); err != nil {
		return fmt.Errorf("answer approval: %w", err)
	}
	cur, err := g.store.Approval(ctx, r.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("approval %s: %w", safetext.Quote(r.ID), store.ErrNotFound) // the store's message repeats the raw id
	case err != nil:
		return fmt.Errorf("answer approval %s: %w", safetext.Quote(r.ID), err)
	}
	// Once the request has waited its escalate_after, the roles and people it escalates to may
	// answer too (docs/approvals.md#reminders-and-escalation).
	pol := g.current()
	rule := pol.ApproversFor(cur.ActionName).RuleAt(cur.CreatedAt, r.Now)
	r.Required = max(r.Required, rule.Required)
	r.RequireVerified = r.RequireVerified || rule.Verified
	r.DenyAtExpiry = rule.DeniesAtExpiry()
	name, err := store.NormalizeApprover(r.Approver)
	if err != nil {
		r.Set = nil // the store refuses it invalid_approver, before any edit
		return nil
	}
	ok, err := g.entitled(ctx, rule, name)
	if err != nil {
		return fmt.Errorf("answer approval %s: %w", safetext.Quote(r.ID), err)
	}
	if !ok {
		return &store.AnswerError{ID: r.ID, Reason: store.ReasonNotEntitled, Approval: cur}
	}
	if len(r.Set) > 0 && r.Standing != nil {
		// A standing approval is bounded by the request as asked; an edit changes it. One
		// answer does one or the other.
		return &store.AnswerError{ID: r.ID, Reason: policy.ReasonEditInvalid, Approval: cur,
			Detail: "an answer either edits the request or grants a standing approval from it, not both"}
	}
	if len(r.Set) > 0 {
		edit, err := g.edit(cur, r.Set)
		if err != nil {
			return err
		}
		r.Edit = edit
	}
	if err := g.checkStanding(r, cur, pol, rule); err != nil {
		return err
	}
	return nil
}

// edit checks the arguments an approver sets on request a (a JSON object) against the guard's
// policy — only editable arguments, each only narrowed (policy.ApplyEdit) — and returns the
// edit the answer writes: a's action document with the edited arguments, and its hash. A
// refused edit is an *store.AnswerError whose reason is the policy's (edit_not_editable,
// edit_widens, edit_invalid) and whose detail names the argument; nothing is written.
func (g *Guard) edit(a *store.Approval, set json.RawMessage) (*store.Edit, error) {
	refuse := func(reason, detail string) error {
		return &store.AnswerError{ID: a.ID, Reason: reason, Approval: a, Detail: detail}
	}
	v, _, err := canon.ParseCanonical(set)
	values, ok := v.(map[string]any)
	if err != nil || !ok {
		return nil, refuse(policy.ReasonEditInvalid, "the edit is not a JSON object of argument names and values")
	}
	dv, err := canon.Parse(a.Action)
	doc, ok := dv.(map[string]any)
	if err != nil || !ok {
		return nil, fmt.Errorf("answer approval %s: requested action: unreadable", safetext.Quote(a.ID))
	}
	args, _ := doc["arguments"].(map[string]any)
	edited, changes, err := g.current().ApplyEdit(a.ActionName, args, values)
	var ee *policy.EditError
	if errors.As(err, &ee) {
		return nil, refuse(ee.Reason, safetext.Valid(ee.Why()))
	} else if err != nil {
		return nil, fmt.Errorf("answer approval %s: %w", safetext.Quote(a.ID), err)
	}
	doc["arguments"] = edited
	b, err := canon.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("answer approval %s: edited action: %w", safetext.Quote(a.ID), err)
	}
	e := &store.Edit{From: a.ActionHash, Action: b, Hash: canon.Sum(b)}
	for _, c := range changes {
		from, err1 := canon.Marshal(c.From)
		to, err2 := canon.Marshal(c.To)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("answer approval %s: edit of %s: %w", safetext.Quote(a.ID), c.Argument, err)
		}
		e.Changes = append(e.Changes, store.EditChange{Argument: c.Argument, From: from, To: to})
	}
	return e, nil
}

// entitled reports whether the person named name (NormalizeApprover'd) is a member of one of
// rule's roles — listed in the policy, or given the role by the store's approver accounts — or
// one of the people an escalated rule names, or rule names no roles. It reads the person's roles only when rule names some.
func (g *Guard) entitled(ctx context.Context, rule policy.ApproverRule, name string) (bool, error) {
	if len(rule.Roles) == 0 {
		return true, nil
	}
	var roles []string
	rl := g.cfg.ApproverRoles
	if rl == nil {
		rl, _ = g.store.(store.RoleLookup)
	}
	if rl != nil {
		var err error
		if roles, err = rl.ApproverRoles(ctx, name); err != nil {
			return false, fmt.Errorf("roles of %s: %w", safetext.Quote(name), err)
		}
	}
	return g.current().Entitled(rule, name, roles).Entitled, nil
}

// Resolve settles an ambiguous effect as committed or failed, recording who said so (by: the
// surface and the person, for example "cli:alice"; docs/guarantees.md#resolving-an-ambiguous-effect).
// Resolving anything but an ambiguous effect is refused and changes nothing; so is a person
// resolving their own attempt or one they are not entitled to (see ResolveEffect).
// ResolveEffect takes a result and a note.
func (g *Guard) Resolve(ctx context.Context, key string, to store.State, by string) (*store.Effect, error) {
	return g.ResolveEffect(ctx, &store.ResolveRequest{Key: key, To: to, By: by})
}

// ResolveEffect is Resolve with everything a resolution can say: a result for later duplicates
// of a committed effect, a note. A zero req.Now is the guard's clock. What the resolution
// commits reaches the guard's sinks. It is the one entry point for every surface that resolves:
// the CLI, the API of latch serve and its console, latch mcp-operator.
//
// A person resolves (docs/approvals.md#resolving): the name after the surface in req.By ("alice"
// in "http:alice"; all of a By without one). Nobody resolves their own attempt: a person who is
// the agent or the user of the attempt holding the record is refused self_resolution, names
// compared as the self-approval check compares them. When the action's approvers name roles,
// only their members resolve its effects (approver_not_entitled); required and verified apply
// to approvals only. Both are checked against the attempt that holds the record when it is
// read, and the write is refused if another attempt holds it by then. A surface that showed a
// person the record binds the resolution to what it showed (req.Holder, the attempt's action id;
// req.Updated, the record's UpdatedAt): a record that moved on since — a new attempt, another
// resolution, a late outcome — is refused store.ErrNotAmbiguous in the write's own transaction,
// so a person never resolves a record they were not shown. MayResolve answers the same
// question without writing. A refusal is a
// *store.ResolveError matching store.ErrResolveRefused, and writes nothing. A reconcile hook's
// resolution (req.Hook) is no person's and is not checked.
func (g *Guard) ResolveEffect(ctx context.Context, req *store.ResolveRequest) (*store.Effect, error) {
	r := *req
	if r.Now.IsZero() {
		r.Now = g.cfg.Now()
	}
	if !r.Hook {
		if err := g.mayResolve(ctx, &r); err != nil {
			return nil, wrapOp("", err)
		}
	}
	t0 := time.Now()
	e, err := g.store.Resolve(ctx, &r)
	g.obs.storeTransaction("resolve", t0, err)
	if err != nil {
		return nil, wrapOp("", err)
	}
	kinds := []string{store.EventEffectResolved}
	for _, ev := range r.Events {
		kinds = append(kinds, ev.Kind)
	}
	g.emitWritten(ctx, store.EventFilter{EffectKey: r.Key}, len(r.Events)+1, kinds...)
	return e, nil
}

// mayResolve refuses the person of r.By a resolution of their own attempt, or of an effect of an
// action whose approver roles they are not a member of (MayResolve), and binds r to the attempt
// checked (r.Holder). A request already bound to an attempt or an update (r.Holder, r.Updated:
// what a surface showed the person) is refused at once if the record has moved on since: the
// checks are then about the record the person decided on, and the store holds the write to it.
// It reads the record, the attempt's action_proposed event and, for an action with roles, the
// person's roles; it writes nothing. What it cannot decide (no such record, a name that cannot be
// kept) it leaves to the store, which refuses it.
func (g *Guard) mayResolve(ctx context.Context, r *store.ResolveRequest) error {
	if r.Check() != nil {
		return nil // the store refuses it invalid input
	}
	if _, ok := resolverName(r.By); !ok {
		return nil // the store refuses the resolver
	}
	eff, err := g.store.Effect(ctx, r.Key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil // the store refuses it not found
	case err != nil:
		return fmt.Errorf("resolve %s: %w", safetext.Quote(r.Key), err)
	}
	if err := store.CheckResolveBinding(r, eff); err != nil {
		return err
	}
	if err := g.MayResolve(ctx, eff, r.By); err != nil {
		return err
	}
	r.Holder = eff.ActionID
	return nil
}

// MayResolve says whether the person of by (a surface and a name, as in ResolveEffect's By:
// "console:alice") may resolve eff as it stands: nil, or the *store.ResolveError ResolveEffect
// would refuse them with — self_resolution (they are the agent or the user of the attempt that
// holds the record), approver_not_entitled, holder_unknown — or an error reading the store. A
// surface asks it to offer a person only the resolutions they may make; ResolveEffect asks it
// again when they make one. It reads the attempt's action_proposed event and, for an action
// whose approvers name roles, the person's roles; it writes nothing. A by whose name cannot be
// kept is not refused here: ResolveEffect's store refuses it.
func (g *Guard) MayResolve(ctx context.Context, eff *store.Effect, by string) error {
	name, ok := resolverName(by)
	if !ok {
		return nil
	}
	refuse := func(reason string) error {
		return &store.ResolveError{Key: eff.Key, Reason: reason, Attempt: eff.Attempt}
	}
	agent, user, found, err := g.proposer(ctx, eff.ActionID)
	switch {
	case err != nil:
		return fmt.Errorf("resolve %s: principal of attempt %d: %w", safetext.Quote(eff.Key), eff.Attempt, err)
	case !found:
		return refuse(store.ReasonHolderUnknown)
	case store.SameName(name, agent) || user != "" && store.SameName(name, user):
		return refuse(store.ReasonSelfResolution)
	}
	ok, err = g.entitled(ctx, g.current().ApproversFor(eff.Action), name)
	switch {
	case err != nil:
		return fmt.Errorf("resolve %s: %w", safetext.Quote(eff.Key), err)
	case !ok:
		return refuse(store.ReasonNotEntitled)
	}
	return nil
}

// resolverName is the person of a resolution's by: the name after the surface ("alice" in
// "http:alice"; all of a by without one), normalized as approvers are; ok is false for a name
// that cannot be kept.
func resolverName(by string) (string, bool) {
	name := by
	if _, after, ok := strings.Cut(by, ":"); ok {
		name = after
	}
	name, err := store.NormalizeApprover(name)
	return name, err == nil
}

// proposer returns the agent and user that proposed the action actionID, as its action_proposed
// event recorded them; found is false when the store holds no such event (pruned).
func (g *Guard) proposer(ctx context.Context, actionID string) (agent, user string, found bool, err error) {
	evs, err := g.store.Events(ctx, store.EventFilter{ActionID: actionID})
	if err != nil {
		return "", "", false, err
	}
	for _, e := range evs {
		if e.Kind != store.EventActionProposed || e.ActionID != actionID {
			continue
		}
		var p struct {
			Agent string `json:"agent"`
			User  string `json:"user"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return "", "", false, fmt.Errorf("event %d: %w", e.ID, err)
		}
		return p.Agent, p.User, true, nil
	}
	return "", "", false, nil
}

// emitWritten hands the sinks the last n events of the given kinds among those f selects, read
// back with their store ids: an operator write (an answer, a resolution) does not return them.
func (g *Guard) emitWritten(ctx context.Context, f store.EventFilter, n int, kinds ...string) {
	if g.sinks == nil {
		return
	}
	evs, err := g.store.Events(ctx, f)
	if err != nil {
		g.log.Warn("latch: events for the sinks not read back", "err", err)
		return
	}
	var out []store.Event
	for i := len(evs) - 1; i >= 0 && len(out) < n; i-- {
		if slices.Contains(kinds, evs[i].Kind) {
			out = append(out, *evs[i])
		}
	}
	slices.Reverse(out)
	g.emit(ctx, nil, out)
}
