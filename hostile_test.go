package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/latchkit/latch"
)

// TestCaseFoldedKeysRefused is argument smuggling through encoding/json's case-insensitive field
// matching: the policy would read destination=acct_1 while an executor decoding the canonical
// bytes into a struct would read acct_EVIL. The call is refused invalid_argument, naming both
// keys, with a denied receipt, and nothing executes.
func TestCaseFoldedKeysRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	ran := false
	args := `{"invoice_id":"inv_1","amount":5,"meta":{"destination":"acct_1","deſtination":"acct_EVIL"}}`
	rc, err := e.g.Execute(agent(t.Context()), &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(args)},
		func(context.Context, json.RawMessage) (any, error) { ran = true; return nil, nil })
	var ia *latch.InvalidArgumentError
	if !errors.As(err, &ia) || ia.Reason != "invalid_argument" || ia.Pointer != "/meta/deſtination" {
		t.Fatalf("Execute(%s) err = %v, want invalid_argument at /meta/deſtination", args, err)
	}
	if !strings.Contains(err.Error(), `"destination"`) || !strings.Contains(err.Error(), `"de\u017ftination"`) {
		t.Errorf("err = %v, want both keys named", err)
	}
	if ran {
		t.Error("executor ran")
	}
	if rc == nil || rc.Result != "denied" || rc.DecisionReason != "invalid_argument" {
		t.Errorf("receipt = %+v, want a denied invalid_argument receipt", rc)
	}
	verifyChain(t, e.g)
}
