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

// TaskVerdictOf maps the error of a protected call (nil for a committed one) to a TaskVerdict,
// by its refusal kind (RefusalOf).
func TaskVerdictOf(err error) TaskVerdict {
	if err == nil {
		return TaskDone
	}
	switch RefusalOf(err).Kind {
	case KindCommitted:
		return TaskDuplicate
	case KindInProgress:
		return TaskInProgress
	case KindNotExecuted, KindInternal:
		// Nothing happened, or an error before the executor ran (the store unreachable): the
		// retry goes through latch again, which refuses it if anything was reserved meanwhile.
		return TaskRetry
	}
	// Ambiguous (this attempt or an earlier one), a key conflict, or refused: a person (or a
	// reconcile hook) must act first.
	return TaskStop
}

// TaskReason is the reason word a stopped task is reported with: RefusalOf's Reason.
func TaskReason(err error) string {
	if r := RefusalOf(err); r != nil {
		return string(r.Reason)
	}
	return ""
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
