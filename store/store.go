// Package store is the seam between latch's pipeline and the databases that hold its state, in
// the way database/sql/driver is the seam between database/sql and a driver.
//
// It holds three things: the records a backend keeps (effects, approvals, receipts, events), the
// Store interface whose every method is one atomic transaction, and the pure deciders every
// backend calls inside that transaction (PlanReserve, PlanRecord, PlanAnswer, PlanResolve,
// PlanExtend). A backend only reads the rows a decider needs, under its lock or with
// compare-and-set, and writes what the decider returned: the rules exist once, whatever the
// database. The conformance suite in store/storetest grades every backend against them.
//
// # Backends
//
// A backend registers a Driver for its URL schemes when its package is imported (Register, from
// an init function), and Open opens a store by its URL's scheme, as database/sql opens a
// database by driver name:
//
//	import _ "github.com/latchkit/latch/store/postgres" // postgres:// and postgresql://
//
//	st, err := store.Open(ctx, "postgres://db.internal/app?schema=latch", nil)
//
// Package sqlite registers sqlite:, and the root package latch imports it, so latch.Open works
// with no other import; package postgres registers postgres: and postgresql:. What a tool needs
// beyond opening a store is an optional capability of the Driver: a Scratcher makes throwaway
// stores (NewScratch), a Describer shows a URL in a log line (Describe). A write to a store opened
// read-only is ErrReadOnly on every backend.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"time"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
)

// State is the state of an effect record (docs/guarantees.md#effect-states).
type State string

// Effect states.
const (
	Executing State = "executing"
	Committed State = "committed"
	Failed    State = "failed"
	Ambiguous State = "ambiguous"
)

// Effect is the record of one real-world consequence, keyed by its effect key.
type Effect struct {
	Key            string
	State          State
	Attempt        int
	ActionID       string // the action id of the holder (the attempt that wrote the state)
	Action         string
	ActionHash     string
	LeaseExpiresAt time.Time
	Result         json.RawMessage // for committed
	Error          string
	ResolvedBy     string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// Arguments are the canonical arguments of the attempt that holds the record (nil for a
	// record written before the store kept them).
	Arguments json.RawMessage
	// Note is what the person who resolved the record wrote (latch resolve --note).
	Note string
	// Conflict is set when the holder's own outcome arrived after the record was resolved
	// otherwise: the resolution stands and Conflict says what the holder reported. A failed
	// record with a conflict is not renewed until a person resolves it again.
	Conflict string
}

// HolderMayAct reports whether the attempt that holds e may still be acting at now: its record
// is executing (under a live or a lapsed lease), or it was made ambiguous because its lease
// lapsed and the holder has not reported since (LeaseExpiresAt then keeps the lapsed lease).
// Once the holder reports, or for an ambiguity the holder recorded itself, it cannot act any
// more: only then may a reconcile hook resolve the record failed.
func HolderMayAct(e *Effect) bool {
	if e == nil {
		return false
	}
	return e.State == Executing || e.State == Ambiguous && !e.LeaseExpiresAt.IsZero()
}

// LeaseLapsed reports whether e is executing under a lease that lapsed at or before now: its
// holder never finished, and the next reservation or resolution writes it ambiguous.
func LeaseLapsed(e *Effect, now time.Time) bool {
	return e != nil && e.State == Executing && !now.Before(e.LeaseExpiresAt)
}

// ApprovalStatus is the status of an approval request (docs/guarantees.md#approvals).
type ApprovalStatus string

// Approval statuses.
const (
	Pending  ApprovalStatus = "pending"
	Granted  ApprovalStatus = "granted"
	Denied   ApprovalStatus = "denied"
	Expired  ApprovalStatus = "expired"
	Consumed ApprovalStatus = "consumed"
)

// Approval is a request for a human decision, bound to the hash of one exact action.
type Approval struct {
	ID         string
	Status     ApprovalStatus
	ActionHash string
	Action     json.RawMessage // the canonical action document (docs/guarantees.md#the-canonical-form) the human sees
	ActionName string
	Agent      string // the requesting principal, for the self-approval check
	User       string
	PolicyHash string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	Approver   string
	AnsweredAt time.Time
	ConsumedBy string // the action id that spent it
	ConsumedAt time.Time
	Note       string // what the approver wrote with the answer (--note)
	// PreviousDenied is the request for the same action hash that was denied before this one
	// was asked ("" when the last answer to that action was not a denial, or there was none),
	// and PreviousDeniedBy who denied it: the human answering sees it was asked again.
	PreviousDenied   string
	PreviousDeniedBy string
	// Answers are the answers given so far, oldest first (docs/approvals.md): one per person.
	// A request answered before answers were kept has none, and its Approver.
	Answers []Answer
	// Required is how many distinct grants the request needed at its last answer; 0 before any
	// answer (the policy's approvers say: Policy.ApproversFor).
	Required int
	// PreconditionHash is the fingerprint of the target's state when the request was stored
	// (docs/governance.md#precondition-fingerprints): "sha256:…", or "" when no precondition
	// provider applied. PreconditionAt is when that state was read (zero when none was). Both
	// are set when the request is stored and never change.
	PreconditionHash string
	PreconditionAt   time.Time
}

// Event is one entry of the append-only event log (docs/guarantees.md#events). ID is assigned by the store.
type Event struct {
	ID         int64
	Kind       string
	Time       time.Time
	ActionID   string
	EffectKey  string
	ApprovalID string
	Payload    json.RawMessage // a JSON object, or nil
}

// Event kinds.
const (
	EventActionProposed    = "action_proposed"
	EventPolicyEvaluated   = "policy_evaluated"
	EventApprovalRequested = "approval_requested"
	// EventApprovalReused: a call asked for a request while one for the same action was
	// pending, and was handed that one.
	EventApprovalReused  = "approval_reused"
	EventApprovalGranted = "approval_granted"
	// EventApprovalAnswered: one grant of several required was recorded; the request is still
	// pending (a deny, or the last required grant, is approval_denied or approval_granted).
	EventApprovalAnswered    = "approval_answered"
	EventApprovalDenied      = "approval_denied"
	EventApprovalConsumed    = "approval_consumed"
	EventApprovalInvalidated = "approval_invalidated"
	EventEffectReserved      = "effect_reserved"
	EventEffectRefused       = "effect_refused"
	EventExecutionCommitted  = "execution_committed"
	EventExecutionFailed     = "execution_failed"
	EventExecutionAmbiguous  = "execution_ambiguous"
	EventEffectResolved      = "effect_resolved"
	EventReconcileStarted    = "reconcile_started"
	EventReconcileResolved   = "reconcile_resolved"
	EventAuthorityResolved   = "authority_resolved"
	EventAuthorityDenied     = "authority_denied"
	EventDelegationCreated   = "delegation_created"
	EventDelegationRevoked   = "delegation_revoked"
	EventDelegationRejected  = "delegation_rejected"
	// EventClockSkewDetected: a store whose backend has its own clock (PostgreSQL) found the
	// host's clock past its threshold from the database's, at open or when a lease lapsed.
	EventClockSkewDetected = "clock_skew_detected"
	// EventOutcomeConflict: a holder's outcome arrived after its effect was resolved otherwise;
	// the resolution stands.
	EventOutcomeConflict = "outcome_conflict"
)

// Sentinel errors shared by every backend.
var (
	ErrNotFound      = errors.New("not found")
	ErrNoStore       = errors.New("store does not exist")
	ErrNotLatch      = errors.New("not a latch database")
	ErrSchemaTooNew  = errors.New("store schema is newer than this binary")
	ErrLeaseLost     = errors.New("lease no longer held")
	ErrNotAmbiguous  = errors.New("effect is not ambiguous")
	ErrAnswerRefused = errors.New("approval answer refused")
	// ErrResolveRefused: the person may not resolve the effect (a *ResolveError says why).
	ErrResolveRefused = errors.New("resolution refused")
	// ErrHolderMayAct refuses a reconcile hook's failed for an effect whose holder may still be
	// acting (see HolderMayAct): nothing turns a lapsed lease into a retry.
	ErrHolderMayAct = errors.New("its holder may still be acting")
	// ErrRecorded refuses a RecordRequest with Once set whose action already has a receipt:
	// its outcome was recorded before. Nothing is written.
	ErrRecorded = errors.New("outcome already recorded")
)

// AnswerError is returned when an approval cannot be answered. Reason is one of self_approval,
// expired, already_granted, already_denied, already_consumed, already_expired, invalid_approver,
// invalid_note, approver_not_entitled, approver_not_verified, already_answered, and for a grant
// with edits edit_not_editable, edit_widens, edit_invalid, edit_stale. Nothing is
// written for a refused answer, except that a request found expired is written expired.
type AnswerError struct {
	ID       string
	Reason   string
	Approval *Approval // the request as it now stands
	// Detail says more for people, when there is more to say (which argument an edit may not
	// change, and why); "" otherwise.
	Detail string
}

func (e *AnswerError) Error() string {
	if e.Detail != "" {
		return "answer approval " + safetext.Quote(e.ID) + ": " + e.Reason + ": " + e.Detail
	}
	return "answer approval " + safetext.Quote(e.ID) + ": " + e.Reason
}

// Is matches ErrAnswerRefused.
func (e *AnswerError) Is(target error) bool { return target == ErrAnswerRefused }

// ReserveRequest asks a store to reserve an effect key for one attempt, consuming the presented
// approval in the same transaction (docs/guarantees.md#atomicity).
type ReserveRequest struct {
	Now         time.Time
	ActionID    string
	Action      string
	ActionHash  string
	EffectKey   string          // "" when the call has no effect key and only an approval is consumed
	Arguments   json.RawMessage // the call's canonical arguments, kept on the effect record it reserves
	Lease       time.Duration
	MaxAttempts int    // 0 = no ceiling
	ApprovalID  string // "" when none was presented
	// DenyAtExpiry: the action's approvers.on_expiry is deny, so a pending request presented
	// after its expiry is written denied, not expired (PlanExpiry), and refused denied.
	DenyAtExpiry bool
	// Receipt is the draft written (result blocked) if the approval or the reservation is refused.
	Receipt *receipt.Receipt
	// Events are written with whatever the transaction writes (action_proposed, policy_evaluated…).
	Events []Event
	// RequestKey, when set, makes the reservation replayable (see PlanReplay): the caller's key
	// for this request, stored with the reservation, in its transaction. It needs an EffectKey,
	// and Agent and User name the principal the key belongs to.
	RequestKey string
	Agent      string
	User       string
	// KeyNamesEffect says EffectKey was rendered from RequestKey (an effect template with
	// {$request_key}): the key and the effect are one name, so a request under the key with
	// another action hash, by the same principal for the same effect, is decided as any call of
	// the effect is (key_conflict on a record of other arguments) rather than refused
	// request_key_other_action.
	KeyNamesEffect bool
	// Charges are the budget charges the reservation makes (see Charge), checked and written in
	// its transaction; the first that would exceed its limit refuses the reservation with
	// Refusal{Reason: "budget_exhausted", Charge: that charge}, and nothing is charged.
	Charges []Charge
	// Document is the call's canonical action document. It is required when ApprovalID names a
	// standing approval (IsStandingID): the use is checked against the standing approval's
	// bounds (CheckStandingUse) and spent in the reservation's transaction.
	Document json.RawMessage
	// ResourceRendered says the call's resource was rendered from its arguments by the policy's
	// template (the call named none): a standing approval then checks the arguments, which the
	// resource follows, and not the resource itself.
	ResourceRendered bool
}

// Refusal says why a reservation was refused. Reason is the snake_case code of receipts and
// errors: for approvals unknown, mismatch, consumed, denied, pending, expired; for effects
// committed, in_progress, ambiguous, attempts_exhausted, outcome_conflict (a failed record whose
// holder reported committed after the resolution), and key_conflict (the record holds an
// attempt of another action hash: the same consequence asked with other arguments).
type Refusal struct {
	Approval bool // the approval was refused (else the effect)
	Reason   string
	Detail   string
	// Charge is the budget charge that refused the reservation (Reason budget_exhausted).
	Charge *Charge
}

// ErrorPrefix starts every error message latch returns to a caller, once. A refused call's
// receipt error is the message its caller got, prefix included.
const ErrorPrefix = "latch: "

// Text is the refused caller's error message, which is also the refused call's receipt error.
func (r *Refusal) Text() string { return ErrorPrefix + r.Detail }

// ReserveResult is what a reservation did.
type ReserveResult struct {
	Reserved bool
	// Replayed is set when the request's key named a reservation that still holds the effect:
	// nothing was written, and Effect is that reservation (its action id, attempt and lease).
	Replayed bool
	Refusal  *Refusal
	Effect   *Effect // the effect record after the transaction (nil when no key or none exists)
	// Approval is the presented approval after the transaction (nil when none or unknown),
	// without its Answers and Required: a reservation reads only what it decides on.
	Approval *Approval
	// Standing is the presented standing approval after the transaction (nil when none or
	// unknown): with the use spent when the reservation holds.
	Standing *Standing
	Receipt  *receipt.Sealed
	Document *receipt.Receipt // the receipt written, as sealed (seq and prev_hash set); nil when none
	Events   []Event          // the events written, with their store-assigned ids (for sinks)
}

// RecordRequest writes the end of a call: for a holder, the effect's outcome; always, a receipt
// and the events — in one transaction (docs/guarantees.md#the-pipeline-of-one-call).
type RecordRequest struct {
	Now     time.Time
	Receipt *receipt.Receipt // result committed, failed, ambiguous, denied, blocked or observed
	Events  []Event
	// Holder transition, when EffectKey is set: executing → Outcome, compare-and-set on
	// (key, action id, attempt, executing).
	EffectKey string
	ActionID  string
	Attempt   int
	Outcome   State // Committed, Failed or Ambiguous
	Result    json.RawMessage
	Error     string
	// Once refuses the record with ErrRecorded, writing nothing, when a receipt of the
	// receipt's action id is already stored: an outcome reported from elsewhere (over the
	// network) may arrive twice, or at two processes at once. The check and the write are one
	// transaction, so of two such records exactly one is written.
	Once bool
}

// RecordResult is what recording did. Lost is set when the holder's outcome could not be
// written and says nothing about the record (the record is gone or held by another attempt):
// the receipt was written ambiguous. Late is set when the holder's lease had lapsed and a
// contender had made the record ambiguous, and the holder's outcome settled it. Conflict is set
// when someone resolved the holder's attempt otherwise meanwhile: the resolution stands, and
// Conflict says how the two differ.
type RecordResult struct {
	Lost     bool
	Late     bool
	Conflict string
	Effect   *Effect
	Receipt  receipt.Sealed
	Document *receipt.Receipt // the receipt written, as sealed (seq and prev_hash set)
	Events   []Event          // the events written, with their store-assigned ids (for sinks)
}

// AnswerRequest grants or denies an approval request (docs/approvals.md).
type AnswerRequest struct {
	Now      time.Time
	ID       string
	Grant    bool
	Approver string
	Note     string // optional, kept on the request and in the answer's event
	// Method is how the approver was authenticated, one of Methods; "" is MethodCLI.
	Method string
	// Verified: latch authenticated the approver (never with MethodCLI).
	Verified bool
	// Required is how many distinct people must grant before the request is granted; 0 is 1.
	// One deny denies. Guard.Answer sets it from the policy's approvers of the action.
	Required int
	// DenyAtExpiry: the action's approvers.on_expiry is deny, so an answer finding the request
	// expired writes it denied, not expired (PlanExpiry); the answer is still refused expired.
	DenyAtExpiry bool
	// RequireVerified refuses an answer that is not Verified (approver_not_verified), and
	// counts only verified grants towards Required.
	RequireVerified bool
	// Set is what the approver changes with a grant (docs/approvals.md#approve-with-edits): a
	// JSON object of argument names and the values they take instead; nil for none.
	// Guard.Answer checks it against the policy's editable arguments and turns it into Edit; a
	// store refuses a request with Set and no Edit.
	Set json.RawMessage
	// Edit is the edit the answer writes with its grant: the request then binds Edit.Hash.
	Edit *Edit
	// Standing, on a grant, asks for a standing approval with these terms besides the grant of
	// the request itself (docs/approvals.md#standing-approvals), under StandingID. Every grant
	// counted must state the same terms (standing_terms_differ); the grant that decides the
	// request creates the standing approval in its transaction. The caller checks the terms
	// against the policy (Guard.Answer does).
	Standing *StandingTerms
	// StandingID is the standing approval's id; Guard.Answer picks one when it is empty and
	// sets it here.
	StandingID string
}

// ResolveRequest settles an ambiguous effect (docs/guarantees.md#resolving-an-ambiguous-effect): an ambiguous record, an executing
// record whose lease has lapsed (written ambiguous and resolved in one transaction), or a
// resolved record with a conflict (resolved again by a person).
type ResolveRequest struct {
	Now    time.Time
	Key    string
	To     State // Committed or Failed
	By     string
	Result json.RawMessage // optional, with To committed: the effect's result, handed to later duplicates
	Note   string          // optional: why, kept on the record and in the event
	// Hook marks a reconcile hook's resolution: it may not resolve failed while the holder may
	// still act (HolderMayAct), nor a conflict.
	Hook bool
	// Holder, when set, is the action id of the attempt the resolution was checked against
	// (Guard.ResolveEffect checks who may resolve it, and a surface that showed a person the
	// record names the attempt it showed): a record held by another attempt by the time the
	// resolution is written is refused ErrNotAmbiguous, and nothing is written.
	Holder string
	// Updated, when set, is the record's UpdatedAt as the person who resolves it was shown it:
	// a record written since (another resolution, a late outcome, a new attempt) is refused
	// ErrNotAmbiguous in the resolution's own transaction, and nothing is written.
	Updated time.Time
	Events  []Event
}

// ExtendRequest extends the live lease of a holder.
type ExtendRequest struct {
	Now      time.Time
	Key      string
	ActionID string
	Attempt  int
	Until    time.Time
}

// EffectFilter selects effect records. Zero value selects all.
type EffectFilter struct {
	State State
	// Unsettled selects, whatever State says, the effects a person may have to settle:
	// ambiguous ones, executing ones (whose lease may have lapsed), and committed or failed ones
	// whose holder reported otherwise after a resolution (an outcome conflict). What needs a
	// person is read from these, never from the settled rest of the store, which grows with
	// every call.
	Unsettled bool
	// After and Limit page the selection by effect key: only keys greater than After, and at
	// most Limit records (0: all of them). Records are ordered by key either way.
	After string
	Limit int
}

// ApprovalFilter selects approval requests. Zero value selects all.
type ApprovalFilter struct {
	Status ApprovalStatus
	// ActionHash selects the requests for one action hash (read through an index: the way to
	// find the grants of one action among many requests).
	ActionHash string
}

// ReceiptFilter selects receipts. Zero value selects all, in seq order.
type ReceiptFilter struct {
	ActionID   string
	EffectKey  string
	ApprovalID string
	Since      time.Time // finished at or after
	AfterSeq   int64     // seq greater than
	Last       int       // only the last N (still returned in seq order)
}

// EventFilter selects events: those matching any of the non-empty ids. Zero value selects all.
type EventFilter struct {
	ActionID   string
	EffectKey  string
	ApprovalID string
	// AfterID keeps only events with a greater id (a reader resuming where it stopped); Limit,
	// when positive, returns at most that many, the lowest ids first.
	AfterID int64
	Limit   int
}

// Store is what a backend implements. Every method is one transaction; every write method is
// atomic under concurrent callers in any number of goroutines and processes.
type Store interface {
	// Reserve checks and consumes the presented approval and reserves the effect key, in one
	// transaction. A refusal is a value (Refusal), not an error; a refused call's receipt is
	// written in that same transaction.
	Reserve(ctx context.Context, req *ReserveRequest) (*ReserveResult, error)
	// Record writes an outcome, a receipt and events in one transaction.
	Record(ctx context.Context, req *RecordRequest) (*RecordResult, error)
	// ExtendLease moves a live lease's expiry forward; ErrLeaseLost if not held and live.
	ExtendLease(ctx context.Context, req *ExtendRequest) (*Effect, error)
	// Resolve moves an ambiguous effect to committed or failed; ErrNotAmbiguous otherwise.
	Resolve(ctx context.Context, req *ResolveRequest) (*Effect, error)

	// CreateApproval stores a pending approval request and its events, unless its probe
	// reservation would be refused: then it writes that refusal as Reserve would, and no request
	// (see ApprovalRequest), in one transaction.
	CreateApproval(ctx context.Context, req *ApprovalRequest) (*ApprovalResult, error)
	// AnswerApproval grants or denies a pending request; *AnswerError when it cannot.
	AnswerApproval(ctx context.Context, req *AnswerRequest) (*Approval, error)

	Effect(ctx context.Context, key string) (*Effect, error)
	Effects(ctx context.Context, f EffectFilter) ([]*Effect, error)
	Approval(ctx context.Context, id string) (*Approval, error)
	Approvals(ctx context.Context, f ApprovalFilter) ([]*Approval, error)
	// Receipts yields receipts in ascending seq order, streaming.
	Receipts(ctx context.Context, f ReceiptFilter) iter.Seq2[receipt.Sealed, error]
	Head(ctx context.Context) (receipt.Head, error)
	Events(ctx context.Context, f EventFilter) ([]*Event, error)

	// Close releases the store; calling it again does nothing and returns the first call's error.
	Close() error
}

// EventHead is implemented by backends that can name their newest event without reading the
// log: a reader that follows events from "now on" (a console page, say) resumes from it.
type EventHead interface {
	// LastEventID returns the greatest committed event id, 0 when there is none.
	LastEventID(ctx context.Context) (int64, error)
}

// WriteCounter is implemented by stores that count their committed write transactions; the
// two-transaction hot path (docs/guarantees.md#the-pipeline-of-one-call) is tested with it.
type WriteCounter interface {
	WriteTransactions() int64
}
