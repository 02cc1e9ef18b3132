package gateway

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// JSON-RPC error codes of the gateway's refusals, stable across releases. Each code has one
// reason family; Refusal.Reason says which reason within it. They lie outside the range
// JSON-RPC reserves (-32768 to -32000), where MCP SDKs put their own transport errors: a client
// SDK that took -32004 for "server is closing" would report a duplicate as a closed connection.
const (
	CodeInternal         = -31000 // the gateway could not decide (store or upstream unavailable)
	CodeDenied           = -31001 // the policy denies the call, or its arguments do not fit
	CodeApprovalRequired = -31002 // a human must approve; Refusal.ApprovalID names the request
	CodeApprovalRefused  = -31003 // a presented approval does not apply
	CodeDuplicate        = -31004 // the effect is committed or in progress; Refusal.Result when committed
	CodeEffectAmbiguous  = -31005 // an earlier attempt's outcome is unknown; resolve it first
	CodeAmbiguous        = -31006 // this call's outcome is unknown: it may have run
	CodeNotExecuted      = -31007 // this call failed and did not run
	CodeAuthority        = -31008 // the principal's authority does not cover the call
	CodeUnauthenticated  = -31009 // the session carries no usable principal
	CodeExhausted        = -31010 // the effect failed its maximum number of attempts
	CodeKeyConflict      = -31011 // the effect key holds an attempt of other arguments
	CodeAnswerTooLarge   = -31012 // the tool ran (committed), but its answer was too large to pass on
)

// Refusal is the data object of every gateway error: what an agent needs to tell "ask a human"
// from "already done" from "denied" without parsing the message.
type Refusal struct {
	Reason      string          `json:"reason"` // snake_case, stable
	Action      string          `json:"action,omitempty"`
	EffectKey   string          `json:"effect_key,omitempty"`
	EffectState string          `json:"effect_state,omitempty"` // committed, in_progress, ambiguous, failed
	ApprovalID  string          `json:"approval_id,omitempty"`
	ExpiresAt   *time.Time      `json:"expires_at,omitempty"`
	ActionHash  string          `json:"action_hash,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`     // the stored result of a committed effect
	ReceiptID   string          `json:"receipt_id,omitempty"` // rcp_…, when a receipt was written
	ActionID    string          `json:"action_id,omitempty"`  // act_…, what `latch inspect` takes
	Detail      string          `json:"detail,omitempty"`
}

// refusalKind is one row of refusals: which errors of Guard.Execute it takes, and what the
// agent is told about them.
type refusalKind struct {
	is     func(error) bool
	code   int64
	reason string // the reason word; "" means latch.ReasonOf's word for the error
}

// sentinel matches the errors that match target.
func sentinel(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// effectReason matches an EffectError of one reason: the refusals that share their sentinels
// with others (a key conflict matches the sentinel of the state it found) and need telling apart.
func effectReason(reason string) func(error) bool {
	return func(err error) bool {
		var ee *latch.EffectError
		return errors.As(err, &ee) && ee.Reason == reason
	}
}

// refusals is the gateway's one mapping from the errors of Guard.Execute to JSON-RPC codes and
// reason words, tried in order: the first row that matches decides. Rows that share a sentinel
// with a later row come first (a key conflict also matches ErrAlreadyCommitted; an outcome
// conflict also matches ErrAmbiguousEffect). docs/gateway.md lists the same table.
var refusals = []refusalKind{
	{sentinel(latch.ErrApprovalRequired), CodeApprovalRequired, "approval_required"},
	{sentinel(latch.ErrIdentity), CodeUnauthenticated, "identity"},
	{sentinel(latch.ErrDenied), CodeDenied, ""},
	{sentinel(latch.ErrInvalidArgument), CodeDenied, ""},
	{sentinel(latch.ErrApprovalMismatch), CodeApprovalRefused, ""},
	{sentinel(latch.ErrAuthority), CodeAuthority, ""},
	{effectReason("key_conflict"), CodeKeyConflict, "key_conflict"},
	{effectReason("key_lost"), CodeAmbiguous, "key_lost"},
	{sentinel(latch.ErrAlreadyCommitted), CodeDuplicate, "duplicate_effect"},
	{sentinel(latch.ErrInProgress), CodeDuplicate, "duplicate_effect"},
	{sentinel(latch.ErrAttemptsExhausted), CodeExhausted, "attempts_exhausted"},
	{sentinel(latch.ErrOutcomeConflict), CodeEffectAmbiguous, "outcome_conflict"},
	{sentinel(latch.ErrAmbiguousEffect), CodeEffectAmbiguous, "effect_ambiguous"},
	{sentinel(latch.ErrAmbiguous), CodeAmbiguous, "ambiguous"},
	{sentinel(latch.ErrNotExecuted), CodeNotExecuted, "not_executed"},
}

// refusal maps an error of Guard.Execute to its JSON-RPC code and data (see refusals).
func refusal(action string, rc *latch.Receipt, err error) (int64, Refusal) {
	r := Refusal{Action: action, Detail: err.Error(), Reason: "internal"}
	if rc != nil {
		r.ReceiptID, r.ActionID = rc.ReceiptID, rc.ActionID
	}
	code := int64(CodeInternal)
	for _, k := range refusals {
		if k.is(err) {
			code, r.Reason = k.code, k.reason
			if r.Reason == "" {
				r.Reason = latch.ReasonOf(err)
			}
			break
		}
	}
	var (
		approval  *latch.ApprovalRequiredError
		mismatch  *latch.ApprovalMismatchError
		effect    *latch.EffectError
		ambiguous *latch.AmbiguousError
	)
	switch {
	case errors.As(err, &approval):
		r.ApprovalID, r.ActionHash = approval.ApprovalID, approval.ActionHash
		exp := approval.ExpiresAt.UTC()
		r.ExpiresAt = &exp
	case errors.As(err, &mismatch):
		r.ApprovalID = mismatch.ApprovalID
	case errors.As(err, &effect):
		r.EffectKey, r.EffectState = effect.Key, effectState(effect.State)
		if errors.Is(err, latch.ErrAlreadyCommitted) && code == CodeDuplicate {
			r.Result = effect.Result // a key conflict's result is another call's: not handed on
		}
	case errors.As(err, &ambiguous):
		r.EffectKey, r.EffectState = ambiguous.Key, effectState(store.Ambiguous)
		if ambiguous.Key == "" {
			r.EffectState = ""
		}
	}
	if code == CodeNotExecuted {
		r.EffectState = effectState(store.Failed)
	}
	return code, r
}

// effectState is a record's state as agents read it: an attempt holding the key is in_progress.
func effectState(s store.State) string {
	if s == store.Executing {
		return "in_progress"
	}
	return string(s)
}

// wireError is the JSON-RPC error an agent receives.
func wireError(code int64, r Refusal) error {
	data, err := json.Marshal(r)
	if err != nil { // a Refusal always encodes; keep the code even if it did not
		data = nil
	}
	return &jsonrpc.Error{Code: code, Message: r.Detail, Data: data}
}
