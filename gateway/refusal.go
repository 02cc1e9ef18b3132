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
	Reason      string          `json:"reason"`         // snake_case, stable: latch's reason word (docs/errors.md)
	Kind        string          `json:"kind,omitempty"` // the refusal kind, which the code stands for
	Action      string          `json:"action,omitempty"`
	EffectKey   string          `json:"effect_key,omitempty"`
	EffectState string          `json:"effect_state,omitempty"` // committed, in_progress, ambiguous, failed
	ApprovalID  string          `json:"approval_id,omitempty"`
	ExpiresAt   *time.Time      `json:"expires_at,omitempty"`
	ActionHash  string          `json:"action_hash,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`     // the stored result of a committed effect
	ReceiptID   string          `json:"receipt_id,omitempty"` // rcp_…, when a receipt was written
	ActionID    string          `json:"action_id,omitempty"`  // act_…, what `latch inspect` takes
	// Budget, Metric and Window name the budget of a budget refusal (budget_exhausted, …): its
	// id, what it meters, its window in ISO 8601. What is left of it is never said.
	Budget string `json:"budget,omitempty"`
	Metric string `json:"metric,omitempty"`
	Window string `json:"window,omitempty"`
	// Dimension is what an authority refusal failed on: "tasks" for a grant bound to other
	// tasks, "subject", "constraints.amount_lte", … (docs/authority.md).
	Dimension string `json:"dimension,omitempty"`
	// ApprovedArguments are, on approval_mismatch, the arguments the presented approval binds
	// when an approver narrowed them (docs/approvals.md#approve-with-edits): the call to send.
	ApprovedArguments json.RawMessage `json:"approved_arguments,omitempty"`
	Detail            string          `json:"detail,omitempty"`
}

// refusalCodes is the gateway's one table of the refusal vocabulary: the JSON-RPC code of each
// kind latch.RefusalOf gives an error of Guard.Execute. The reason word in the error's data is
// RefusalOf's, the word every surface uses (docs/errors.md); docs/gateway.md lists the codes.
var refusalCodes = map[latch.RefusalKind]int64{
	latch.KindDenied:           CodeDenied,
	latch.KindInvalidArgument:  CodeDenied,
	latch.KindApprovalRequired: CodeApprovalRequired,
	latch.KindApprovalRefused:  CodeApprovalRefused,
	latch.KindCommitted:        CodeDuplicate,
	latch.KindInProgress:       CodeDuplicate,
	latch.KindAmbiguous:        CodeEffectAmbiguous,
	latch.KindOutcomeUnknown:   CodeAmbiguous,
	latch.KindNotExecuted:      CodeNotExecuted,
	latch.KindExhausted:        CodeExhausted,
	latch.KindKeyConflict:      CodeKeyConflict,
	latch.KindAuthority:        CodeAuthority,
	latch.KindIdentity:         CodeUnauthenticated,
	latch.KindOutcomeRefused:   CodeInternal,
	latch.KindRequestKey:       CodeDenied, // a key naming another call: retrying under it never succeeds
	latch.KindInternal:         CodeInternal,
}

// refusal maps an error of Guard.Execute to its JSON-RPC code and data, through
// latch.RefusalOf and refusalCodes.
func refusal(action string, rc *latch.Receipt, err error) (int64, Refusal) {
	lr := latch.RefusalOf(err)
	r := Refusal{Reason: string(lr.Reason), Kind: string(lr.Kind), Action: action, Detail: err.Error(),
		EffectKey: lr.EffectKey, EffectState: effectState(lr.State), ApprovalID: lr.ApprovalID, ActionHash: lr.ActionHash,
		Budget: lr.Budget, Metric: lr.Metric, Window: lr.Window, Dimension: lr.Dimension}
	if rc != nil {
		r.ReceiptID, r.ActionID = rc.ReceiptID, rc.ActionID
	}
	if !lr.ExpiresAt.IsZero() {
		exp := lr.ExpiresAt.UTC()
		r.ExpiresAt = &exp
	}
	if me := (*latch.ApprovalMismatchError)(nil); errors.As(err, &me) {
		r.ApprovedArguments = me.Arguments
	}
	switch lr.Kind {
	case latch.KindCommitted:
		r.Result = lr.Result // a key conflict's result is another call's: never handed on
	case latch.KindNotExecuted:
		r.EffectState = effectState(store.Failed)
	}
	return refusalCodes[lr.Kind], r
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
