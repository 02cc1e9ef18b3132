// Package mcpwire is how latch's refusals and approvals travel over MCP: the JSON-RPC error code
// of each refusal kind and the data object that carries its details ([Map], [Refusal]); what a
// tool call says of itself in its _meta or headers (its request key, task and hop: [RequestKey],
// [Task], [Hop]); and, for an MCP server that runs its tools in process, the whole decision of
// one call ([Run]). A call re-sent after its approval request was granted needs nothing of this
// package to find the grant: the guard finds it by the call's action hash. The MCP gateway (package gateway) and the in-process server middlewares
// (integrations/mcpsdk, integrations/mcpgo) all answer through this package, so an agent reads
// one vocabulary whichever of them protects the tools it calls (docs/gateway.md#refusals).
//
// It imports no MCP SDK: each surface puts the code, message and data this package computes into
// its own SDK's error or result type.
package mcpwire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// JSON-RPC error codes of latch's refusals over MCP, stable across releases. Each code has one
// reason family; Refusal.Reason says which reason within it. They lie outside the range
// JSON-RPC reserves (-32768 to -32000), where MCP SDKs put their own transport errors: a client
// SDK that took -32004 for "server is closing" would report a duplicate as a closed connection.
const (
	CodeInternal         = -31000 // latch could not decide (store or upstream unavailable)
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

// Refusal is the data object of every refusal latch answers over MCP: what an agent needs to
// tell "ask a human" from "already done" from "denied" without parsing the message.
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

// codes is the one table of the refusal vocabulary over MCP: the JSON-RPC code of each kind
// latch.RefusalOf gives an error of Guard.Execute. The reason word in the error's data is
// RefusalOf's, the word every surface uses (docs/errors.md); docs/gateway.md lists the codes.
var codes = map[latch.RefusalKind]int64{
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

// Map is the JSON-RPC code and data of err, an error of Guard.Execute (or Begin, Finish) for
// the call of action; rc is the receipt the call returned, nil when none. The reason and kind
// are latch.RefusalOf's; a committed duplicate carries its stored result, which a key
// conflict's (another call's) never does.
func Map(action string, rc *latch.Receipt, err error) (int64, Refusal) {
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
	return codes[lr.Kind], r
}

// Unauthenticated is the refusal of a call whose session carries no principal; detail says
// how to give one on the surface that refused it.
func Unauthenticated(action, detail string) (int64, Refusal) {
	return CodeUnauthenticated, Refusal{Reason: "unauthenticated", Action: action, Detail: detail}
}

// Internal is the refusal of a call latch could not decide because of err.
func Internal(action string, err error) (int64, Refusal) {
	return CodeInternal, Refusal{Reason: "internal", Action: action, Detail: err.Error()}
}

// effectState is a record's state as agents read it: an attempt holding the key is in_progress.
func effectState(s store.State) string {
	if s == store.Executing {
		return "in_progress"
	}
	return string(s)
}

// Data is r encoded as the data member of a JSON-RPC error; nil only if it did not encode,
// which a Refusal always does.
func Data(r Refusal) json.RawMessage {
	b, err := json.Marshal(r)
	if err != nil {
		return nil
	}
	return b
}

// MetaRequestKey is the _meta key of a tools/call carrying the agent's own request key: a
// string it chose for this one call (a UUID, say) and sends again unchanged when it retries the
// call because the answer was lost. It is the call's request key (latch.WithRequestKey), with the
// replay semantics of the Idempotency-Key header of POST /v1/actions (docs/gateway.md#request-keys).
const MetaRequestKey = "latch/request_key"

// RequestKey is the request key a tool call's _meta carries, "" when none. A value that is not a
// string, or not a request key (store.CheckRequestKey), is an *latch.InvalidArgumentError, to be
// refused before anything is decided, written or run.
func RequestKey(meta map[string]any) (string, error) {
	v, ok := meta[MetaRequestKey]
	if !ok || v == nil {
		return "", nil
	}
	s, isString := v.(string)
	if !isString {
		return "", invalidRequestKey(fmt.Errorf("_meta %s is %T, not a string", MetaRequestKey, v))
	}
	if err := store.CheckRequestKey(s); err != nil {
		return "", invalidRequestKey(fmt.Errorf("_meta %s: %w", MetaRequestKey, err))
	}
	return s, nil
}

func invalidRequestKey(err error) error {
	return &latch.InvalidArgumentError{Reason: "invalid_argument", Err: fmt.Errorf("invalid request key: %w", err)}
}

// ErrWaitEnded is returned by AwaitAnswer when the wait ended before the request was answered or
// expired: the call is answered approval_required and the agent re-sends it later.
var ErrWaitEnded = errors.New("the approval request is still pending")

// AwaitAnswer polls approval request id until it is no longer pending (granted, denied,
// cancelled) or has expired by now(), and returns nil then: the call may present it, and the
// reservation decides — it spends a grant exactly once and refuses a denied or expired request
// by its reason. It returns ErrWaitEnded when until passes or ctx ends first, and the store's
// error when the request cannot be read. tick, when set, is called between polls (to send a
// progress notification, say).
func AwaitAnswer(ctx context.Context, st store.Store, id string, until time.Time, now func() time.Time, tick func()) error {
	delay := 20 * time.Millisecond
	for {
		cur, err := st.Approval(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return ErrWaitEnded
			}
			return fmt.Errorf("read approval request %s while holding the call open: %w", id, err)
		}
		t := now()
		if cur.Status != store.Pending || !t.Before(cur.ExpiresAt) {
			return nil
		}
		if !t.Before(until) {
			return ErrWaitEnded
		}
		timer := time.NewTimer(max(min(delay, until.Sub(t)), time.Millisecond))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ErrWaitEnded
		case <-timer.C:
		}
		if tick != nil {
			tick()
		}
		delay = min(delay*2, time.Second)
	}
}
