// Package refusaltest is the one table of latch's refusals that every surface's tests check
// their wire form against: an error value of each refusal the Go API returns, the kind and
// reason latch.RefusalOf must give it, and — in Wire — what each surface answers for each kind.
// A surface whose mapping drifts from the table fails its own test. It is imported by tests
// only.
package refusaltest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/latchkit/latch"
)

// Case is one refusal: an error value and what RefusalOf must say of it.
type Case struct {
	Name   string
	Err    error
	Kind   latch.RefusalKind
	Reason latch.Reason
}

// Wraps reports whether c's error wraps another call's refusal: an error rebuilt from c's
// refusal carries this call's refusal only, so it need not match the wrapped one's sentinels.
func (c Case) Wraps() bool { return strings.Contains(c.Name, "wrapping another call's") }

// Cases has at least one error of every kind.
var Cases = []Case{
	{"rule", &latch.DeniedError{Action: "a", Reason: "rule[2]"}, latch.KindDenied, latch.ReasonDenied},
	{"bare decision", &latch.DeniedError{Action: "a", Reason: "decision"}, latch.KindDenied, latch.ReasonDenied},
	{"unknown action", &latch.DeniedError{Action: "a", Reason: "unknown_action"}, latch.KindDenied, latch.ReasonUnknownAction},
	{"no matching rule", &latch.DeniedError{Action: "a", Reason: "no_matching_rule"}, latch.KindDenied, latch.ReasonNoMatchingRule},
	{"no principal", &latch.DeniedError{Action: "a", Reason: "no_principal"}, latch.KindDenied, latch.ReasonNoPrincipal},
	{"policy unapproved", &latch.DeniedError{Action: "a", Reason: "policy_unapproved"}, latch.KindDenied, latch.ReasonPolicyUnapproved},
	{"upstream mismatch", &latch.DeniedError{Action: "a", Reason: "upstream_mismatch"}, latch.KindDenied, latch.ReasonUpstreamMismatch},
	{"upstream unverified", &latch.DeniedError{Action: "a", Reason: "upstream_unverified"}, latch.KindDenied, latch.ReasonUpstreamUnverified},
	{"principal expired", &latch.DeniedError{Action: "a", Reason: "principal_expired"}, latch.KindDenied, latch.ReasonPrincipalExpired},
	{"out of scope", &latch.ScopeError{Action: "a", Reason: "out_of_scope", Resource: "customer:EU-7"}, latch.KindDenied, latch.ReasonOutOfScope},
	{"scope unavailable", &latch.ScopeError{Action: "a", Reason: "scope_unavailable", Resource: "customer:EU-7", Err: errors.New("the scope provider did not answer within 2s")}, latch.KindDenied, latch.ReasonScopeUnavailable},
	{"precondition changed", &latch.PreconditionError{Action: "a", ApprovalID: "apr_1", Reason: "precondition_changed", Captured: "sha256:aa", CapturedAt: time.Unix(0, 0), Current: "sha256:bb"}, latch.KindDenied, latch.ReasonPreconditionChanged},
	{"precondition missing", &latch.PreconditionError{Action: "a", ApprovalID: "apr_1", Reason: "precondition_missing", Captured: "sha256:aa", CapturedAt: time.Unix(0, 0)}, latch.KindDenied, latch.ReasonPreconditionMissing},
	{"precondition unavailable", &latch.PreconditionError{Action: "a", Reason: "precondition_unavailable", Err: errors.New("the precondition provider did not answer within 2s")}, latch.KindDenied, latch.ReasonPreconditionUnavailable},
	{"budget exhausted", &latch.BudgetError{Action: "a", Reason: "budget_exhausted", Budget: "support", Metric: "count", Window: 24 * time.Hour}, latch.KindDenied, latch.ReasonBudgetExhausted},
	{"budget exhausted, as the store says it", &latch.BudgetError{Reason: "budget_exhausted", Budget: "dlg_0123456789abcdef0123456789abcdef", Metric: "amount", Window: time.Hour, Detail: "budget exhausted"}, latch.KindDenied, latch.ReasonBudgetExhausted},
	{"budget metric missing", &latch.BudgetError{Action: "a", Reason: "budget_metric_missing", Budget: "action:a:agent:bot", Metric: "amount", Window: 30 * 24 * time.Hour}, latch.KindDenied, latch.ReasonBudgetMetricMissing},
	{"budget metric invalid", &latch.BudgetError{Action: "a", Reason: "budget_metric_invalid", Budget: "support", Metric: "amount", Window: 15 * time.Minute}, latch.KindDenied, latch.ReasonBudgetMetricInvalid},
	{"budget needs an effect key", &latch.BudgetError{Action: "a", Reason: "budget_needs_effect_key", Budget: "support", Metric: "count", Window: 24 * time.Hour}, latch.KindDenied, latch.ReasonBudgetNeedsEffectKey},
	{"missing argument", &latch.DeniedError{Action: "a", Reason: "missing_argument", Argument: "amount", Pointer: "/amount"}, latch.KindInvalidArgument, latch.ReasonMissingArgument},
	{"invalid arguments", &latch.DeniedError{Action: "a", Reason: "invalid_arguments", Argument: "amount", Pointer: "/amount"}, latch.KindInvalidArgument, latch.ReasonInvalidArguments},
	{"invalid argument", &latch.InvalidArgumentError{Reason: "invalid_argument", Pointer: "/x", Err: errors.New("a float")}, latch.KindInvalidArgument, latch.ReasonInvalidArgument},
	{"effect key error", &latch.InvalidArgumentError{Reason: "effect_key_error", Err: errors.New("no invoice_id")}, latch.KindInvalidArgument, latch.ReasonEffectKeyError},
	{"request key required", &latch.InvalidArgumentError{Reason: "request_key_required", Err: errors.New("the call carries no request key")}, latch.KindInvalidArgument, latch.ReasonRequestKeyRequired},
	{"approval required", &latch.ApprovalRequiredError{ApprovalID: "apr_1", ActionHash: "sha256:ab", ExpiresAt: time.Unix(0, 0)}, latch.KindApprovalRequired, latch.ReasonApprovalRequired},
	{"approval unknown", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "unknown"}, latch.KindApprovalRefused, latch.ReasonApprovalUnknown},
	{"approval mismatch", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "mismatch"}, latch.KindApprovalRefused, latch.ReasonApprovalMismatch},
	{"approval consumed", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "consumed"}, latch.KindApprovalRefused, latch.ReasonApprovalConsumed},
	{"approval denied", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "denied"}, latch.KindApprovalRefused, latch.ReasonApprovalDenied},
	{"approval pending", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "pending"}, latch.KindApprovalRefused, latch.ReasonApprovalPending},
	{"approval expired", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "expired"}, latch.KindApprovalRefused, latch.ReasonApprovalExpired},
	{"standing approval exhausted", &latch.ApprovalMismatchError{ApprovalID: "sta_1", Reason: "exhausted"}, latch.KindApprovalRefused, latch.ReasonApprovalExhausted},
	{"standing approval revoked", &latch.ApprovalMismatchError{ApprovalID: "sta_1", Reason: "revoked"}, latch.KindApprovalRefused, latch.ReasonApprovalRevoked},
	{"committed", &latch.EffectError{Key: "k", State: latch.StateCommitted, Reason: "committed", Attempt: 1, Result: json.RawMessage(`{"id":1}`)}, latch.KindCommitted, latch.ReasonCommitted},
	{"in progress", &latch.EffectError{Key: "k", State: latch.StateExecuting, Reason: "in_progress", Attempt: 1}, latch.KindInProgress, latch.ReasonInProgress},
	{"ambiguous earlier attempt", &latch.EffectError{Key: "k", State: latch.StateAmbiguous, Reason: "ambiguous", Attempt: 1}, latch.KindAmbiguous, latch.ReasonAmbiguous},
	{"outcome conflict", &latch.EffectError{Key: "k", State: latch.StateAmbiguous, Reason: "outcome_conflict", Attempt: 1}, latch.KindAmbiguous, latch.ReasonOutcomeConflict},
	{"attempts exhausted", &latch.EffectError{Key: "k", State: latch.StateFailed, Reason: "attempts_exhausted", Attempt: 3}, latch.KindExhausted, latch.ReasonAttemptsExhausted},
	{"key conflict on committed", &latch.EffectError{Key: "k", State: latch.StateCommitted, Reason: "key_conflict", Attempt: 1}, latch.KindKeyConflict, latch.ReasonKeyConflict},
	{"key conflict on executing", &latch.EffectError{Key: "k", State: latch.StateExecuting, Reason: "key_conflict", Attempt: 1}, latch.KindKeyConflict, latch.ReasonKeyConflict},
	{"key conflict on ambiguous", &latch.EffectError{Key: "k", State: latch.StateAmbiguous, Reason: "key_conflict", Attempt: 1}, latch.KindKeyConflict, latch.ReasonKeyConflict},
	{"key lost", &latch.EffectError{Key: "k", State: latch.StateAmbiguous, Reason: "key_lost", Attempt: 1}, latch.KindOutcomeUnknown, latch.ReasonKeyLost},
	{"this attempt ambiguous", &latch.AmbiguousError{Key: "k", Err: errors.New("timeout")}, latch.KindOutcomeUnknown, latch.ReasonOutcomeUnknown},
	{"not executed", latch.NotExecuted(errors.New("card declined")), latch.KindNotExecuted, latch.ReasonNotExecuted},
	{"no authority", &latch.AuthorityError{Reason: "no_authority"}, latch.KindAuthority, latch.ReasonNoAuthority},
	{"authority constraint", &latch.AuthorityError{Reason: "authority_constraint", Dimension: "constraints.amount_lte"}, latch.KindAuthority, latch.ReasonAuthorityConstraint},
	{"hop not usable", &latch.AuthorityError{Reason: "authority_hop", Dimension: "hop"}, latch.KindAuthority, latch.ReasonAuthorityHop},
	{"no authority for the task", &latch.AuthorityError{Reason: "no_authority", Dimension: "tasks"}, latch.KindAuthority, latch.ReasonNoAuthority},
	{"identity", fmt.Errorf("%w: no credential", latch.ErrIdentity), latch.KindIdentity, latch.ReasonIdentity},
	{"credential revoked", fmt.Errorf("%w: %w", latch.ErrIdentity, &latch.IdentityError{Reason: "credential_revoked", Detail: "jti t-1 of https://idp.example was revoked"}), latch.KindIdentity, latch.ReasonCredentialRevoked},
	{"revocation feed stale", &latch.IdentityError{Reason: "revocation_feed_stale", Detail: "the revocation feed was last read 10m ago"}, latch.KindIdentity, latch.ReasonRevocationFeedStale},
	{"outcome already recorded", &latch.OutcomeError{ActionID: "act_1", Reason: "already_recorded"}, latch.KindOutcomeRefused, latch.ReasonAlreadyRecorded},
	{"outcome not holder", &latch.OutcomeError{ActionID: "act_1", Reason: "not_holder"}, latch.KindOutcomeRefused, latch.ReasonNotHolder},
	{"resume of a call not suspended", &latch.OutcomeError{ActionID: "act_1", Reason: "not_suspended"}, latch.KindOutcomeRefused, latch.ReasonNotSuspended},
	{"suspend while suspended", &latch.OutcomeError{ActionID: "act_1", Reason: "suspension_open"}, latch.KindOutcomeRefused, latch.ReasonSuspensionOpen},
	{"resume with a wrong token", &latch.OutcomeError{ActionID: "act_1", Reason: "suspension_token"}, latch.KindOutcomeRefused, latch.ReasonSuspensionToken},
	{"resume with a spent token", &latch.OutcomeError{ActionID: "act_1", Reason: "suspension_resumed"}, latch.KindOutcomeRefused, latch.ReasonSuspensionResumed},
	{"resume with other arguments", &latch.OutcomeError{ActionID: "act_1", Reason: "suspension_arguments"}, latch.KindOutcomeRefused, latch.ReasonSuspensionArguments},
	{"resume after the lease lapsed", &latch.EffectError{Key: "refund:r1", State: latch.StateAmbiguous, Reason: "ambiguous", Attempt: 1, Detail: "the lease lapsed while its execution was suspended"}, latch.KindAmbiguous, latch.ReasonAmbiguous},
	{"request key used by another principal", &latch.RequestKeyError{Key: "k1", Reason: "request_key_other_principal", Detail: "another principal"}, latch.KindRequestKey, latch.ReasonRequestKeyOtherPrincipal},
	{"request key used for another action", &latch.RequestKeyError{Key: "k1", Reason: "request_key_other_action", Detail: "another action"}, latch.KindRequestKey, latch.ReasonRequestKeyOtherAction},
	// The outermost latch error is the refusal: an executor's error may wrap another call's.
	{"this attempt ambiguous, wrapping another call's refusal", &latch.AmbiguousError{Key: "k", Err: fmt.Errorf("inner call: %w", &latch.ApprovalRequiredError{ApprovalID: "apr_2"})}, latch.KindOutcomeUnknown, latch.ReasonOutcomeUnknown},
	{"not executed, wrapping another call's refusal", latch.NotExecuted(&latch.EffectError{Key: "other", State: latch.StateCommitted, Reason: "committed"}), latch.KindNotExecuted, latch.ReasonNotExecuted},
	{"store down", errors.New("dial tcp: connection refused"), latch.KindInternal, latch.ReasonInternal},
}

// WireForm is what each surface answers for one kind of refusal.
type WireForm struct {
	HTTP    int               // latch serve's status (its problem type is the reason word)
	Gateway int64             // the MCP gateway's JSON-RPC code
	Webhook int               // the webhook receiver's status (0: a committed duplicate is answered with its stored result)
	Task    latch.TaskVerdict // what River, asynq and Temporal do with the task
}

// Wire is every surface's answer to every kind: the table docs/errors.md prints.
var Wire = map[latch.RefusalKind]WireForm{
	latch.KindDenied:           {http.StatusForbidden, -31001, http.StatusForbidden, latch.TaskStop},
	latch.KindInvalidArgument:  {http.StatusUnprocessableEntity, -31001, http.StatusBadRequest, latch.TaskStop},
	latch.KindApprovalRequired: {http.StatusForbidden, -31002, http.StatusForbidden, latch.TaskStop},
	latch.KindApprovalRefused:  {http.StatusForbidden, -31003, http.StatusForbidden, latch.TaskStop},
	latch.KindCommitted:        {http.StatusConflict, -31004, 0, latch.TaskDuplicate},
	latch.KindInProgress:       {http.StatusConflict, -31004, http.StatusConflict, latch.TaskInProgress},
	latch.KindAmbiguous:        {http.StatusConflict, -31005, http.StatusServiceUnavailable, latch.TaskStop},
	latch.KindOutcomeUnknown:   {http.StatusConflict, -31006, http.StatusServiceUnavailable, latch.TaskStop},
	latch.KindNotExecuted:      {http.StatusConflict, -31007, http.StatusInternalServerError, latch.TaskRetry},
	latch.KindExhausted:        {http.StatusConflict, -31010, http.StatusInternalServerError, latch.TaskStop},
	latch.KindKeyConflict:      {http.StatusConflict, -31011, http.StatusConflict, latch.TaskStop},
	latch.KindAuthority:        {http.StatusForbidden, -31008, http.StatusForbidden, latch.TaskStop},
	latch.KindIdentity:         {http.StatusUnauthorized, -31009, http.StatusForbidden, latch.TaskStop},
	latch.KindOutcomeRefused:   {http.StatusConflict, -31000, http.StatusInternalServerError, latch.TaskStop},
	latch.KindRequestKey:       {http.StatusUnprocessableEntity, -31001, http.StatusInternalServerError, latch.TaskStop},
	latch.KindInternal:         {http.StatusInternalServerError, -31000, http.StatusInternalServerError, latch.TaskRetry},
}

// HTTPByReason refines Wire's HTTP status for the reasons whose status is not their kind's.
var HTTPByReason = map[latch.Reason]int{
	latch.ReasonNoSuchAction: http.StatusNotFound,
	latch.ReasonNotHolder:    http.StatusForbidden,
}

// HTTPStatus is latch serve's status for a refusal of kind k and reason r.
func HTTPStatus(k latch.RefusalKind, r latch.Reason) int {
	if s, ok := HTTPByReason[r]; ok {
		return s
	}
	return Wire[k].HTTP
}

// Sentinels are every sentinel a refusal may match.
var Sentinels = []error{
	latch.ErrDenied, latch.ErrApprovalRequired, latch.ErrApprovalMismatch, latch.ErrDuplicateEffect,
	latch.ErrAlreadyCommitted, latch.ErrInProgress, latch.ErrOutcomeConflict, latch.ErrAmbiguousEffect,
	latch.ErrAmbiguous, latch.ErrNotExecuted, latch.ErrAttemptsExhausted, latch.ErrAuthority,
	latch.ErrIdentity, latch.ErrInvalidArgument, latch.ErrOutcomeRefused, latch.ErrRequestKeyMismatch,
	latch.ErrScope,
	latch.ErrBudgetExhausted,
}
