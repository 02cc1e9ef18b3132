package latch_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/latchkit/latch"
)

// refusalCases is one error value of every refusal the Go API returns, with the kind and
// reason RefusalOf must give it.
var refusalCases = []struct {
	name   string
	err    error
	kind   latch.RefusalKind
	reason latch.Reason
}{
	{"rule", &latch.DeniedError{Action: "a", Reason: "rule[2]"}, latch.KindDenied, latch.ReasonDenied},
	{"bare decision", &latch.DeniedError{Action: "a", Reason: "decision"}, latch.KindDenied, latch.ReasonDenied},
	{"unknown action", &latch.DeniedError{Action: "a", Reason: "unknown_action"}, latch.KindDenied, latch.ReasonUnknownAction},
	{"no matching rule", &latch.DeniedError{Action: "a", Reason: "no_matching_rule"}, latch.KindDenied, latch.ReasonNoMatchingRule},
	{"no principal", &latch.DeniedError{Action: "a", Reason: "no_principal"}, latch.KindDenied, latch.ReasonNoPrincipal},
	{"principal expired", &latch.DeniedError{Action: "a", Reason: "principal_expired"}, latch.KindDenied, latch.ReasonPrincipalExpired},
	{"missing argument", &latch.DeniedError{Action: "a", Reason: "missing_argument", Argument: "amount", Pointer: "/amount"}, latch.KindInvalidArgument, latch.ReasonMissingArgument},
	{"invalid arguments", &latch.DeniedError{Action: "a", Reason: "invalid_arguments", Argument: "amount", Pointer: "/amount"}, latch.KindInvalidArgument, latch.ReasonInvalidArguments},
	{"invalid argument", &latch.InvalidArgumentError{Reason: "invalid_argument", Pointer: "/x", Err: errors.New("a float")}, latch.KindInvalidArgument, latch.ReasonInvalidArgument},
	{"effect key error", &latch.InvalidArgumentError{Reason: "effect_key_error", Err: errors.New("no invoice_id")}, latch.KindInvalidArgument, latch.ReasonEffectKeyError},
	{"approval required", &latch.ApprovalRequiredError{ApprovalID: "apr_1", ActionHash: "sha256:ab", ExpiresAt: time.Unix(0, 0)}, latch.KindApprovalRequired, latch.ReasonApprovalRequired},
	{"approval unknown", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "unknown"}, latch.KindApprovalRefused, latch.ReasonApprovalUnknown},
	{"approval mismatch", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "mismatch"}, latch.KindApprovalRefused, latch.ReasonApprovalMismatch},
	{"approval consumed", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "consumed"}, latch.KindApprovalRefused, latch.ReasonApprovalConsumed},
	{"approval denied", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "denied"}, latch.KindApprovalRefused, latch.ReasonApprovalDenied},
	{"approval pending", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "pending"}, latch.KindApprovalRefused, latch.ReasonApprovalPending},
	{"approval expired", &latch.ApprovalMismatchError{ApprovalID: "apr_1", Reason: "expired"}, latch.KindApprovalRefused, latch.ReasonApprovalExpired},
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
	{"identity", fmt.Errorf("%w: no credential", latch.ErrIdentity), latch.KindIdentity, latch.ReasonIdentity},
	{"outcome already recorded", &latch.OutcomeError{ActionID: "act_1", Reason: "already_recorded"}, latch.KindOutcomeRefused, latch.ReasonAlreadyRecorded},
	{"outcome not holder", &latch.OutcomeError{ActionID: "act_1", Reason: "not_holder"}, latch.KindOutcomeRefused, latch.ReasonNotHolder},
	{"request key used by another principal", &latch.RequestKeyError{Key: "k1", Reason: "request_key_other_principal", Detail: "another principal"}, latch.KindRequestKey, latch.ReasonRequestKeyOtherPrincipal},
	{"request key used for another action", &latch.RequestKeyError{Key: "k1", Reason: "request_key_other_action", Detail: "another action"}, latch.KindRequestKey, latch.ReasonRequestKeyOtherAction},
	// The outermost latch error is the refusal: an executor's error may wrap another call's.
	{"this attempt ambiguous, wrapping another call's refusal", &latch.AmbiguousError{Key: "k", Err: fmt.Errorf("inner call: %w", &latch.ApprovalRequiredError{ApprovalID: "apr_2"})}, latch.KindOutcomeUnknown, latch.ReasonOutcomeUnknown},
	{"not executed, wrapping another call's refusal", latch.NotExecuted(&latch.EffectError{Key: "other", State: latch.StateCommitted, Reason: "committed"}), latch.KindNotExecuted, latch.ReasonNotExecuted},
	{"store down", errors.New("dial tcp: connection refused"), latch.KindInternal, latch.ReasonInternal},
}

// sentinels are every sentinel a refusal may match.
var sentinels = []error{
	latch.ErrDenied, latch.ErrApprovalRequired, latch.ErrApprovalMismatch, latch.ErrDuplicateEffect,
	latch.ErrAlreadyCommitted, latch.ErrInProgress, latch.ErrOutcomeConflict, latch.ErrAmbiguousEffect,
	latch.ErrAmbiguous, latch.ErrNotExecuted, latch.ErrAttemptsExhausted, latch.ErrAuthority,
	latch.ErrIdentity, latch.ErrInvalidArgument, latch.ErrOutcomeRefused, latch.ErrRequestKeyMismatch,
}

func TestRefusalOf(t *testing.T) {
	t.Parallel()
	if r := latch.RefusalOf(nil); r != nil {
		t.Errorf("RefusalOf(nil) = %+v, want nil", r)
	}
	for _, tc := range refusalCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Wrapped as a caller would wrap it: the mapping looks through the chain.
			err := fmt.Errorf("charge invoice: %w", tc.err)
			r := latch.RefusalOf(err)
			if r.Kind != tc.kind || r.Reason != tc.reason {
				t.Fatalf("RefusalOf(%v) = kind %q reason %q, want %q %q", tc.err, r.Kind, r.Reason, tc.kind, tc.reason)
			}
			// Err rebuilds an error that maps back to the same refusal and matches the same
			// sentinels: what the Go client returns for an HTTP problem is what a local guard
			// would have returned.
			back := r.Err()
			if diff := cmp.Diff(r, latch.RefusalOf(back), cmpopts.IgnoreFields(latch.Refusal{}, "Detail")); diff != "" {
				t.Errorf("RefusalOf(RefusalOf(%v).Err()) differs (-want +got):\n%s", tc.err, diff)
			}
			for _, s := range sentinels {
				if strings.Contains(tc.name, "wrapping another call's") {
					break // the rebuilt error carries this call's refusal, not what it wrapped
				}
				if want, got := errors.Is(tc.err, s), errors.Is(back, s); want != got {
					t.Errorf("errors.Is(rebuilt %v, %v) = %v, want %v", tc.err, s, got, want)
				}
			}
			if got := tc.reason.Kind(); got != tc.kind {
				t.Errorf("Reason(%q).Kind() = %q, want %q", tc.reason, got, tc.kind)
			}
			if got, want := latch.ReasonOf(err), string(tc.reason); tc.kind.IsRefusal() && got != want {
				t.Errorf("ReasonOf(%v) = %q, want %q", tc.err, got, want)
			}
		})
	}
}

// TestRefusalKindsCovered holds the table to every kind: a kind added without a case here is
// a kind no surface test sees.
func TestRefusalKindsCovered(t *testing.T) {
	t.Parallel()
	seen := map[latch.RefusalKind]bool{}
	for _, tc := range refusalCases {
		seen[tc.kind] = true
	}
	for _, k := range latch.RefusalKinds() {
		if !seen[k] {
			t.Errorf("no refusal case of kind %q", k)
		}
	}
}
