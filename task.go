package latch

import "errors"

// TaskVerdict is what a task queue, job runner or workflow engine should do with a task whose
// protected call returned an error: the one mapping the integrations for River, asynq and
// Temporal share (docs/integrations/river.md).
type TaskVerdict int

// Task verdicts.
const (
	TaskDone       TaskVerdict = iota // the effect committed in this attempt
	TaskDuplicate                     // the effect committed earlier: complete without running
	TaskInProgress                    // another attempt holds the key: try later, without counting a failure
	TaskRetry                         // nothing happened (NotExecuted, or latch could not reach its store): retry
	TaskStop                          // ambiguous or refused: never retry until a person acts
)

// TaskVerdictOf maps the error of a protected call (nil for a committed one) to a TaskVerdict.
func TaskVerdictOf(err error) TaskVerdict {
	var ee *EffectError
	switch {
	case err == nil:
		return TaskDone
	case errors.As(err, &ee) && ee.Reason == "key_conflict":
		return TaskStop // another call's arguments under this key: a person must look
	case errors.Is(err, ErrAlreadyCommitted):
		return TaskDuplicate
	case errors.Is(err, ErrInProgress):
		return TaskInProgress
	case errors.Is(err, ErrAmbiguous), errors.Is(err, ErrAmbiguousEffect),
		errors.Is(err, ErrAttemptsExhausted), errors.Is(err, ErrDenied),
		errors.Is(err, ErrApprovalRequired), errors.Is(err, ErrApprovalMismatch),
		errors.Is(err, ErrAuthority), errors.Is(err, ErrIdentity),
		errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrDuplicateEffect):
		return TaskStop
	}
	// NotExecuted, or an error before the executor ran (the store unreachable): the retry goes
	// through latch again, which refuses it if anything was reserved meanwhile.
	return TaskRetry
}

// TaskReason is the reason word a stopped task is reported with: the effect state's reason
// (key_conflict, …), else the kind of refusal (ambiguous, ambiguous_effect, attempts_exhausted,
// approval_required, approval_refused, invalid_argument, denied, authority, identity), else
// "refused".
func TaskReason(err error) string {
	var ee *EffectError
	if errors.As(err, &ee) && ee.Reason != "" && ee.Reason != "ambiguous" {
		return ee.Reason
	}
	switch {
	case errors.Is(err, ErrAmbiguous):
		return "ambiguous"
	case errors.Is(err, ErrAmbiguousEffect):
		return "ambiguous_effect"
	case errors.Is(err, ErrAttemptsExhausted):
		return "attempts_exhausted"
	case errors.Is(err, ErrApprovalRequired):
		return "approval_required"
	case errors.Is(err, ErrApprovalMismatch):
		return "approval_refused"
	case errors.Is(err, ErrInvalidArgument):
		return "invalid_argument"
	case errors.Is(err, ErrDenied):
		return "denied"
	case errors.Is(err, ErrAuthority):
		return "authority"
	case errors.Is(err, ErrIdentity):
		return "identity"
	}
	return "refused"
}

// EffectKeyOf is the effect key an error of a protected call names, or "".
func EffectKeyOf(err error) string {
	var ae *AmbiguousError
	if errors.As(err, &ae) {
		return ae.Key
	}
	var ee *EffectError
	if errors.As(err, &ee) {
		return ee.Key
	}
	return ""
}
