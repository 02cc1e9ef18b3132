package gateway

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/latchkit/latch"
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

// refusal maps an error of Guard.Execute to its JSON-RPC code and data.
func refusal(action string, rc *latch.Receipt, err error) (int64, Refusal) {
	r := Refusal{Action: action, Detail: err.Error()}
	if rc != nil {
		r.ReceiptID, r.ActionID = rc.ReceiptID, rc.ActionID
	}
	var (
		denied    *latch.DeniedError
		approval  *latch.ApprovalRequiredError
		mismatch  *latch.ApprovalMismatchError
		effect    *latch.EffectError
		authority *latch.AuthorityError
		invalid   *latch.InvalidArgumentError
		ambiguous *latch.AmbiguousError
	)
	switch {
	case errors.As(err, &approval):
		r.Reason, r.ApprovalID, r.ActionHash = "approval_required", approval.ApprovalID, approval.ActionHash
		exp := approval.ExpiresAt.UTC()
		r.ExpiresAt = &exp
		return CodeApprovalRequired, r
	case errors.As(err, &denied):
		r.Reason = denied.Reason
		return CodeDenied, r
	case errors.As(err, &mismatch):
		r.Reason, r.ApprovalID = "approval_"+mismatch.Reason, mismatch.ApprovalID
		return CodeApprovalRefused, r
	case errors.As(err, &effect):
		r.EffectKey, r.EffectState = effect.Key, string(effect.State)
		switch effect.State {
		case "committed", "in_progress":
			r.Reason, r.Result = "duplicate_effect", effect.Result
			return CodeDuplicate, r
		case "attempts_exhausted":
			r.Reason = "attempts_exhausted"
			return CodeExhausted, r
		}
		r.Reason = "effect_ambiguous"
		return CodeEffectAmbiguous, r
	case errors.As(err, &authority):
		r.Reason = authority.Reason
		return CodeAuthority, r
	case errors.As(err, &invalid):
		r.Reason = invalid.Reason
		return CodeDenied, r
	case errors.As(err, &ambiguous):
		r.Reason, r.EffectKey, r.EffectState = "ambiguous", ambiguous.Key, "ambiguous"
		return CodeAmbiguous, r
	case errors.Is(err, latch.ErrNotExecuted):
		r.Reason, r.EffectState = "not_executed", "failed"
		return CodeNotExecuted, r
	}
	r.Reason = "internal"
	return CodeInternal, r
}

// wireError is the JSON-RPC error an agent receives.
func wireError(code int64, r Refusal) error {
	data, err := json.Marshal(r)
	if err != nil { // a Refusal always encodes; keep the code even if it did not
		data = nil
	}
	return &jsonrpc.Error{Code: code, Message: r.Detail, Data: data}
}
