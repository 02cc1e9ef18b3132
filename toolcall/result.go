package toolcall

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/safetext"
)

// Status is what became of one tool call, as the model's tool result reports it.
type Status string

// Statuses of a Result (see the package documentation).
const (
	StatusOK        Status = "ok"
	StatusDuplicate Status = "duplicate"
	StatusPending   Status = "approval_required"
	StatusRefused   Status = "refused"
	StatusUnknown   Status = "unknown"
	StatusFailed    Status = "failed"
)

// Result is the outcome of one tool call, ready to hand back to the model.
type Result struct {
	CallID string // the model's id of the call
	Name   string // the tool's name
	Status Status
	// Content is the tool result's text: the result as JSON for StatusOK, else what happened,
	// starting with latch's reason word (RefusalText).
	Content string
	// IsError says the result reports a failure: every status but ok, duplicate and pending.
	IsError bool
	// Value is the tool's result as JSON: what the handler returned (ok), or the result stored
	// when the effect committed (duplicate; nil when none was stored).
	Value json.RawMessage
	// Refusal is latch's refusal, as data (nil for ok): the reason word, the effect key, and
	// for a pending call the approval id, action hash and expiry.
	Refusal *latch.Refusal
	// Receipt is the receipt written for the call (nil when none was: an approval pending, a
	// tool not registered).
	Receipt *latch.Receipt
	// Err is latch's error (nil for ok): errors.Is matches latch's sentinels.
	Err error
}

// Classify maps an error of Guard.Execute (nil for a call that ran) to a Result with its Status,
// Content, IsError, Value and Refusal, through latch.RefusalOf. Content of an ok result is left
// to the caller, who holds the value.
func Classify(err error) *Result {
	if err == nil {
		return &Result{Status: StatusOK}
	}
	lr := latch.RefusalOf(err)
	res := &Result{Refusal: lr, Err: err, Status: statusOf[lr.Kind], Content: RefusalText(lr)}
	if res.Status == "" {
		res.Status = StatusRefused
	}
	switch res.Status {
	case StatusDuplicate:
		if len(lr.Result) > 0 && string(lr.Result) != "null" {
			res.Value = lr.Result
		}
	case StatusPending:
	default:
		res.IsError = true
	}
	return res
}

// statusOf is the status of every refusal kind latch.RefusalOf gives: the tool results' one
// table of the refusal vocabulary.
var statusOf = map[latch.RefusalKind]Status{
	latch.KindDenied:           StatusRefused,
	latch.KindInvalidArgument:  StatusRefused,
	latch.KindApprovalRequired: StatusPending,
	latch.KindApprovalRefused:  StatusRefused,
	latch.KindCommitted:        StatusDuplicate,
	latch.KindInProgress:       StatusRefused,
	latch.KindAmbiguous:        StatusUnknown,
	latch.KindOutcomeUnknown:   StatusUnknown,
	latch.KindNotExecuted:      StatusFailed,
	latch.KindExhausted:        StatusRefused,
	latch.KindKeyConflict:      StatusRefused,
	latch.KindAuthority:        StatusRefused,
	latch.KindIdentity:         StatusRefused,
	latch.KindOutcomeRefused:   StatusRefused,
	latch.KindRequestKey:       StatusRefused,
	latch.KindInternal:         StatusRefused,
}

// StatusOf is the status of a refusal of kind k.
func StatusOf(k latch.RefusalKind) Status { return statusOf[k] }

// advice is what each kind tells the model: what happened to the call and what it can do.
var advice = map[latch.RefusalKind]string{
	latch.KindDenied:           "the policy does not allow this call; it did not run. Calling it again as it is will be refused again.",
	latch.KindInvalidArgument:  "the arguments do not fit what the tool needs; it did not run. Correct the arguments and call it again.",
	latch.KindApprovalRequired: "a person must approve this call before it runs; it has not run yet. Once it is approved, call the tool again with exactly the same arguments: it then runs once. Other arguments need another approval.",
	latch.KindApprovalRefused:  "the approval presented cannot be spent on this call; it did not run.",
	latch.KindCommitted:        "this call's effect already happened; it did not run again.",
	latch.KindInProgress:       "another attempt of this call is running now; this one did not run. Call it again later to learn its outcome.",
	latch.KindAmbiguous:        "the outcome of an earlier attempt of this call is unknown: it may have happened. Retrying is blocked until a person finds out and resolves it; this call did not run.",
	latch.KindOutcomeUnknown:   "the outcome of this call is unknown: it may have run. Retrying is blocked until a person finds out and resolves it.",
	latch.KindNotExecuted:      "the tool failed without acting: nothing happened. Calling it again may succeed.",
	latch.KindExhausted:        "this effect failed as many times as the policy allows; it is not tried again.",
	latch.KindKeyConflict:      "the effect this call names is held by a call with other arguments; it did not run.",
	latch.KindAuthority:        "the agent's authority does not cover this call; it did not run.",
	latch.KindIdentity:         "latch could not establish who is calling; it did not run.",
	latch.KindOutcomeRefused:   "latch refused to record this call's outcome.",
	latch.KindRequestKey:       "the request key of this call names another call; it did not run.",
	latch.KindInternal:         "latch could not decide or record this call; nothing is known to have run. Calling it again lets latch decide again.",
}

// adviceByReason refines advice for the reasons whose answer is not their kind's.
var adviceByReason = map[latch.Reason]string{
	latch.ReasonBudgetExhausted: "a budget this call is charged against has no room left in its window; it did not run. A later call may fit once earlier calls leave the window.",
	latch.ReasonUnknownAction:   "the policy does not list this tool's action; it did not run. Calling it again will be refused again.",
}

// Advice is what a refusal tells a model: what happened to the call and what it can do — the one
// wording every Go adapter that answers a model uses (this package's tool results, the Genkit
// adapter's refusals). "" for nil.
func Advice(r *latch.Refusal) string {
	if r == nil {
		return ""
	}
	if say, ok := adviceByReason[r.Reason]; ok {
		return say
	}
	return advice[r.Kind]
}

// RefusalText is the tool result's text for a refusal: the reason word, what happened and what
// the model can do, then the facts that apply (the rule, the argument at fault, the effect key,
// the approval, the budget, the stored result), one per line. "" for nil.
func RefusalText(r *latch.Refusal) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(string(r.Reason) + ": " + Advice(r))
	line := func(name, value string) {
		if value != "" {
			b.WriteString("\n" + name + ": " + quote(value))
		}
	}
	line("rule", r.Rule)
	line("argument", r.Argument)
	line("pointer", r.Pointer)
	line("dimension", r.Dimension)
	line("approval_id", r.ApprovalID)
	line("action_hash", r.ActionHash)
	line("effect_key", r.EffectKey)
	if !r.ExpiresAt.IsZero() {
		line("expires_at", r.ExpiresAt.UTC().Format(time.RFC3339))
	}
	line("budget", r.Budget)
	line("metric", r.Metric)
	line("window", r.Window)
	switch r.Kind {
	case latch.KindCommitted:
		if len(r.Result) > 0 && string(r.Result) != "null" {
			b.WriteString("\nstored_result: " + string(r.Result))
		}
	case latch.KindApprovalRequired:
	case latch.KindInternal:
		// What latch met (a store it could not reach, and where) is the operator's to read, in
		// Result.Err: the model's provider is told nothing of it.
	default:
		if r.Detail != "" {
			b.WriteString("\ndetail: " + safetext.Escape(r.Detail)) // one line, whatever the handler's error says
		}
	}
	return b.String()
}

// quote is s as plain text when it is, and Go-quoted otherwise: a value rendered from a model's
// arguments reads as itself, never as more lines or instructions.
func quote(s string) string { return safetext.Quote(s) }
