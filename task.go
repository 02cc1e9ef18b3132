package latch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/latchkit/latch/store"
)

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
//
// A TaskStop for approval_required is the one a queue may retry while it waits for the person:
// each retry is handed the same pending request, and the retry after a grant runs on it (the
// guard finds the grant by itself). The integrations do; package interrupt reads where such a
// wait stands.
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
	// A call awaiting approval names the effect it is for, so that a queue's retry or an
	// operator can find it.
	var ar *ApprovalRequiredError
	if errors.As(err, &ar) {
		return ar.EffectKey
	}
	return ""
}

// MaxTaskLength is the longest task id a call may carry, in bytes.
const MaxTaskLength = 512

// WithTask returns ctx carrying the task id of the calls made with it: the job, ticket or
// workflow they are part of (docs/authority.md#tasks). A task is matched against the tasks a
// grant names, recorded on the receipt and in the authority events, and never part of the
// action hash. It is how a protected function (Protect) learns a task that differs per call;
// Options.Task gives one per protected function or per Call. When both are set they must be
// equal, or the call is refused invalid_argument. "" carries no task.
func WithTask(ctx context.Context, task string) context.Context {
	return context.WithValue(ctx, taskCtx{}, task)
}

// TaskFrom returns the task id WithTask put in ctx, "" when none.
func TaskFrom(ctx context.Context) string {
	t, _ := ctx.Value(taskCtx{}).(string)
	return t
}

type taskCtx struct{}

// callTask is the task of call made with ctx (TaskOf).
func callTask(ctx context.Context, call *Call) (string, error) { return TaskOf(ctx, call.Options) }

// TaskOf is the task a call made with ctx and opts (nil allowed) carries: opts.Task or ctx's
// (WithTask), which must be equal when both are set, checked by CheckTask; "" when neither names
// one. The error is an *InvalidArgumentError wrapping store.ErrInvalidInput: the call is refused
// before anything is written. A client of another process's guard (package client) sends it.
func TaskOf(ctx context.Context, opts *Options) (string, error) {
	var opt string
	if opts != nil {
		opt = opts.Task
	}
	fromCtx := TaskFrom(ctx)
	task := opt
	if task == "" {
		task = fromCtx
	}
	if opt != "" && fromCtx != "" && opt != fromCtx {
		return "", &InvalidArgumentError{Reason: "invalid_argument", Err: &store.InputError{Field: "task", Value: fromCtx,
			Reason: "differs from Options.Task " + strconv.QuoteToASCII(opt) + " (a call has one task)"}}
	}
	if err := CheckTask(task); err != nil {
		return "", &InvalidArgumentError{Reason: "invalid_argument", Err: err}
	}
	return task, nil
}

// CheckTask refuses a task id that no call may carry: longer than MaxTaskLength bytes, not valid
// UTF-8, or holding a control character (NUL included), a line break or an invisible format
// character (a bidi override, a zero-width space): a task is shown to people, in receipts and in
// the console, and must read as what it is. "" (no task) passes. The error is a
// *store.InputError naming the field "task", and matches store.ErrInvalidInput.
func CheckTask(task string) error {
	refuse := func(why string) error { return &store.InputError{Field: "task", Value: task, Reason: why} }
	switch {
	case len(task) > MaxTaskLength:
		return refuse("is " + strconv.Itoa(len(task)) + " bytes long, longer than the " + strconv.Itoa(MaxTaskLength) + " a task may be")
	case !utf8.ValidString(task):
		return refuse("is not valid UTF-8")
	}
	for _, r := range task {
		switch {
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return refuse(fmt.Sprintf("contains a control character or a line break (%U)", r))
		case unicode.Is(unicode.Cf, r):
			return refuse(fmt.Sprintf("contains an invisible format character (%U)", r))
		}
	}
	return nil
}
