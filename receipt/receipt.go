// Package receipt defines the receipt document every decided call leaves behind (docs/guarantees.md#receipts), the
// hash chain that links receipts together, and Verify, which walks a chain and names every break.
//
// A receipt's hash covers its whole canonical document, seq and prev_hash included, so an edit
// shows up as content_altered at that seq, a deleted row as missing, and a rewritten row whose
// hash was recomputed as link_broken at its successor. The chain detects alteration, not
// authorship: someone who can rewrite every row and the head can forge a consistent chain.
package receipt

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/latchkit/latch/canon"
)

// Schema is the schema tag of every receipt document this version writes. Version 2 added kind
// and the state a record leaves behind (effect, approval, delegation); version 3 added a call's
// envelope: budget_charges, task, scope_hash and authority.break_glass; version 4 added
// approval_edit, what an approver changed of the call before approving it, and the redacted
// argument: a value the policy redacts is recorded as a salted commitment (Redacted), in
// arguments and in approval_edit.requested_arguments alike. Documents of every
// earlier version still verify and parse (SchemaV1, SchemaV2, SchemaV3).
const Schema = "latch.receipt/v4"

// SchemaV3 is the schema tag of the receipts written before approvers could edit a call: they
// have no approval_edit.
const SchemaV3 = "latch.receipt/v3"

// SchemaV2 is the schema tag of the receipts written before a call's envelope was recorded:
// they have no budget_charges, task, scope_hash or authority.break_glass.
const SchemaV2 = "latch.receipt/v2"

// SchemaV1 is the schema tag of the receipts written before kinds existed: every one of them is
// the receipt of a call.
const SchemaV1 = "latch.receipt/v1"

// GenesisHash is the prev_hash of receipt 1.
const GenesisHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// TimeFormat is the format of every timestamp in a receipt: RFC 3339, UTC, milliseconds, Z.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Result values (docs/guarantees.md#results).
const (
	Committed = "committed"
	Failed    = "failed"
	Ambiguous = "ambiguous"
	Denied    = "denied"
	Blocked   = "blocked"
	Observed  = "observed"
)

// Principal is who proposed the call, as recorded.
type Principal struct {
	Agent  string
	User   string
	Issuer string
}

// Authority names the grant (and delegation) that allowed the call.
type Authority struct {
	GrantID      string
	DelegationID string
	// BreakGlass is the break-glass envelope the delegation was opened in, when the call ran
	// under a break-glass grant; "" otherwise.
	BreakGlass string
}

// BudgetCharge is one budget charge a call's reservation made: Amount of Metric against
// Budget, whose limit is Limit over a rolling Window (an ISO 8601 duration such as "P1D").
// Budget is the budget's id: a grant's id, or the action's per-principal budget.
type BudgetCharge struct {
	Budget string `json:"budget"`
	Metric string `json:"metric"`
	Amount int64  `json:"amount"`
	Limit  int64  `json:"limit"`
	Window string `json:"window"`
}

// ApprovalEdit is what the approvers of a call changed of it before approving it
// (docs/approvals.md#approve-with-edits): the call ran with the receipt's arguments and
// action_hash, and asked with RequestedArguments, whose action hash was RequestedActionHash.
// EditedBy names each approver who edited, as method:name, in the order they did.
type ApprovalEdit struct {
	RequestedActionHash string
	RequestedArguments  json.RawMessage // canonical JSON object
	EditedBy            []string
}

// WouldHave is what enforcement would have done, recorded in observe mode. Its JSON is the
// would_have member of the receipt document — decision, reason and effect, an empty one null —
// wherever it is encoded (latch serve's answer to an observed begin too), so that one object
// has one shape.
type WouldHave struct {
	Decision string `json:"decision"` // allow | approve | deny
	Reason   string `json:"reason"`   // the decision reason
	Effect   string `json:"effect"`   // "" (no effect key), "reserved", or the refusal: committed, in_progress, ambiguous, attempts_exhausted
}

// MarshalJSON writes w as the receipt document writes it: every member present, an empty one
// null.
func (w WouldHave) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Decision *string `json:"decision"`
		Effect   *string `json:"effect"`
		Reason   *string `json:"reason"`
	}{orNull(w.Decision), orNull(w.Effect), orNull(w.Reason)})
}

// orNull is s, or nil (JSON null) when empty.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Receipt is one receipt document (docs/guarantees.md#fields). Empty strings are written as null; Seq and
// PrevHash are set by Seal when the receipt is appended to a chain.
type Receipt struct {
	ReceiptID        string
	Seq              int64
	PrevHash         string
	ActionID         string
	Action           string
	ActionHash       string
	Arguments        json.RawMessage // canonical JSON object
	Resource         string
	Principal        Principal
	Environment      string
	Decision         string
	DecisionReason   string
	Authority        *Authority
	ApprovalID       string
	Approver         string
	EffectKey        string
	Attempt          int
	IdempotencyToken string
	Result           string
	Error            string
	StartedAt        time.Time
	FinishedAt       time.Time
	PolicyHash       string
	PolicyVersion    string
	Mode             string
	WouldHave        *WouldHave

	// BudgetCharges are the budget charges the call's reservation made, in the order they
	// were checked; nil when it made none (schema v3).
	BudgetCharges []BudgetCharge
	// Task is the task id the call carried; "" when none. It is not part of the action hash.
	Task string
	// ScopeHash is the hash of the scope the call's resource was checked against; "" when
	// the call was not scope-checked. The scope itself is never recorded.
	ScopeHash string
	// ApprovalEdit is what an approver changed of the call before approving it; nil when the
	// call ran as it asked (schema v4).
	ApprovalEdit *ApprovalEdit

	// Kind says what the record is (docs/guarantees.md#record-kinds): "" or KindCall for the
	// receipt of a call, or the state change it chains.
	Kind string
	// Effect, Approval and Delegation are the records a state change leaves behind, as the
	// chain asserts them; nil when the record changes none of them.
	Effect     *EffectState
	Approval   *ApprovalState
	Delegation *DelegationState
	// Prune is what a prune record says; Hold the legal hold a hold or hold_released record
	// places or releases. nil on every other record.
	Prune *PruneState
	Hold  *HoldState
	// By and Note are who made a state change (a resolver, a revoker, a delegator) and what
	// they wrote; an approval answer's approver is Approver.
	By   string
	Note string
}

// Sealed is a receipt as a chain stores it: its seq, its hash and its canonical document.
type Sealed struct {
	Seq  int64
	Hash string
	Doc  []byte
	// Index is what the store keeps of the receipt in columns of their own, outside the hashed
	// document, when the store read them for a chain walk (store.ChainReader); nil otherwise.
	// Verify checks each of them against the document.
	Index *Index
}

// Index is what a store keeps of a receipt beside its document, in columns that lookups use (by
// receipt, action, effect key, approval, result and time). The hash does not cover them: an edit
// to one would hide a receipt from a lookup while the chain still verified, so Verify checks them
// against the document they were copied from.
type Index struct {
	ReceiptID  string
	ActionID   string
	Action     string
	EffectKey  string
	ApprovalID string
	Result     string
	FinishedAt int64 // Unix nanoseconds; 0 when the receipt has no finished_at
}

// Head is the chain head a store keeps beside the receipts.
type Head struct {
	Seq  int64
	Hash string
}

// Seal sets r's seq and prev_hash (and its kind, KindCall when empty) and returns the sealed receipt: its canonical document and
// the hash over that document.
func Seal(r *Receipt, seq int64, prevHash string) (Sealed, error) {
	if seq < 1 {
		return Sealed{}, fmt.Errorf("seal receipt: seq %d < 1", seq)
	}
	r.Seq, r.PrevHash, r.Kind = seq, prevHash, KindOf(r.Kind)
	b, err := r.canonical()
	if err != nil {
		return Sealed{}, fmt.Errorf("seal receipt %d: %w", seq, err)
	}
	return Sealed{Seq: seq, Hash: canon.Sum(b), Doc: b}, nil
}

// canonical writes the receipt's canonical document directly: its keys are fixed, so they are
// written in RFC 8785 order (every key is ASCII, so UTF-16 order is byte order) without building
// the map document() builds. TestCanonicalMatchesMarshal holds the two to the same bytes.
func (r *Receipt) canonical() ([]byte, error) {
	call := IsCall(r.Kind)
	args := []byte("{}")
	if call && len(r.Arguments) > 0 {
		var err error
		if args, err = canon.Canonicalize(r.Arguments); err != nil {
			return nil, fmt.Errorf("receipt arguments: %w", err)
		}
	}
	var requested []byte
	if e := r.ApprovalEdit; call && e != nil {
		var err error
		if requested, err = canon.Canonicalize(e.RequestedArguments); err != nil {
			return nil, fmt.Errorf("receipt approval_edit requested_arguments: %w", err)
		}
	}
	// A receipt of a call is some 1.5 KB besides its arguments: one allocation, no growth.
	w := docWriter{b: make([]byte, 0, 2048+len(args)+len(requested))}
	w.open()
	if call {
		w.str("action", r.Action)
	} else {
		w.opt("action", r.Action)
	}
	if call {
		w.str("action_hash", r.ActionHash)
		w.str("action_id", r.ActionID)
	}
	if r.Approval != nil {
		w.key("approval")
		w.open()
		w.opt("approver", r.Approval.Approver)
		w.str("status", r.Approval.Status)
		w.close()
	}
	if call {
		if e := r.ApprovalEdit; e != nil {
			w.key("approval_edit")
			w.open()
			w.strs("edited_by", e.EditedBy)
			w.str("requested_action_hash", e.RequestedActionHash)
			w.raw("requested_arguments", requested)
			w.close()
		} else {
			w.null("approval_edit")
		}
	}
	w.opt("approval_id", r.ApprovalID)
	w.opt("approver", r.Approver)
	if call {
		w.raw("arguments", args)
	}
	if r.Attempt > 0 {
		w.int("attempt", int64(r.Attempt))
	} else {
		w.null("attempt")
	}
	if call {
		if r.Authority != nil {
			w.key("authority")
			w.open()
			w.opt("break_glass", r.Authority.BreakGlass)
			w.opt("delegation_id", r.Authority.DelegationID)
			w.opt("grant_id", r.Authority.GrantID)
			w.close()
		} else {
			w.null("authority")
		}
	}
	if call {
		w.charges(r.BudgetCharges)
	}
	if r.By != "" {
		w.str("by", r.By)
	}
	if call {
		w.str("decision", r.Decision)
		w.opt("decision_reason", r.DecisionReason)
	}
	if d := r.Delegation; d != nil {
		w.key("delegation")
		w.open()
		w.opt("created_by", d.CreatedBy)
		w.str("delegation_id", d.ID)
		w.opt("grant_hash", d.GrantHash)
		w.opt("parent", d.Parent)
		w.opt("revoked_by", d.RevokedBy)
		w.close()
	}
	if e := r.Effect; e != nil {
		w.key("effect")
		w.open()
		w.int("attempt", int64(e.Attempt))
		w.bool("conflict", e.Conflict)
		w.opt("holder", e.Holder)
		w.opt("resolved_by", e.ResolvedBy)
		w.opt("result_hash", e.ResultHash)
		w.str("state", e.State)
		w.close()
	}
	w.opt("effect_key", r.EffectKey)
	if call {
		w.str("environment", r.Environment)
	}
	w.opt("error", r.Error)
	w.opt("finished_at", stampText(r.FinishedAt))
	if h := r.Hold; h != nil {
		w.key("hold")
		w.open()
		w.int("from", h.From)
		w.str("hold_id", h.ID)
		w.bool("released", h.Released)
		w.int("to", h.To)
		w.close()
	}
	if call {
		w.opt("idempotency_token", r.IdempotencyToken)
	}
	w.str("kind", KindOf(r.Kind))
	if call {
		w.str("mode", r.Mode)
	}
	if r.Note != "" {
		w.str("note", r.Note)
	}
	if call {
		w.opt("policy_hash", r.PolicyHash)
		w.opt("policy_version", r.PolicyVersion)
	}
	w.str("prev_hash", r.PrevHash)
	if call {
		w.key("principal")
		w.open()
		w.opt("agent", r.Principal.Agent)
		w.opt("issuer", r.Principal.Issuer)
		w.opt("user", r.Principal.User)
		w.close()
	}
	if p := r.Prune; p != nil {
		w.key("prune")
		w.open()
		w.int("carried", p.Carried)
		w.opt("carried_hash", p.CarriedHash)
		w.opt("checkpoint_key", p.CheckpointKey)
		w.opt("checkpoint_signed_at", p.CheckpointSignedAt)
		w.int("removed", p.Removed)
		w.int("start", p.Start)
		w.str("start_hash", p.StartHash)
		w.close()
	}
	w.str("receipt_id", r.ReceiptID)
	if call {
		w.opt("resource", r.Resource)
	}
	w.str("result", r.Result)
	w.str("schema", Schema)
	if call {
		w.opt("scope_hash", r.ScopeHash)
	}
	w.int("seq", r.Seq)
	if call {
		w.opt("started_at", stampText(r.StartedAt))
		w.opt("task", r.Task)
	}
	if call && r.WouldHave != nil {
		w.key("would_have")
		w.open()
		w.opt("decision", r.WouldHave.Decision)
		w.opt("effect", r.WouldHave.Effect)
		w.opt("reason", r.WouldHave.Reason)
		w.close()
	}
	w.close()
	if w.err != nil {
		return nil, w.err
	}
	return w.b, nil
}

// charges writes budget_charges: null when there are none, else one object per charge.
func (w *docWriter) charges(cs []BudgetCharge) {
	if len(cs) == 0 {
		w.null("budget_charges")
		return
	}
	w.key("budget_charges")
	w.b = append(w.b, '[')
	for i, c := range cs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.open()
		w.int("amount", c.Amount)
		w.str("budget", c.Budget)
		w.int("limit", c.Limit)
		w.str("metric", c.Metric)
		w.str("window", c.Window)
		w.close()
	}
	w.b = append(w.b, ']')
	w.first = false
}

func stampText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeFormat)
}

// docWriter appends one canonical JSON object whose keys the caller gives in sorted order.
type docWriter struct {
	b     []byte
	first bool
	err   error
}

func (w *docWriter) open()  { w.b = append(w.b, '{'); w.first = true }
func (w *docWriter) close() { w.b = append(w.b, '}'); w.first = false }

func (w *docWriter) key(k string) {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *docWriter) str(k, v string) {
	w.key(k)
	var err error
	if w.b, err = canon.AppendString(w.b, v); err != nil && w.err == nil {
		w.err = fmt.Errorf("receipt %s: %w", k, err)
	}
}

// opt writes v, or null when v is empty.
func (w *docWriter) opt(k, v string) {
	if v == "" {
		w.null(k)
		return
	}
	w.str(k, v)
}

func (w *docWriter) null(k string) { w.key(k); w.b = append(w.b, "null"...) }

// strs writes a list of strings.
func (w *docWriter) strs(k string, l []string) {
	w.key(k)
	w.b = append(w.b, '[')
	for i, v := range l {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		var err error
		if w.b, err = canon.AppendString(w.b, v); err != nil && w.err == nil {
			w.err = fmt.Errorf("receipt %s: %w", k, err)
		}
	}
	w.b = append(w.b, ']')
}

func (w *docWriter) raw(k string, v []byte) { w.key(k); w.b = append(w.b, v...) }

func (w *docWriter) bool(k string, v bool) {
	w.key(k)
	if v {
		w.b = append(w.b, "true"...)
	} else {
		w.b = append(w.b, "false"...)
	}
}

func (w *docWriter) int(k string, n int64) {
	w.key(k)
	if (n > canon.MaxSafeInt || n < -canon.MaxSafeInt) && w.err == nil {
		w.err = fmt.Errorf("receipt %s: integer %d out of safe range", k, n)
	}
	w.b = strconv.AppendInt(w.b, n, 10)
}

// Next returns the seq and prev_hash of the receipt that follows head.
func Next(head Head) (int64, string) {
	if head.Seq == 0 {
		return 1, GenesisHash
	}
	return head.Seq + 1, head.Hash
}

// wire is the JSON shape of a receipt document, for reading one back.
type wire struct {
	ReceiptID  string          `json:"receipt_id"`
	Seq        int64           `json:"seq"`
	PrevHash   string          `json:"prev_hash"`
	ActionID   string          `json:"action_id"`
	Action     string          `json:"action"`
	ActionHash string          `json:"action_hash"`
	Arguments  json.RawMessage `json:"arguments"`
	Resource   *string         `json:"resource"`
	Principal  struct {
		Agent  *string `json:"agent"`
		User   *string `json:"user"`
		Issuer *string `json:"issuer"`
	} `json:"principal"`
	Environment    string  `json:"environment"`
	Decision       string  `json:"decision"`
	DecisionReason *string `json:"decision_reason"`
	Authority      *struct {
		GrantID      *string `json:"grant_id"`
		DelegationID *string `json:"delegation_id"`
		BreakGlass   *string `json:"break_glass"`
	} `json:"authority"`
	BudgetCharges []BudgetCharge `json:"budget_charges"`
	ApprovalEdit  *struct {
		EditedBy            []string        `json:"edited_by"`
		RequestedActionHash string          `json:"requested_action_hash"`
		RequestedArguments  json.RawMessage `json:"requested_arguments"`
	} `json:"approval_edit"`
	Task             *string `json:"task"`
	ScopeHash        *string `json:"scope_hash"`
	ApprovalID       *string `json:"approval_id"`
	Approver         *string `json:"approver"`
	EffectKey        *string `json:"effect_key"`
	Attempt          *int    `json:"attempt"`
	IdempotencyToken *string `json:"idempotency_token"`
	Result           string  `json:"result"`
	Error            *string `json:"error"`
	StartedAt        *string `json:"started_at"`
	FinishedAt       *string `json:"finished_at"`
	PolicyHash       *string `json:"policy_hash"`
	PolicyVersion    *string `json:"policy_version"`
	Mode             string  `json:"mode"`
	WouldHave        *struct {
		Decision *string `json:"decision"`
		Reason   *string `json:"reason"`
		Effect   *string `json:"effect"`
	} `json:"would_have"`
	Schema     string           `json:"schema"`
	Kind       *string          `json:"kind"`
	Effect     *EffectState     `json:"effect"`
	Approval   *ApprovalState   `json:"approval"`
	Delegation *DelegationState `json:"delegation"`
	Prune      *PruneState      `json:"prune"`
	Hold       *HoldState       `json:"hold"`
	By         *string          `json:"by"`
	Note       *string          `json:"note"`
}

// callField names the first field present in w that only a call's receipt carries, or "" when
// there is none. Seal writes none of them for a record of another kind, so a document that has
// one was not written by Seal and would not read back the same.
func (w *wire) callField() string {
	p := w.Principal
	switch {
	case w.ActionID != "":
		return "action_id"
	case w.ActionHash != "":
		return "action_hash"
	case len(w.Arguments) > 0 && string(w.Arguments) != "null":
		return "arguments"
	case w.Resource != nil:
		return "resource"
	case p.Agent != nil || p.User != nil || p.Issuer != nil:
		return "principal"
	case w.Environment != "":
		return "environment"
	case w.Decision != "":
		return "decision"
	case w.DecisionReason != nil:
		return "decision_reason"
	case w.Authority != nil:
		return "authority"
	case w.IdempotencyToken != nil:
		return "idempotency_token"
	case w.StartedAt != nil:
		return "started_at"
	case w.PolicyHash != nil:
		return "policy_hash"
	case w.PolicyVersion != nil:
		return "policy_version"
	case w.Mode != "":
		return "mode"
	case w.WouldHave != nil:
		return "would_have"
	case w.BudgetCharges != nil:
		return "budget_charges"
	case w.Task != nil:
		return "task"
	case w.ScopeHash != nil:
		return "scope_hash"
	case w.ApprovalEdit != nil:
		return "approval_edit"
	}
	return ""
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func parseStamp(p *string) (time.Time, error) {
	if p == nil {
		return time.Time{}, nil
	}
	return time.Parse(TimeFormat, *p)
}

// Parse reads a receipt document back into a Receipt.
func Parse(doc []byte) (*Receipt, error) {
	var w wire
	if err := json.Unmarshal(doc, &w); err != nil {
		return nil, fmt.Errorf("parse receipt: %w", err)
	}
	r := &Receipt{
		ReceiptID: w.ReceiptID, Seq: w.Seq, PrevHash: w.PrevHash, ActionID: w.ActionID, Action: w.Action,
		ActionHash: w.ActionHash, Arguments: w.Arguments, Resource: str(w.Resource),
		Principal:   Principal{Agent: str(w.Principal.Agent), User: str(w.Principal.User), Issuer: str(w.Principal.Issuer)},
		Environment: w.Environment, Decision: w.Decision, DecisionReason: str(w.DecisionReason),
		ApprovalID: str(w.ApprovalID), Approver: str(w.Approver), EffectKey: str(w.EffectKey),
		IdempotencyToken: str(w.IdempotencyToken), Result: w.Result, Error: str(w.Error),
		PolicyHash: str(w.PolicyHash), PolicyVersion: str(w.PolicyVersion), Mode: w.Mode,
		Kind: KindOf(str(w.Kind)), Effect: w.Effect, Approval: w.Approval, Delegation: w.Delegation,
		Prune: w.Prune, Hold: w.Hold, By: str(w.By), Note: str(w.Note),
		BudgetCharges: w.BudgetCharges, Task: str(w.Task), ScopeHash: str(w.ScopeHash),
	}
	if w.Attempt != nil {
		r.Attempt = *w.Attempt
	}
	if w.Authority != nil {
		r.Authority = &Authority{GrantID: str(w.Authority.GrantID), DelegationID: str(w.Authority.DelegationID),
			BreakGlass: str(w.Authority.BreakGlass)}
	}
	if e := w.ApprovalEdit; e != nil {
		r.ApprovalEdit = &ApprovalEdit{RequestedActionHash: e.RequestedActionHash, RequestedArguments: e.RequestedArguments,
			EditedBy: e.EditedBy}
	}
	if w.WouldHave != nil {
		r.WouldHave = &WouldHave{Decision: str(w.WouldHave.Decision), Reason: str(w.WouldHave.Reason), Effect: str(w.WouldHave.Effect)}
	}
	if !IsCall(r.Kind) {
		if field := w.callField(); field != "" {
			return nil, fmt.Errorf("parse receipt %d: a %s record carries %s, which only a call's receipt has", w.Seq, r.Kind, field)
		}
	}
	var err error
	if r.StartedAt, err = parseStamp(w.StartedAt); err != nil {
		return nil, fmt.Errorf("parse receipt %d: started_at: %w", w.Seq, err)
	}
	if r.FinishedAt, err = parseStamp(w.FinishedAt); err != nil {
		return nil, fmt.Errorf("parse receipt %d: finished_at: %w", w.Seq, err)
	}
	return r, nil
}
