package toolcall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/toolcall"
)

// A registry of one protected tool, and three tool calls as a model might send them: one runs,
// its re-send is answered with the stored result, and a call the policy does not allow is
// refused in words the model can act on.
func ExampleRegistry_Dispatch() {
	dir, err := os.MkdirTemp("", "toolcall-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	pol, err := policy.Parse("latch.yaml", []byte(`schema: latch.policy/v1
actions:
  refund:
    effect: "refund:{order_id}"
    decision: allow
  delete_account:
    decision: deny
`))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(dir, "state.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()

	tools := toolcall.New(g, &toolcall.Config{Principal: latch.Principal{Agent: "support-bot"}})
	type Refund struct {
		OrderID string `json:"order_id"`
	}
	for _, t := range []toolcall.Tool{
		{Name: "refund", Handler: toolcall.Func(func(ctx context.Context, r Refund) (string, error) { return "rf_" + r.OrderID, nil })},
		{Name: "delete_account", Handler: func(context.Context, json.RawMessage) (any, error) { return nil, nil }},
	} {
		if err := tools.Register(t); err != nil {
			log.Fatal(err)
		}
	}

	for _, c := range []toolcall.Call{
		{ID: "call_1", Name: "refund", Arguments: json.RawMessage(`{"order_id":"o-5"}`)},
		{ID: "call_1", Name: "refund", Arguments: json.RawMessage(`{"order_id":"o-5"}`)}, // re-sent
		{ID: "call_2", Name: "delete_account", Arguments: json.RawMessage(`{"account":"a-1"}`)},
	} {
		r := tools.Dispatch(ctx, c)
		fmt.Printf("%s %s is_error=%t\n%s\n\n", r.CallID, r.Status, r.IsError, r.Content)
	}
	// Output:
	// call_1 ok is_error=false
	// "rf_o-5"
	//
	// call_1 duplicate is_error=false
	// committed: this call's effect already happened; it did not run again.
	// effect_key: refund:o-5
	// stored_result: "rf_o-5"
	//
	// call_2 refused is_error=true
	// denied: the policy does not allow this call; it did not run. Calling it again as it is will be refused again.
	// rule: decision
	// detail: delete_account denied: decision
}
