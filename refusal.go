package latch

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
)

// RefusalKind is the class of a refusal: what the caller has to do about it. Every surface maps
// a kind to its own wire form in one table — an HTTP status, a JSON-RPC code, a task verdict, a
// webhook status — so the same refusal means the same thing everywhere (docs/errors.md).
type RefusalKind string

// Refusal kinds. Each is also the reason word of its most common reason.
const (
	KindDenied           RefusalKind = "denied"               // the policy refused the call, or it had no principal
	KindInvalidArgument  RefusalKind = "invalid_argument"     // the arguments cannot form the action, or do not fit the policy's arguments
	KindApprovalRequired RefusalKind = "approval_required"    // a person must approve; ApprovalID names the stored request
	KindApprovalRefused  RefusalKind = "approval_refused"     // the presented approval cannot be spent on this call
	KindCommitted        RefusalKind = "committed"            // a duplicate: the effect happened; Result holds its stored result
	KindInProgress       RefusalKind = "in_progress"          // another attempt holds the key under a live lease
	KindAmbiguous        RefusalKind = "ambiguous"            // an earlier attempt's outcome is unknown: resolve it first
	KindOutcomeUnknown   RefusalKind = "outcome_unknown"      // this call's outcome is unknown: it may have run
	KindNotExecuted      RefusalKind = "not_executed"         // this call failed and its executor said it did not act
	KindExhausted        RefusalKind = "attempts_exhausted"   // the effect failed as many times as max_attempts allows
	KindKeyConflict      RefusalKind = "key_conflict"         // the key holds an attempt of other arguments
	KindAuthority        RefusalKind = "authority"            // no grant lets this principal propose this action
	KindIdentity         RefusalKind = "identity"             // the identity provider could not establish a principal
	KindOutcomeRefused   RefusalKind = "outcome_refused"      // a begun call's outcome or lease extension was refused
	KindRequestKey       RefusalKind = "request_key_mismatch" // the begin's request key names another principal's or another request
	KindInternal         RefusalKind = "internal"             // latch could not decide or record: nothing is known to have run
)

// Reason is the snake_case word that names one refusal. Receipts, the CLI's JSON, HTTP problem
// types, the gateway, webhooks, task errors, metrics and spans all use these words, and only
// these (docs/errors.md lists them with each surface's code). A new case gets a new word;
// a word is never renamed.
type Reason string

// Reasons, by kind.
const (
	// KindDenied
	ReasonDenied           Reason = "denied" // a rule or a bare decision denied it; Refusal.Rule says which
	ReasonUnknownAction    Reason = policy.ReasonUnknownAction
	ReasonNoMatchingRule   Reason = policy.ReasonNoMatchingRule
	ReasonNoPrincipal      Reason = "no_principal"
	ReasonPrincipalExpired Reason = "principal_expired"
	ReasonOutOfScope       Reason = "out_of_scope"      // the resource is not in the principal's scope (ScopeError)
	ReasonScopeUnavailable Reason = "scope_unavailable" // the scope provider failed, timed out or answered garbage
	// The state of the target (PreconditionError): Refusal.ApprovalID names the approval
	// presented, which stays as it was.
	ReasonPreconditionChanged     Reason = "precondition_changed"     // its fingerprint differs from the one the approval was requested on
	ReasonPreconditionMissing     Reason = "precondition_missing"     // a fingerprint on one side only
	ReasonPreconditionUnavailable Reason = "precondition_unavailable" // the precondition provider failed, timed out or answered garbage
	// ReasonPolicyUnapproved: Config.RequireApprovedPolicy is set and the policy in force has no
	// approved change (docs/governance.md).
	ReasonPolicyUnapproved Reason = "policy_unapproved"
	// The gateway's upstream pins (docs/gateway.md#pinning): the tool's definition, as the
	// gateway last listed it, hashes otherwise than its pin (upstream_mismatch), or the gateway
	// holds no definition of the pinned tool to check (upstream_unverified). The upstream is
	// not called.
	ReasonUpstreamMismatch   Reason = "upstream_mismatch"
	ReasonUpstreamUnverified Reason = "upstream_unverified"
	// The budgets (BudgetError): Refusal.Budget, Metric and Window say which budget.
	ReasonBudgetExhausted      Reason = "budget_exhausted"        // no room left in the window for this call's amount
	ReasonBudgetMetricMissing  Reason = "budget_metric_missing"   // the metered argument is not passed
	ReasonBudgetMetricInvalid  Reason = "budget_metric_invalid"   // the metered argument is not a non-negative integer
	ReasonBudgetNeedsEffectKey Reason = "budget_needs_effect_key" // a budgeted call has no effect key

	// KindInvalidArgument
	ReasonInvalidArgument  Reason = "invalid_argument"
	ReasonEffectKeyError   Reason = "effect_key_error"
	ReasonMissingArgument  Reason = policy.ReasonMissingArgument
	ReasonInvalidArguments Reason = policy.ReasonInvalidArguments

	// ReasonRequestKeyRequired (KindInvalidArgument): the action's effect template names the
	// effect with the caller's request key ({$request_key}) and the call carries none.
	ReasonRequestKeyRequired Reason = "request_key_required"

	// KindApprovalRequired
	ReasonApprovalRequired Reason = "approval_required"

	// KindApprovalRefused: the presented approval is …
	ReasonApprovalUnknown  Reason = "approval_unknown"  // … not in the store
	ReasonApprovalMismatch Reason = "approval_mismatch" // … for another action hash
	ReasonApprovalConsumed Reason = "approval_consumed" // … spent already
	ReasonApprovalDenied   Reason = "approval_denied"   // … denied by a person
	ReasonApprovalPending  Reason = "approval_pending"  // … not answered yet
	ReasonApprovalExpired  Reason = "approval_expired"  // … past its expiry
	// A presented standing approval (docs/approvals.md#standing-approvals) is …
	ReasonApprovalExhausted Reason = "approval_exhausted" // … spent: every use, or its whole total
	ReasonApprovalRevoked   Reason = "approval_revoked"   // … revoked by a person

	// The effect's state: KindCommitted, KindInProgress, KindAmbiguous, KindExhausted,
	// KindKeyConflict, KindOutcomeUnknown.
	ReasonCommitted         Reason = "committed"
	ReasonInProgress        Reason = "in_progress"
	ReasonAmbiguous         Reason = "ambiguous"
	ReasonOutcomeConflict   Reason = "outcome_conflict" // a holder's outcome contradicts the resolution of its attempt
	ReasonAttemptsExhausted Reason = "attempts_exhausted"
	ReasonKeyConflict       Reason = "key_conflict"
	ReasonOutcomeUnknown    Reason = "outcome_unknown" // this call's executor gave no outcome latch can trust
	ReasonKeyLost           Reason = "key_lost"        // this call's lease lapsed and its key was resolved or taken meanwhile
	ReasonNotExecuted       Reason = "not_executed"

	// KindAuthority
	ReasonNoAuthority         Reason = authority.ReasonNoAuthority
	ReasonAuthorityUnreadable Reason = authority.ReasonUnreadable
	ReasonAuthorityEscalation Reason = authority.ReasonEscalation
	ReasonAuthorityRevoked    Reason = authority.ReasonRevoked
	ReasonAuthorityExpired    Reason = authority.ReasonExpired
	ReasonAuthorityConstraint Reason = authority.ReasonConstraint
	// ReasonAuthorityHop: the call presented a hop that does not exist, is not live (revoked,
	// expired, or its chain no longer holds) or is addressed to another agent (AuthorityError).
	ReasonAuthorityHop Reason = authority.ReasonHop

	// KindIdentity
	ReasonIdentity Reason = "identity"
	// ReasonCredentialRevoked: a revocation feed reports the credential revoked (by its jti, or
	// its subject's credentials issued before a time), before its exp (IdentityError).
	ReasonCredentialRevoked Reason = "credential_revoked"
	// ReasonRevocationFeedStale: the revocation feed covering the credential's issuer was last
	// read longer ago than its maximum staleness, so no credential of that issuer is accepted.
	ReasonRevocationFeedStale Reason = "revocation_feed_stale"

	// KindOutcomeRefused
	ReasonNoSuchAction    Reason = "no_such_action"
	ReasonNotHolder       Reason = "not_holder"
	ReasonAlreadyRecorded Reason = "already_recorded"
	ReasonLeaseLost       Reason = "lease_lost"
	ReasonNoLease         Reason = "no_lease"
	ReasonOutcomeRefused  Reason = "outcome_refused" // refused for a reason the error does not carry
	// Suspended executions (Suspend, Resume): the call has no suspension to resume
	// (not_suspended), is suspended already and was not resumed (suspension_open), the token is
	// not its suspension's (suspension_token) or is, but was used (suspension_resumed), or the
	// arguments differ canonically from the suspended call's (suspension_arguments). A resume
	// after the lease lapsed is refused ambiguous, by the effect's state.
	ReasonNotSuspended        Reason = "not_suspended"
	ReasonSuspensionOpen      Reason = "suspension_open"
	ReasonSuspensionToken     Reason = "suspension_token"
	ReasonSuspensionResumed   Reason = "suspension_resumed"
	ReasonSuspensionArguments Reason = "suspension_arguments"

	// KindRequestKey: the request key was used before …
	ReasonRequestKeyOtherPrincipal Reason = "request_key_other_principal"  // … by another principal
	ReasonRequestKeyOtherAction    Reason = "request_key_other_action"     // … for another action hash
	ReasonRequestKeyOtherEffectKey Reason = "request_key_other_effect_key" // … for another effect key
	ReasonRequestKeyOtherApproval  Reason = "request_key_other_approval"   // … presenting another approval

	// KindInternal
	ReasonInternal Reason = "internal"
)

// Refusal is what a refused (or unknown) call's error says, as data: the one mapping every
// surface derives its wire form from. Fields that do not apply are zero.
type Refusal struct {
	Kind   RefusalKind
	Reason Reason
	// Rule is the policy rule that denied the call (rule[2], or decision for a bare
	// decision: deny) when Reason is denied.
	Rule string

	EffectKey  string
	State      State // the effect record's state, when the refusal is about it
	Attempt    int
	Result     json.RawMessage // the stored result of a committed effect
	ApprovalID string          // the stored request (approval_required) or the one presented
	ActionHash string          // approval_required: the hash the person approves
	ExpiresAt  time.Time       // approval_required: when the stored request expires
	ActionID   string          // outcome_refused: the begun call
	Argument   string          // the argument at fault (missing_argument, invalid_arguments)
	Pointer    string          // the JSON pointer of the value at fault
	Dimension  string          // authority: what did not hold
	// Budget, Metric and Window name the budget of a budget refusal: the budget's id (a
	// grant's id, or an action's per-principal budget), what it meters, and its window in ISO
	// 8601 ("P1D"). How much of it is left is never said.
	Budget string
	Metric string
	Window string
	Detail string // the error's message, for people
}

// RefusalOf returns what err refuses, or nil for a nil error. An error latch does not know is
// KindInternal: nothing about the call can be said from it.
func RefusalOf(err error) *Refusal {
	if err == nil {
		return nil
	}
	r := &Refusal{Detail: strings.TrimPrefix(err.Error(), "latch: ")}
	if !outermost(err, r) {
		r.Kind, r.Reason = sentinelRefusal(err)
	}
	return r
}

// outermost fills r from the outermost latch error in err's tree (depth first, the wrapper
// before what it wraps) and reports whether it found one. The outermost one is the refusal:
// an executor's error wrapped in this call's AmbiguousError may itself wrap another call's
// refusal, which says nothing about this call.
func outermost(err error, r *Refusal) bool {
	switch e := err.(type) {
	case *AmbiguousError:
		r.Kind, r.Reason, r.EffectKey = KindOutcomeUnknown, ReasonOutcomeUnknown, e.Key
		if e.Key != "" {
			r.State = StateAmbiguous
		}
		return true
	case *notExecuted:
		r.Kind, r.Reason = KindNotExecuted, ReasonNotExecuted
		return true
	case *ApprovalRequiredError:
		r.Kind, r.Reason = KindApprovalRequired, ReasonApprovalRequired
		r.ApprovalID, r.ActionHash, r.EffectKey, r.ExpiresAt = e.ApprovalID, e.ActionHash, e.EffectKey, e.ExpiresAt
		return true
	case *DeniedError:
		r.Kind, r.Reason = KindDenied, Reason(e.Reason)
		switch {
		case strings.HasPrefix(e.Reason, "rule[") || e.Reason == policy.ReasonDecision:
			r.Reason, r.Rule = ReasonDenied, e.Reason
		case e.Reason == policy.ReasonMissingArgument || e.Reason == policy.ReasonInvalidArguments:
			r.Kind = KindInvalidArgument
		}
		r.Argument, r.Pointer = e.Argument, e.Pointer
		return true
	case *ScopeError:
		r.Kind, r.Reason = KindDenied, Reason(e.Reason)
		return true
	case *PreconditionError:
		r.Kind, r.Reason, r.ApprovalID = KindDenied, Reason(e.Reason), e.ApprovalID
		return true
	case *ApprovalMismatchError:
		r.Kind, r.Reason, r.ApprovalID = KindApprovalRefused, Reason("approval_"+e.Reason), e.ApprovalID
		return true
	case *EffectError:
		r.Kind, r.Reason = effectKind(e.Reason), Reason(e.Reason)
		r.EffectKey, r.State, r.Attempt, r.Result = e.Key, e.State, e.Attempt, e.Result
		return true
	case *AuthorityError:
		r.Kind, r.Reason, r.Dimension = KindAuthority, Reason(e.Reason), e.Dimension
		return true
	case *BudgetError:
		r.Kind, r.Reason, r.Budget, r.Metric = KindDenied, Reason(e.Reason), e.Budget, e.Metric
		if e.Window > 0 {
			r.Window = policy.FormatISODuration(e.Window)
		}
		return true
	case *InvalidArgumentError:
		r.Kind, r.Reason, r.Pointer = KindInvalidArgument, Reason(e.Reason), e.Pointer
		return true
	case *OutcomeError:
		r.Kind, r.Reason, r.ActionID = KindOutcomeRefused, Reason(e.Reason), e.ActionID
		return true
	case *RequestKeyError:
		r.Kind, r.Reason = KindRequestKey, Reason(e.Reason)
		return true
	case *IdentityError:
		r.Kind, r.Reason = KindIdentity, Reason(e.Reason)
		if r.Reason == "" {
			r.Reason = ReasonIdentity
		}
		return true
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return outermost(inner, r)
		}
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if inner != nil && outermost(inner, r) {
				return true
			}
		}
	}
	return false
}

// sentinelRefusal is the kind and reason of an error that carries no refusal data, only a
// sentinel (a caller's own fmt.Errorf("%w", latch.ErrDenied)).
func sentinelRefusal(err error) (RefusalKind, Reason) {
	for _, s := range []struct {
		err    error
		kind   RefusalKind
		reason Reason
	}{
		{ErrNotExecuted, KindNotExecuted, ReasonNotExecuted},
		{ErrIdentity, KindIdentity, ReasonIdentity},
		{ErrAmbiguous, KindOutcomeUnknown, ReasonOutcomeUnknown},
		{ErrApprovalRequired, KindApprovalRequired, ReasonApprovalRequired},
		{ErrApprovalMismatch, KindApprovalRefused, ReasonApprovalMismatch},
		{ErrInvalidArgument, KindInvalidArgument, ReasonInvalidArgument},
		{ErrBudgetExhausted, KindDenied, ReasonBudgetExhausted},
		{ErrDenied, KindDenied, ReasonDenied},
		{ErrAuthority, KindAuthority, ReasonNoAuthority},
		{ErrAlreadyCommitted, KindCommitted, ReasonCommitted},
		{ErrInProgress, KindInProgress, ReasonInProgress},
		{ErrAttemptsExhausted, KindExhausted, ReasonAttemptsExhausted},
		{ErrAmbiguousEffect, KindAmbiguous, ReasonAmbiguous},
		{ErrOutcomeConflict, KindAmbiguous, ReasonOutcomeConflict},
		// A bare duplicate says the key is taken, not how: asked again later, latch decides anew.
		{ErrDuplicateEffect, KindInProgress, ReasonInProgress},
		{ErrOutcomeRefused, KindOutcomeRefused, ReasonOutcomeRefused},
		{ErrRequestKeyMismatch, KindRequestKey, ReasonRequestKeyOtherAction},
	} {
		if errors.Is(err, s.err) {
			return s.kind, s.reason
		}
	}
	return KindInternal, ReasonInternal
}

// effectKind is the kind of an EffectError's reason.
func effectKind(reason string) RefusalKind {
	switch Reason(reason) {
	case ReasonCommitted:
		return KindCommitted
	case ReasonInProgress:
		return KindInProgress
	case ReasonAttemptsExhausted:
		return KindExhausted
	case ReasonKeyConflict:
		return KindKeyConflict
	case ReasonKeyLost:
		return KindOutcomeUnknown
	}
	return KindAmbiguous // ambiguous, outcome_conflict
}

// IsRefusal reports whether the kind is a decision about the call (a refusal a caller acts on)
// rather than an error latch met or an outcome of the call itself.
func (k RefusalKind) IsRefusal() bool {
	switch k {
	case KindInternal, KindOutcomeUnknown, KindNotExecuted:
		return false
	}
	return k != ""
}

// Err returns an error carrying r, typed as the Go API types the same refusal: RefusalOf of it
// gives r back (Detail aside), and errors.Is matches the sentinel of its kind. The Go client
// uses it to turn an HTTP problem into the error a local Guard would have returned.
func (r *Refusal) Err() error {
	if r == nil {
		return nil
	}
	detail := r.Detail
	switch r.Kind {
	case KindApprovalRequired:
		return &ApprovalRequiredError{ApprovalID: r.ApprovalID, ActionHash: r.ActionHash, EffectKey: r.EffectKey, ExpiresAt: r.ExpiresAt}
	case KindDenied:
		if r.Reason == ReasonOutOfScope || r.Reason == ReasonScopeUnavailable {
			return &ScopeError{Reason: string(r.Reason), Detail: detail}
		}
		if isPreconditionReason(r.Reason) {
			return &PreconditionError{Reason: string(r.Reason), ApprovalID: r.ApprovalID, Detail: detail}
		}
		if isBudgetReason(r.Reason) {
			w, _ := policy.ParseISODuration(r.Window) // a window that does not read is left out, as on the wire
			return &BudgetError{Reason: string(r.Reason), Budget: r.Budget, Metric: r.Metric, Window: w, Detail: detail}
		}
		reason := string(r.Reason)
		if r.Reason == ReasonDenied && r.Rule != "" {
			reason = r.Rule
		}
		return &DeniedError{Reason: reason, Argument: r.Argument, Pointer: r.Pointer, Detail: detail}
	case KindInvalidArgument:
		if r.Reason == ReasonMissingArgument || r.Reason == ReasonInvalidArguments {
			return &DeniedError{Reason: string(r.Reason), Argument: r.Argument, Pointer: r.Pointer, Detail: detail}
		}
		return &InvalidArgumentError{Reason: string(r.Reason), Pointer: r.Pointer, Err: errors.New(detail)}
	case KindApprovalRefused:
		return &ApprovalMismatchError{ApprovalID: r.ApprovalID, Reason: strings.TrimPrefix(string(r.Reason), "approval_"), Detail: detail}
	case KindCommitted, KindInProgress, KindAmbiguous, KindExhausted, KindKeyConflict:
		return &EffectError{Key: r.EffectKey, State: r.State, Reason: string(r.Reason), Attempt: r.Attempt, Result: r.Result, Detail: detail}
	case KindOutcomeUnknown:
		if r.Reason == ReasonKeyLost {
			return &EffectError{Key: r.EffectKey, State: r.State, Reason: string(r.Reason), Attempt: r.Attempt, Detail: detail}
		}
		return &AmbiguousError{Key: r.EffectKey, Err: errors.New(detail)}
	case KindAuthority:
		return &AuthorityError{Reason: string(r.Reason), Dimension: r.Dimension, Detail: detail}
	case KindIdentity:
		return &IdentityError{Reason: string(r.Reason), Detail: detail}
	case KindNotExecuted:
		return NotExecuted(errors.New(detail))
	case KindOutcomeRefused:
		return &OutcomeError{ActionID: r.ActionID, Reason: string(r.Reason), Detail: detail}
	case KindRequestKey:
		return &RequestKeyError{Reason: string(r.Reason), Detail: detail}
	}
	return &internalError{detail: detail}
}

// IdentityError is an identity refusal whose reason is more precise than identity: an
// IdentityProvider wraps one in its error (credential_revoked, revocation_feed_stale), and
// RefusalOf reads its Reason. It matches ErrIdentity. The Go client also rebuilds every identity
// refusal of the wire as one.
type IdentityError struct {
	Reason string // a reason word of kind identity; "" reads as identity
	Detail string
}

func (e *IdentityError) Error() string {
	d := strings.TrimPrefix(e.Detail, "latch: identity: ")
	if e.Reason == "" || e.Reason == string(ReasonIdentity) {
		return "latch: identity: " + d
	}
	return "latch: identity: " + e.Reason + ": " + d
}

// Is reports whether target is ErrIdentity.
func (e *IdentityError) Is(target error) bool { return target == ErrIdentity }

// internalError is an error latch met, rebuilt from its wire form: it matches no sentinel.
type internalError struct{ detail string }

func (e *internalError) Error() string { return "latch: " + e.detail }

// RefusalKinds returns every kind, in the order of their declaration.
func RefusalKinds() []RefusalKind {
	return []RefusalKind{KindDenied, KindInvalidArgument, KindApprovalRequired, KindApprovalRefused,
		KindCommitted, KindInProgress, KindAmbiguous, KindOutcomeUnknown, KindNotExecuted, KindExhausted,
		KindKeyConflict, KindAuthority, KindIdentity, KindOutcomeRefused, KindRequestKey, KindInternal}
}

// NeedsResolution reports whether a refusal of kind k leaves its effect waiting for a person or
// a reconcile hook: this call's outcome is unknown, or an earlier attempt's is.
func (k RefusalKind) NeedsResolution() bool { return k == KindAmbiguous || k == KindOutcomeUnknown }

// reasonKinds is the kind of every reason word.
var reasonKinds = map[Reason]RefusalKind{
	ReasonDenied: KindDenied, ReasonUnknownAction: KindDenied, ReasonNoMatchingRule: KindDenied,
	ReasonNoPrincipal: KindDenied, ReasonPrincipalExpired: KindDenied,
	ReasonOutOfScope: KindDenied, ReasonScopeUnavailable: KindDenied, ReasonPolicyUnapproved: KindDenied,
	ReasonUpstreamMismatch: KindDenied, ReasonUpstreamUnverified: KindDenied,
	ReasonPreconditionChanged: KindDenied, ReasonPreconditionMissing: KindDenied, ReasonPreconditionUnavailable: KindDenied,
	ReasonBudgetExhausted: KindDenied, ReasonBudgetMetricMissing: KindDenied,
	ReasonBudgetMetricInvalid: KindDenied, ReasonBudgetNeedsEffectKey: KindDenied,
	ReasonInvalidArgument: KindInvalidArgument, ReasonEffectKeyError: KindInvalidArgument,
	ReasonMissingArgument: KindInvalidArgument, ReasonInvalidArguments: KindInvalidArgument, ReasonRequestKeyRequired: KindInvalidArgument,
	ReasonApprovalRequired: KindApprovalRequired,
	ReasonApprovalUnknown:  KindApprovalRefused, ReasonApprovalMismatch: KindApprovalRefused,
	ReasonApprovalConsumed: KindApprovalRefused, ReasonApprovalDenied: KindApprovalRefused,
	ReasonApprovalPending: KindApprovalRefused, ReasonApprovalExpired: KindApprovalRefused,
	ReasonApprovalExhausted: KindApprovalRefused, ReasonApprovalRevoked: KindApprovalRefused,
	ReasonCommitted: KindCommitted, ReasonInProgress: KindInProgress,
	ReasonAmbiguous: KindAmbiguous, ReasonOutcomeConflict: KindAmbiguous,
	ReasonAttemptsExhausted: KindExhausted, ReasonKeyConflict: KindKeyConflict,
	ReasonOutcomeUnknown: KindOutcomeUnknown, ReasonKeyLost: KindOutcomeUnknown,
	ReasonNotExecuted: KindNotExecuted,
	ReasonNoAuthority: KindAuthority, ReasonAuthorityUnreadable: KindAuthority,
	ReasonAuthorityEscalation: KindAuthority, ReasonAuthorityRevoked: KindAuthority,
	ReasonAuthorityExpired: KindAuthority, ReasonAuthorityConstraint: KindAuthority,
	ReasonAuthorityHop: KindAuthority,
	ReasonIdentity:     KindIdentity, ReasonCredentialRevoked: KindIdentity, ReasonRevocationFeedStale: KindIdentity,
	ReasonNoSuchAction: KindOutcomeRefused, ReasonNotHolder: KindOutcomeRefused,
	ReasonAlreadyRecorded: KindOutcomeRefused, ReasonLeaseLost: KindOutcomeRefused,
	ReasonNoLease: KindOutcomeRefused, ReasonOutcomeRefused: KindOutcomeRefused,
	ReasonNotSuspended: KindOutcomeRefused, ReasonSuspensionOpen: KindOutcomeRefused,
	ReasonSuspensionToken: KindOutcomeRefused, ReasonSuspensionResumed: KindOutcomeRefused,
	ReasonSuspensionArguments:      KindOutcomeRefused,
	ReasonRequestKeyOtherPrincipal: KindRequestKey, ReasonRequestKeyOtherAction: KindRequestKey,
	ReasonRequestKeyOtherEffectKey: KindRequestKey, ReasonRequestKeyOtherApproval: KindRequestKey,
	ReasonInternal: KindInternal,
}

func isBudgetReason(r Reason) bool {
	switch r {
	case ReasonBudgetExhausted, ReasonBudgetMetricMissing, ReasonBudgetMetricInvalid, ReasonBudgetNeedsEffectKey:
		return true
	}
	return false
}

// Kind is the kind r belongs to, or "" for a word that is not one of latch's reasons.
func (r Reason) Kind() RefusalKind { return reasonKinds[r] }
