package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latchkit/latch"
)

// An executor that needs an answer mid-call suspends; the call is resumed, once, with the
// token, and the executor runs on with the answer. The charge holds its key throughout and is
// made once, with one receipt.
func ExampleGuard_Resume() {
	g, done := exampleGuard(examplePolicy)
	defer done()
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})

	charge := func(ctx context.Context, args json.RawMessage) (any, error) {
		r := latch.ResumedFrom(ctx)
		if r == nil {
			return nil, latch.Suspend(map[string]string{"message": "Which card?"})
		}
		var card string
		_ = json.Unmarshal(r.Input["card"], &card)
		return "charged " + card, nil
	}
	args := json.RawMessage(`{"invoice_id":"inv_7","amount":1200}`)
	_, err := g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: args}, charge)
	var s *latch.SuspendedError
	if !errors.As(err, &s) {
		panic(err)
	}
	fmt.Println("asked:", string(s.Request), "round", s.Round)

	rc, err := g.Resume(ctx, &latch.ResumeRequest{ActionID: s.ActionID, Token: s.Token, Arguments: args,
		Input: map[string]json.RawMessage{"card": json.RawMessage(`"visa-4242"`)}}, charge)
	fmt.Println(rc.Result, rc.Value, err)

	_, err = g.Resume(ctx, &latch.ResumeRequest{ActionID: s.ActionID, Token: s.Token, Arguments: args}, charge)
	fmt.Println(latch.RefusalOf(err).Reason)
	// Output:
	// asked: {"message":"Which card?"} round 1
	// committed charged visa-4242 <nil>
	// suspension_resumed
}
