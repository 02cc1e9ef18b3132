// Package jsonview is the one JSON shape of the records an operator reads — approval requests,
// effects, receipts, events, stats, the chain's verification, budgets and coverage — wherever latch shows them:
// the CLI's --json output, latch serve's routes and event stream, and the operator MCP
// server's tools all write these types (package internal/operator reads them), so that a field
// has the same name, the same meaning and the same null everywhere (docs/cli.md#json-shapes,
// docs/http.md). Every field is always present: an absent value is null, never a missing key.
// AnswerStatus is the one HTTP status of a refused answer, for the API and the web console
// alike.
package jsonview

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Stamp is a latch timestamp (RFC 3339, UTC, milliseconds, Z) for JSON: null for the zero time.
func Stamp(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(receipt.TimeFormat)
	return &s
}

// Str is a JSON string, null when empty.
func Str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Principal is who a call acts as.
type Principal struct {
	Agent *string `json:"agent"`
	User  *string `json:"user"`
}

// Approval is an approval request.
type Approval struct {
	ApprovalID string          `json:"approval_id"`
	Status     string          `json:"status"`
	Action     string          `json:"action"`
	ActionHash string          `json:"action_hash"`
	Arguments  json.RawMessage `json:"arguments"`
	// Display reads the arguments the policy gives display hints for as a person should read
	// them (a label, money in major units); presentation only, never part of the hash. Empty
	// when no hint applies.
	Display   []Display `json:"display"`
	Principal Principal `json:"principal"`
	Resource  *string   `json:"resource"`
	CreatedAt *string   `json:"created_at"`
	ExpiresAt *string   `json:"expires_at"`
	Approver  *string   `json:"approver"`
	// PreviousDenied is the request for the same action denied before this one was asked,
	// and PreviousDeniedBy who denied it (null when it was not asked again after a denial).
	PreviousDenied   *string `json:"previous_denied"`
	PreviousDeniedBy *string `json:"previous_denied_by"`
	// Precondition is the state of the action's target the request was stored on
	// (docs/governance.md#precondition-fingerprints): null when no precondition provider was
	// asked.
	Precondition *Precondition `json:"precondition"`
	// Answers are the answers given so far, oldest first; Required is how many distinct
	// grants the request needs and Grants how many it has (docs/approvals.md).
	Answers  []Answer `json:"answers"`
	Required int      `json:"required"`
	Grants   int      `json:"grants"`
	// Reminders is when the request is, or was, reminded about and escalated, and to whom
	// (docs/approvals.md#reminders-and-escalation): null when its action's approvers set
	// neither remind_after nor escalate_after.
	Reminders *Reminders `json:"reminders"`
	// Edit is what approvers changed of the request's arguments
	// (docs/approvals.md#approve-with-edits): null when nobody did. Arguments and ActionHash
	// are then what the request binds now, the edited ones.
	Edit *Edit `json:"edit"`
	// OnExpiry is what the request is written at its expiry if still pending
	// (docs/approvals.md#reminders-and-escalation): "expire", or "deny" (written denied, by
	// store.ExpiryApprover) — under the policy in force, or "deny" for a request that was.
	OnExpiry string `json:"on_expiry"`
}

// OnExpiryOf is what a is, or was, written at its expiry if still pending, under pol (nil: no
// policy, so expire): policy.OnExpiryDeny or policy.OnExpiryExpire.
func OnExpiryOf(pol *policy.Policy, a *store.Approval) string {
	if a.DeniedAtExpiry() || pol.ApproversFor(a.ActionName).DeniesAtExpiry() {
		return policy.OnExpiryDeny
	}
	return policy.OnExpiryExpire
}

// Reminders is the reminder and escalation schedule of one approval request and what of it
// the sweeper has recorded. Each time is null when the policy sets no such step (…_at) or it
// was not recorded (…ed_at): a request answered or expired before a step came keeps it null.
type Reminders struct {
	RemindAt    *string `json:"remind_at"`    // created_at + remind_after
	RemindedAt  *string `json:"reminded_at"`  // when a sweeper reminded the approvers
	EscalateAt  *string `json:"escalate_at"`  // created_at + escalate_after
	EscalatedAt *string `json:"escalated_at"` // when a sweeper sent the escalation
	// EscalateTo is who the request escalates to; those named may answer from escalate_at on,
	// whether or not a sweeper has sent the escalation yet. Null without escalate_after.
	EscalateTo *EscalateTo `json:"escalate_to"`
}

// EscalateTo is an escalation's roles and people (each empty, never null, when none).
type EscalateTo struct {
	Roles  []string `json:"roles"`
	People []string `json:"people"`
}

// RemindersOf is the reminder schedule of a under pol, with the reminder and escalation events
// among evs (the request's events; nil when not read) recorded; nil when the action's approvers
// remind and escalate not.
func RemindersOf(pol *policy.Policy, a *store.Approval, evs []*store.Event) *Reminders {
	rule := pol.ApproversFor(a.ActionName)
	if rule.RemindAfter == 0 && rule.EscalateAfter == 0 {
		return nil
	}
	r := &Reminders{}
	if rule.RemindAfter > 0 {
		r.RemindAt = Stamp(a.CreatedAt.Add(rule.RemindAfter))
	}
	if rule.EscalateAfter > 0 && rule.EscalateTo != nil {
		r.EscalateAt = Stamp(a.CreatedAt.Add(rule.EscalateAfter))
		r.EscalateTo = &EscalateTo{Roles: append([]string{}, rule.EscalateTo.Roles...), People: append([]string{}, rule.EscalateTo.People...)}
	}
	for _, e := range evs {
		if e.ApprovalID != a.ID {
			continue
		}
		switch e.Kind {
		case store.EventApprovalReminded:
			r.RemindedAt = Stamp(e.Time)
		case store.EventApprovalEscalated:
			r.EscalatedAt = Stamp(e.Time)
		}
	}
	return r
}

// Edit is what approvers changed of a request: what it asked for, and each edit.
type Edit struct {
	RequestedActionHash string          `json:"requested_action_hash"`
	RequestedArguments  json.RawMessage `json:"requested_arguments"`
	Edits               []EditStep      `json:"edits"`
}

// EditStep is one approver's edit: who, how authenticated, when, and each argument it changed.
type EditStep struct {
	Approver  string                `json:"approver"`
	Method    string                `json:"method"`
	At        *string               `json:"at"`
	Arguments map[string]EditChange `json:"arguments"`
}

// EditChange is one argument an edit changed, from the value it had to the one it took.
type EditChange struct {
	From json.RawMessage `json:"from"`
	To   json.RawMessage `json:"to"`
}

// NewEdit is the edit member of a request for action edited by edits (store.EditsOf); nil
// when none. The requested arguments (and any changed value, should a policy ever let a
// redacted argument change) are redacted as pol says.
func NewEdit(pol *policy.Policy, action string, edits []store.EditRecord) *Edit {
	if len(edits) == 0 {
		return nil
	}
	out := &Edit{RequestedActionHash: edits[0].From, RequestedArguments: pol.RedactJSON(action, edits[0].Requested), Edits: make([]EditStep, len(edits))}
	redacted := pol.Redactions(action)
	for i, e := range edits {
		st := EditStep{Approver: e.By, Method: e.Method, At: Stamp(e.At), Arguments: make(map[string]EditChange, len(e.Changes))}
		for _, c := range e.Changes {
			ch := EditChange{From: c.From, To: c.To}
			if _, ok := redacted[c.Argument]; ok {
				ch = EditChange{From: maskedJSON(pol, action, c.Argument, c.From), To: maskedJSON(pol, action, c.Argument, c.To)}
			}
			st.Arguments[c.Argument] = ch
		}
		out.Edits[i] = st
	}
	return out
}

// maskedJSON is the canonical JSON value v of argument arg as pol shows it.
func maskedJSON(pol *policy.Policy, action, arg string, v json.RawMessage) json.RawMessage {
	x, err := canon.Parse(v)
	if err != nil {
		return json.RawMessage(`"` + policy.Mask + `"`)
	}
	b, err := canon.Marshal(pol.RedactValue(action, arg, x))
	if err != nil {
		return json.RawMessage(`"` + policy.Mask + `"`)
	}
	return b
}

// Precondition is the fingerprint of a target's state and when the state was read: what an
// approval is spent on only while the state still has it.
type Precondition struct {
	Hash       *string `json:"hash"` // null: the target had no state to read
	CapturedAt *string `json:"captured_at"`
}

// PreconditionOf is the fingerprint a request was stored with, nil when none was read.
func PreconditionOf(a *store.Approval) *Precondition {
	if a.PreconditionAt.IsZero() && a.PreconditionHash == "" {
		return nil
	}
	return &Precondition{Hash: Str(a.PreconditionHash), CapturedAt: Stamp(a.PreconditionAt)}
}

// Answer is one person's answer to an approval request.
type Answer struct {
	Approver   string  `json:"approver"`
	Method     string  `json:"method"` // one of store.Methods: cli, token, jwt, session, proxy or slack
	Verified   bool    `json:"verified"`
	Grant      bool    `json:"grant"`
	Note       *string `json:"note"`
	AnsweredAt *string `json:"answered_at"`
}

// Display is one argument read through the policy's display hints.
type Display struct {
	Name  string  `json:"name"`
	Label *string `json:"label"`
	Raw   string  `json:"raw"`   // the value as canonical JSON, exactly as hashed; a redacted argument's masked form
	Human *string `json:"human"` // "€2,500.00 (250000 minor units)", null when no hint reads it
}

// ActionDoc is the part of a canonical action document (docs/guarantees.md#the-canonical-form)
// an operator reads.
type ActionDoc struct {
	Name        string          `json:"name"`
	Arguments   json.RawMessage `json:"arguments"`
	Resource    *string         `json:"resource"`
	Principal   Principal       `json:"principal"`
	Environment string          `json:"environment"`
}

// ActionOf reads the action an approval request is bound to, falling back to the request's own
// columns when the document is absent or unreadable.
func ActionOf(a *store.Approval) ActionDoc {
	var d ActionDoc
	if len(a.Action) > 0 && json.Unmarshal(a.Action, &d) == nil {
		if d.Name == "" {
			d.Name = a.ActionName
		}
		return d
	}
	return ActionDoc{Name: a.ActionName, Principal: Principal{Agent: Str(a.Agent), User: Str(a.User)}}
}

// ShownActionOf is [ActionOf] as a person may be shown it: its arguments redacted as pol says
// (pol may be nil: nothing redacted).
func ShownActionOf(pol *policy.Policy, a *store.Approval) ActionDoc {
	d := ActionOf(a)
	d.Arguments = pol.RedactJSON(d.Name, d.Arguments)
	return d
}

// ShownActionDocument is a's canonical action document as a person may be shown it: its
// arguments redacted as pol says, and whether any was. A redacted document is not the one the
// action hash is computed over (that one holds the full values); a document that does not
// read as an object is returned as "{}" when pol redacts anything of the action.
func ShownActionDocument(pol *policy.Policy, a *store.Approval) (json.RawMessage, bool) {
	if len(pol.Redactions(a.ActionName)) == 0 {
		return a.Action, false
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(a.Action, &doc) != nil {
		return json.RawMessage("{}"), true
	}
	shown := pol.RedactJSON(a.ActionName, doc["arguments"])
	if string(shown) == string(doc["arguments"]) {
		return a.Action, false
	}
	doc["arguments"] = shown
	b, err := json.Marshal(doc)
	if err == nil {
		b, err = canon.Canonicalize(b)
	}
	if err != nil {
		return json.RawMessage("{}"), true
	}
	return b, true
}

// Required is how many distinct grants a decides on — the most of what its answers recorded
// and what pol's approvers of its action say, and at least 1 — and whether only verified
// answers count. pol may be nil.
func Required(pol *policy.Policy, a *store.Approval) (int, bool) {
	if pol == nil {
		return max(a.Required, 1), false
	}
	rule := pol.ApproversFor(a.ActionName)
	return max(a.Required, rule.Required, 1), rule.Verified
}

// NewApproval is a as an operator reads it, its arguments read through pol's display hints
// and redacted as pol says (pol may be nil: no hints, nothing redacted).
func NewApproval(a *store.Approval, pol *policy.Policy) Approval {
	d := ActionOf(a)
	args := d.Arguments
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	n, verified := Required(pol, a)
	out := Approval{
		ApprovalID: a.ID, Status: string(a.Status), Action: d.Name, ActionHash: a.ActionHash,
		Arguments: pol.RedactJSON(d.Name, args), Display: Displayed(pol, d.Name, args), Principal: d.Principal, Resource: d.Resource,
		CreatedAt: Stamp(a.CreatedAt), ExpiresAt: Stamp(a.ExpiresAt), Approver: Str(a.Approver),
		PreviousDenied: Str(a.PreviousDenied), PreviousDeniedBy: Str(a.PreviousDeniedBy), Precondition: PreconditionOf(a),
		Answers: make([]Answer, len(a.Answers)), Required: n, Grants: store.Grants(a.Answers, verified),
		Reminders: RemindersOf(pol, a, nil), OnExpiry: OnExpiryOf(pol, a),
	}
	for i, x := range a.Answers {
		out.Answers[i] = Answer{Approver: x.Name, Method: x.Method, Verified: x.Verified, Grant: x.Grant,
			Note: Str(x.Note), AnsweredAt: Stamp(x.At)}
	}
	return out
}

// Displayed reads the canonical arguments of action through pol's display hints: one entry
// per argument a hint applies to (empty, never nil, when none does or pol is nil).
func Displayed(pol *policy.Policy, action string, canonical json.RawMessage) []Display {
	out := []Display{}
	if pol == nil || pol.Actions[action] == nil {
		return out
	}
	v, err := canon.Parse(canonical)
	args, ok := v.(map[string]any)
	if err != nil || !ok {
		return out
	}
	for _, av := range pol.View(action, args) {
		if av.Label != "" || av.Human != "" {
			out = append(out, Display{Name: av.Name, Label: Str(av.Label), Raw: av.Raw, Human: Str(av.Human)})
		}
	}
	return out
}

// Effect is an effect record.
type Effect struct {
	EffectKey      string  `json:"effect_key"`
	State          string  `json:"state"`
	Attempt        int     `json:"attempt"`
	Action         string  `json:"action"`
	ActionID       string  `json:"action_id"`
	ActionHash     string  `json:"action_hash"`
	LeaseExpiresAt *string `json:"lease_expires_at"`
	// LeaseLapsed: the holder's lease has passed and it has not reported (executing, or made
	// ambiguous by a contender or the sweeper): it never finished, or may still be acting.
	LeaseLapsed bool            `json:"lease_lapsed"`
	Error       *string         `json:"error"`
	Conflict    *string         `json:"conflict"`
	Result      json.RawMessage `json:"result"` // the stored result; null when none
	ResolvedBy  *string         `json:"resolved_by"`
	Note        *string         `json:"note"`
	CreatedAt   *string         `json:"created_at"`
	UpdatedAt   *string         `json:"updated_at"`
}

// NewEffect is e as an operator reads it at now.
func NewEffect(e *store.Effect, now time.Time) Effect {
	res := e.Result
	if len(res) == 0 {
		res = json.RawMessage("null")
	}
	return Effect{
		EffectKey: e.Key, State: string(e.State), Attempt: e.Attempt, Action: e.Action,
		ActionID: e.ActionID, ActionHash: e.ActionHash, LeaseExpiresAt: Stamp(e.LeaseExpiresAt),
		LeaseLapsed: LeaseLapsed(e, now),
		Error:       Str(e.Error), Conflict: Str(e.Conflict), Result: res, ResolvedBy: Str(e.ResolvedBy), Note: Str(e.Note),
		CreatedAt: Stamp(e.CreatedAt), UpdatedAt: Stamp(e.UpdatedAt),
	}
}

// LeaseLapsed reports whether e's holder let its lease pass without reporting: executing past
// the lease, or ambiguous while the holder may still act (written so by a contender or the
// sweeper rather than by an outcome).
func LeaseLapsed(e *store.Effect, now time.Time) bool {
	return store.LeaseLapsed(e, now) || e.State == store.Ambiguous && store.HolderMayAct(e)
}

// AnswerStatus is the HTTP status of an answer the store refused with reason (a
// store.AnswerError's): 403 for a person who may not answer (self_approval,
// approver_not_entitled, approver_not_verified), 400 for an answer that cannot be kept
// (invalid_note, invalid_approver), 422 for an edit the policy does not allow
// (edit_not_editable, edit_widens, edit_invalid), 409 for a request no longer open to it
// (already answered, expired, edited meanwhile: edit_stale, and the rest).
func AnswerStatus(reason string) int {
	switch reason {
	case store.ReasonSelfApproval, store.ReasonNotEntitled, store.ReasonNotVerified:
		return http.StatusForbidden
	case "invalid_note", "invalid_approver":
		return http.StatusBadRequest
	case policy.ReasonEditNotEditable, policy.ReasonEditWidens, policy.ReasonEditInvalid:
		return http.StatusUnprocessableEntity
	}
	return http.StatusConflict
}
