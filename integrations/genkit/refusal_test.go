package latchgenkit_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	latchgenkit "github.com/latchkit/latch/integrations/genkit"
)

// reasonOfKind is one reason word of each refusal kind.
var reasonOfKind = map[latch.RefusalKind]latch.Reason{
	latch.KindDenied:           latch.ReasonDenied,
	latch.KindInvalidArgument:  latch.ReasonInvalidArgument,
	latch.KindApprovalRequired: latch.ReasonApprovalRequired,
	latch.KindApprovalRefused:  latch.ReasonApprovalMismatch,
	latch.KindCommitted:        latch.ReasonCommitted,
	latch.KindInProgress:       latch.ReasonInProgress,
	latch.KindAmbiguous:        latch.ReasonAmbiguous,
	latch.KindOutcomeUnknown:   latch.ReasonOutcomeUnknown,
	latch.KindNotExecuted:      latch.ReasonNotExecuted,
	latch.KindExhausted:        latch.ReasonAttemptsExhausted,
	latch.KindKeyConflict:      latch.ReasonKeyConflict,
	latch.KindAuthority:        latch.ReasonNoAuthority,
	latch.KindIdentity:         latch.ReasonIdentity,
	latch.KindOutcomeRefused:   latch.ReasonOutcomeRefused,
	latch.KindRequestKey:       latch.ReasonRequestKeyOtherAction,
	latch.KindInternal:         latch.ReasonInternal,
}

// Every kind of refusal reaches the model under latch's own words — RefusalOf's kind and
// reason — with advice on what to do; a kind latch adds without advice fails here.
func TestRefusalForEveryKind(t *testing.T) {
	t.Parallel()
	for _, kind := range latch.RefusalKinds() {
		reason, ok := reasonOfKind[kind]
		if !ok {
			t.Errorf("no reason word for kind %s in this test's table", kind)
			continue
		}
		if reason.Kind() != kind {
			t.Fatalf("reason %s is of kind %s, not %s", reason, reason.Kind(), kind)
		}
		lr := &latch.Refusal{Kind: kind, Reason: reason, EffectKey: "refund:r1", ApprovalID: "apr_1",
			State: latch.StateCommitted, Result: json.RawMessage(`{"id":"re_r1"}`), Detail: "why"}
		err := lr.Err()
		r := latchgenkit.RefusalFor("payments.refund", err)
		want := latch.RefusalOf(err)
		if r.Kind != string(want.Kind) || r.Reason != string(want.Reason) || r.Kind != string(kind) {
			t.Errorf("RefusalFor(%s) = %s (%s), want %s (%s)", kind, r.Reason, r.Kind, reason, kind)
		}
		prefix := "latch refused payments.refund: " + string(reason) + " (" + string(kind) + "): "
		advice, found := strings.CutPrefix(r.Message, prefix)
		if !found || strings.TrimSpace(strings.Split(advice, ";")[0]) == "" {
			t.Errorf("RefusalFor(%s).Message = %q, want %q and advice", kind, r.Message, prefix)
		}
		if r.Action != "payments.refund" || r.EffectKey != want.EffectKey || r.ApprovalID != want.ApprovalID {
			t.Errorf("RefusalFor(%s) = %+v, want the action, effect key %q and approval %q of %+v", kind, r, want.EffectKey, want.ApprovalID, want)
		}
		if (kind == latch.KindCommitted) != (len(r.Result) > 0) {
			t.Errorf("RefusalFor(%s).Result = %s, want the stored result on committed only", kind, r.Result)
		}
	}
	if r := latchgenkit.RefusalFor("a", nil); r != nil {
		t.Errorf("RefusalFor(nil) = %+v, want nil", r)
	}
	// An error latch does not know is internal: nothing about the call can be said from it.
	if r := latchgenkit.RefusalFor("a", errors.New("disk on fire")); r.Kind != string(latch.KindInternal) {
		t.Errorf("RefusalFor(an unknown error).Kind = %s, want internal", r.Kind)
	}
}
