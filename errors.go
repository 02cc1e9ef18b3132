package latch

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// Sentinel errors to branch on with errors.Is. The error types below carry the data and match
// their sentinel.
var (
	// ErrDenied: the policy (or a missing principal) refused the call.
	ErrDenied = errors.New("latch: denied")
	// ErrApprovalRequired: the call needs a human's approval; an approval request was stored.
	ErrApprovalRequired = errors.New("latch: approval required")
	// ErrApprovalMismatch: the presented approval cannot be spent on this call.
	ErrApprovalMismatch = errors.New("latch: approval refused")
	// ErrDuplicateEffect: the effect key is committed or held by a live attempt (or holds an
	// attempt of other arguments: a key_conflict). ErrAlreadyCommitted and ErrInProgress say which.
	ErrDuplicateEffect = errors.New("latch: duplicate effect")
	// ErrAlreadyCommitted: the effect happened; stop redelivering. The refusal carries the stored
	// result (ResultOf). It also matches ErrDuplicateEffect.
	ErrAlreadyCommitted = fmt.Errorf("%w: already committed", ErrDuplicateEffect)
	// ErrInProgress: an attempt holds the key under a live lease; redeliver later. It also
	// matches ErrDuplicateEffect.
	ErrInProgress = fmt.Errorf("%w: in progress", ErrDuplicateEffect)
	// ErrOutcomeConflict: an attempt's holder reported an outcome that contradicts how its
	// effect was resolved meanwhile; the resolution stands, and a person must look.
	ErrOutcomeConflict = errors.New("latch: outcome conflict")
	// ErrAmbiguousEffect: an earlier attempt's outcome is unknown; nothing retries it until it is resolved.
	ErrAmbiguousEffect = errors.New("latch: effect is ambiguous")
	// ErrAmbiguous: this call's executor returned an error that does not say nothing happened.
	ErrAmbiguous = errors.New("latch: outcome unknown")
	// ErrNotExecuted: the executor said it did not act (see NotExecuted).
	ErrNotExecuted = errors.New("latch: not executed")
	// ErrAttemptsExhausted: the effect failed as many times as max_attempts allows.
	ErrAttemptsExhausted = errors.New("latch: attempts exhausted")
	// ErrAuthority: no grant lets this principal propose this action.
	ErrAuthority = errors.New("latch: no authority")
	// ErrIdentity: the identity provider could not establish a principal.
	ErrIdentity = errors.New("latch: identity")
	// ErrInvalidArgument: the call's arguments or templates cannot form an action.
	ErrInvalidArgument = errors.New("latch: invalid argument")
	// ErrBudgetExhausted: a budget the call is charged against has no room for it in its
	// window; a later call may fit once older charges leave the window (docs/budgets.md). It
	// also matches ErrDenied.
	ErrBudgetExhausted = fmt.Errorf("%w: budget exhausted", ErrDenied)
)

// PolicyError is a policy that cannot be loaded, naming the file, line and column.
type PolicyError = policy.Error

// DeniedError is a refusal by decision. Reason is the receipt's decision_reason: unknown_action,
// no_matching_rule, rule[i], decision, no_principal, principal_expired.
//
// A call whose arguments do not fit what the action needs (docs/policy.md#arguments) is denied
// missing_argument or invalid_arguments; Argument names the argument, Pointer is the JSON
// pointer of the offending value and Detail says what is wrong. Such an error matches
// ErrInvalidArgument as well as ErrDenied.
type DeniedError struct {
	Action   string
	Reason   string
	Argument string // missing_argument, invalid_arguments: the argument at fault
	Pointer  string // its JSON pointer
	Detail   string // for people
}

func (e *DeniedError) Error() string {
	if e.Argument != "" {
		return fmt.Sprintf("latch: %s denied: %s: %s (%s)", safetext.Quote(e.Action), e.Reason, safetext.Quote(e.Argument), e.Detail)
	}
	return fmt.Sprintf("latch: %s denied: %s", safetext.Quote(e.Action), e.Reason)
}

// Is matches ErrDenied, and ErrInvalidArgument for a refusal of the arguments.
func (e *DeniedError) Is(target error) bool {
	return target == ErrDenied || target == ErrInvalidArgument && (e.Reason == policy.ReasonMissingArgument || e.Reason == policy.ReasonInvalidArguments)
}

// ApprovalRequiredError says the call waits for a human. The request is stored; present
// ApprovalID with WithApproval once it is granted.
type ApprovalRequiredError struct {
	ApprovalID string
	ActionHash string
	// EffectKey is the call's effect key ("" for an unkeyed action): the effect the request is
	// for, so that a queue's retry or an operator can find it.
	EffectKey string
	ExpiresAt time.Time
	// Err is why a call that waited (Options.Wait) stopped waiting before the request was
	// answered: its context's error. The request stays stored.
	Err error
}

func (e *ApprovalRequiredError) Error() string {
	s := fmt.Sprintf("latch: approval required: %s (action %s, expires %s)", e.ApprovalID, e.ActionHash, e.ExpiresAt.UTC().Format(time.RFC3339))
	if e.Err != nil {
		s += ": stopped waiting: " + bare(e.Err)
	}
	return s
}

// Unwrap returns why the wait ended, if it did.
func (e *ApprovalRequiredError) Unwrap() error { return e.Err }

// Is matches ErrApprovalRequired.
func (e *ApprovalRequiredError) Is(target error) bool { return target == ErrApprovalRequired }

// ApprovalMismatchError refuses a presented approval. Reason is one of unknown, mismatch,
// consumed, denied, pending, expired. Detail, when set, is what the store said about it, and
// the message is the refused call's receipt error.
//
// Arguments, on a mismatch, are the arguments the approval binds when an approver edited them
// (docs/approvals.md#approve-with-edits): the call that presents exactly these, with the same
// approval, spends it. nil when nobody edited the request (or the error came over the wire:
// Guard.Approved and the approval's view give them there).
type ApprovalMismatchError struct {
	ApprovalID string
	Reason     string
	Detail     string
	Arguments  json.RawMessage
}

func (e *ApprovalMismatchError) Error() string {
	if e.Detail != "" {
		return "latch: " + e.Detail
	}
	return fmt.Sprintf("latch: approval %s refused: %s", safetext.Quote(e.ApprovalID), e.Reason)
}

// Is matches ErrApprovalMismatch.
func (e *ApprovalMismatchError) Is(target error) bool { return target == ErrApprovalMismatch }

// State is the state of an effect record, as `latch effects` shows it.
type State = store.State

// Effect states.
const (
	StateExecuting = store.Executing // held by one attempt under a lease
	StateCommitted = store.Committed // it happened
	StateFailed    = store.Failed    // it did not happen: the key may be retried
	StateAmbiguous = store.Ambiguous // nobody knows: retries are refused until it is resolved
)

// EffectError refuses a call because of the state of its effect. State is the record's state
// (the words of `latch effects`); Reason is the refusal code of the receipt:
//
//	committed           ErrAlreadyCommitted (and ErrDuplicateEffect); Result holds the stored result
//	in_progress         ErrInProgress (and ErrDuplicateEffect)
//	ambiguous           ErrAmbiguousEffect
//	attempts_exhausted  ErrAttemptsExhausted
//	key_conflict        ErrDuplicateEffect, and the sentinel of State: the key holds an attempt
//	                    of other arguments (or of another action)
//	outcome_conflict    ErrOutcomeConflict and ErrAmbiguousEffect: a holder's outcome
//	                    contradicts the resolution of its attempt; a person resolves it again
//	key_lost            ErrAmbiguousEffect: this call's lease lapsed and its key was resolved
//	                    or taken meanwhile; its outcome was not written
//
// Detail, when set, is what the store said about the record, and the message is the refused
// call's receipt error.
type EffectError struct {
	Key     string
	State   State
	Reason  string
	Attempt int
	Result  json.RawMessage
	Detail  string // what the store said, for people
}

func (e *EffectError) Error() string {
	if e.Detail != "" {
		return "latch: " + e.Detail
	}
	key := safetext.Quote(e.Key)
	switch e.Reason {
	case "committed":
		return fmt.Sprintf("latch: effect %s already committed", key)
	case "in_progress":
		return fmt.Sprintf("latch: effect %s is in progress", key)
	case "attempts_exhausted":
		return fmt.Sprintf("latch: effect %s failed %d attempts", key, e.Attempt)
	case "key_conflict":
		return fmt.Sprintf("latch: effect %s: key conflict: the arguments differ from those of the recorded attempt %d (%s)", key, e.Attempt, e.State)
	case "outcome_conflict":
		return fmt.Sprintf("latch: effect %s: outcome conflict: resolve it again before any retry", key)
	case "key_lost":
		return fmt.Sprintf("latch: effect %s is %s: this call's lease lapsed and its outcome was not recorded", key, e.State)
	}
	return fmt.Sprintf("latch: effect %s is ambiguous: resolve it before any retry", key)
}

// Is matches the sentinels of the reason (see EffectError).
func (e *EffectError) Is(target error) bool {
	switch e.Reason {
	case "committed":
		return target == ErrDuplicateEffect || target == ErrAlreadyCommitted
	case "in_progress":
		return target == ErrDuplicateEffect || target == ErrInProgress
	case "attempts_exhausted":
		return target == ErrAttemptsExhausted
	case "key_conflict":
		switch e.State {
		case StateCommitted:
			return target == ErrDuplicateEffect || target == ErrAlreadyCommitted
		case StateExecuting:
			return target == ErrDuplicateEffect || target == ErrInProgress
		}
		return target == ErrDuplicateEffect || target == ErrAmbiguousEffect
	case "outcome_conflict":
		return target == ErrOutcomeConflict || target == ErrAmbiguousEffect
	}
	return target == ErrAmbiguousEffect
}

// ResultOf decodes the stored result a duplicate refusal carries: the result of the committed
// effect (an *EffectError matching ErrAlreadyCommitted, with the result its executor returned or
// the one a person or a reconcile hook stored when resolving it). It returns false when err
// carries none or it does not decode into R.
func ResultOf[R any](err error) (R, bool) {
	var r R
	var ee *EffectError
	if !errors.As(err, &ee) || len(ee.Result) == 0 || string(ee.Result) == "null" {
		return r, false
	}
	if json.Unmarshal(ee.Result, &r) != nil {
		return r, false
	}
	return r, true
}

// AuthorityError refuses a call on the authority axis. Reason is one of authority_unreadable,
// authority_escalation, authority_revoked, authority_expired, authority_constraint,
// no_authority; Dimension names what did not hold, when one does.
type AuthorityError struct {
	Reason    string
	Dimension string
	Detail    string // what the authority layer said, for people
}

func (e *AuthorityError) Error() string {
	s := "latch: authority refused: " + e.Reason
	if e.Dimension != "" {
		s += " (" + e.Dimension + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is matches ErrAuthority.
func (e *AuthorityError) Is(target error) bool { return target == ErrAuthority }

// BudgetError refuses a call because of a budget it is charged against (docs/budgets.md). Reason
// is one of:
//
//	budget_exhausted         ErrBudgetExhausted: the budget has no room for this call's amount
//	                         within its window
//	budget_metric_missing    the budget meters an argument the call does not pass
//	budget_metric_invalid    that argument is not a non-negative integer (strings are never
//	                         read as numbers)
//	budget_needs_effect_key  the call has no effect key, and a budget is charged only with the
//	                         reservation of one
//
// Budget is the budget's id: the id of the grant that carries it (a policy grant, or a
// delegation's dlg_ id, which may be an ancestor of the grant that allowed the call), or, for an
// action's own budget, its per-principal id (store.ActionBudget). Metric and Window say which
// budget of it. Every budget reason matches ErrDenied. The error never says how much of the
// budget is left: that would tell a caller how to spend it to the last unit.
type BudgetError struct {
	Action string
	Reason string
	Budget string
	Metric string
	Window time.Duration
	Detail string // what the store said, for people; the refused call's receipt error when set
}

func (e *BudgetError) Error() string {
	if e.Detail != "" {
		return "latch: " + e.Detail
	}
	what := fmt.Sprintf("budget %s on %s over %s", safetext.Quote(e.Budget), safetext.Quote(e.Metric), policy.FormatISODuration(e.Window))
	var why string
	switch e.Reason {
	case string(ReasonBudgetExhausted):
		why = what + " is exhausted"
	case string(ReasonBudgetMetricMissing):
		why = what + " meters an argument the call does not pass"
	case string(ReasonBudgetMetricInvalid):
		why = what + " meters an argument that is not a non-negative integer"
	case string(ReasonBudgetNeedsEffectKey):
		why = what + " is charged with an effect key's reservation, and the call has no effect key"
	default:
		why = what
	}
	if e.Action != "" {
		return fmt.Sprintf("latch: %s denied: %s: %s", safetext.Quote(e.Action), e.Reason, why)
	}
	return fmt.Sprintf("latch: denied: %s: %s", e.Reason, why)
}

// Is matches ErrDenied, and ErrBudgetExhausted for budget_exhausted.
func (e *BudgetError) Is(target error) bool {
	return target == ErrDenied || target == ErrBudgetExhausted && e.Reason == string(ReasonBudgetExhausted)
}

// InvalidArgumentError refuses a call whose arguments or templates cannot form an action.
// Reason is invalid_argument or effect_key_error; Pointer is the JSON pointer of the bad value.
type InvalidArgumentError struct {
	Reason  string
	Pointer string
	Err     error
}

func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("latch: %s: %s", e.Reason, bare(e.Err))
}

// Is matches ErrInvalidArgument.
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// Unwrap returns the underlying error.
func (e *InvalidArgumentError) Unwrap() error { return e.Err }

// AmbiguousError is returned when the executor's outcome is unknown. It matches ErrAmbiguous
// and, through Unwrap, the executor's own error (Err) and the failure to record it (Unrecorded).
type AmbiguousError struct {
	Key string
	// Err is the executor's error; nil when the executor returned but its outcome could not be
	// recorded.
	Err error
	// Unrecorded is the store's error when the outcome could not be written; nil when the
	// ambiguous outcome was recorded. An unrecorded outcome leaves the key held until its lease
	// lapses into ambiguous.
	Unrecorded error
}

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	b.WriteString("latch: outcome")
	if e.Key != "" {
		b.WriteString(" of " + safetext.Quote(e.Key))
	}
	b.WriteString(" unknown")
	switch {
	case e.Unrecorded != nil && e.Err == nil:
		b.WriteString(": the executor returned, but its outcome could not be recorded (" + bare(e.Unrecorded) + ")")
	case e.Unrecorded != nil:
		b.WriteString(" and not recorded (" + bare(e.Unrecorded) + ")")
	case e.Key != "":
		b.WriteString(" (recorded ambiguous)")
	}
	if e.Unrecorded != nil && e.Key != "" {
		b.WriteString("; the key stays held until its lease lapses into ambiguous")
	}
	if e.Err != nil {
		b.WriteString(": " + bare(e.Err))
	}
	return b.String()
}

// Is matches ErrAmbiguous.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// Unwrap returns the executor's error and the recording failure, those that are set.
func (e *AmbiguousError) Unwrap() []error {
	var out []error
	for _, err := range []error{e.Err, e.Unrecorded} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// bare is err's message without the "latch: " prefix an error of this package (or of a nested
// protected call) starts with: one error carries one prefix, at its front.
func bare(err error) string {
	s := err.Error()
	for strings.HasPrefix(s, "latch: ") {
		s = strings.TrimPrefix(s, "latch: ")
	}
	return s
}

// opError is a failure of one operation of the pipeline: "latch: op: cause". A cause that
// already names the operation (a store error reads "reserve KEY: …") is not named twice.
type opError struct {
	op  string
	err error
}

func wrapOp(op string, err error) error { return &opError{op: op, err: err} }

func (e *opError) Error() string {
	cause := bare(e.err)
	if e.op == "" || strings.HasPrefix(cause, e.op+": ") {
		return "latch: " + cause
	}
	return "latch: " + e.op + ": " + cause
}

func (e *opError) Unwrap() error { return e.err }

type notExecuted struct{ err error }

func (e *notExecuted) Error() string {
	return "not executed: " + bare(e.err)
}
func (e *notExecuted) Is(target error) bool { return target == ErrNotExecuted }
func (e *notExecuted) Unwrap() error        { return e.err }

// NotExecuted marks err as the executor's statement that nothing happened: the remote was not
// called, or it refused before acting. The effect is recorded failed and may be retried. Only
// return it when you know; an executor that says NotExecuted after the remote acted defeats latch.
func NotExecuted(err error) error {
	if err == nil {
		return ErrNotExecuted
	}
	return &notExecuted{err: err}
}
