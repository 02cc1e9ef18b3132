package latch

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch/policy"
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
	// ErrDuplicateEffect: the effect key is committed or held by a live attempt.
	ErrDuplicateEffect = errors.New("latch: duplicate effect")
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
)

// PolicyError is a policy that cannot be loaded, naming the file, line and column.
type PolicyError = policy.Error

// DeniedError is a refusal by decision. Reason is the receipt's decision_reason: unknown_action,
// no_matching_rule, rule[i], decision, no_principal, principal_expired.
type DeniedError struct {
	Action string
	Reason string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("latch: %s denied: %s", e.Action, e.Reason)
}

// Is matches ErrDenied.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// ApprovalRequiredError says the call waits for a human. The request is stored; present
// ApprovalID with WithApproval once it is granted.
type ApprovalRequiredError struct {
	ApprovalID string
	ActionHash string
	ExpiresAt  time.Time
}

func (e *ApprovalRequiredError) Error() string {
	return fmt.Sprintf("latch: approval required: %s (action %s, expires %s)", e.ApprovalID, e.ActionHash, e.ExpiresAt.UTC().Format(time.RFC3339))
}

// Is matches ErrApprovalRequired.
func (e *ApprovalRequiredError) Is(target error) bool { return target == ErrApprovalRequired }

// ApprovalMismatchError refuses a presented approval. Reason is one of unknown, mismatch,
// consumed, denied, pending, expired.
type ApprovalMismatchError struct {
	ApprovalID string
	Reason     string
}

func (e *ApprovalMismatchError) Error() string {
	return fmt.Sprintf("latch: approval %s refused: %s", e.ApprovalID, e.Reason)
}

// Is matches ErrApprovalMismatch.
func (e *ApprovalMismatchError) Is(target error) bool { return target == ErrApprovalMismatch }

// EffectError refuses a call because of the state of its effect. State is committed or
// in_progress (matching ErrDuplicateEffect), ambiguous (ErrAmbiguousEffect) or
// attempts_exhausted (ErrAttemptsExhausted). Result is the stored result of a committed effect.
type EffectError struct {
	Key     string
	State   string
	Attempt int
	Result  json.RawMessage
}

func (e *EffectError) Error() string {
	switch e.State {
	case "committed":
		return fmt.Sprintf("latch: effect %s already committed", e.Key)
	case "in_progress":
		return fmt.Sprintf("latch: effect %s is in progress", e.Key)
	case "attempts_exhausted":
		return fmt.Sprintf("latch: effect %s failed %d attempts", e.Key, e.Attempt)
	}
	return fmt.Sprintf("latch: effect %s is ambiguous: resolve it before any retry", e.Key)
}

// Is matches the sentinel of the state.
func (e *EffectError) Is(target error) bool {
	switch e.State {
	case "committed", "in_progress":
		return target == ErrDuplicateEffect
	case "attempts_exhausted":
		return target == ErrAttemptsExhausted
	}
	return target == ErrAmbiguousEffect
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

// InvalidArgumentError refuses a call whose arguments or templates cannot form an action.
// Reason is invalid_argument or effect_key_error; Pointer is the JSON pointer of the bad value.
type InvalidArgumentError struct {
	Reason  string
	Pointer string
	Err     error
}

func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("latch: %s: %v", e.Reason, e.Err)
}

// Is matches ErrInvalidArgument.
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// Unwrap returns the underlying error.
func (e *InvalidArgumentError) Unwrap() error { return e.Err }

// AmbiguousError is returned when the executor's outcome is unknown. It matches ErrAmbiguous
// and, through Unwrap, the executor's own error.
type AmbiguousError struct {
	Key string
	Err error
}

func (e *AmbiguousError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("latch: outcome unknown: %v", e.Err)
	}
	return fmt.Sprintf("latch: outcome of %s unknown (recorded ambiguous): %v", e.Key, e.Err)
}

// Is matches ErrAmbiguous.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// Unwrap returns the executor's error.
func (e *AmbiguousError) Unwrap() error { return e.Err }

type notExecuted struct{ err error }

func (e *notExecuted) Error() string {
	return "not executed: " + e.err.Error()
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
