package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// TestCaseFoldedKeysRefused is argument smuggling through encoding/json's case-insensitive field
// matching: the policy would read destination=acct_1 while an executor decoding the canonical
// bytes into a struct would read acct_EVIL. The call is refused invalid_arguments, naming both
// keys, with a denied receipt, and nothing executes.
func TestCaseFoldedKeysRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	ran := false
	args := `{"invoice_id":"inv_1","amount":5,"meta":{"destination":"acct_1","deſtination":"acct_EVIL"}}`
	rc, err := e.g.Execute(agent(t.Context()), &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(args)},
		func(context.Context, json.RawMessage) (any, error) { ran = true; return nil, nil })
	var ia *latch.InvalidArgumentError
	if !errors.As(err, &ia) || ia.Reason != "invalid_arguments" || ia.Pointer != "/meta/deſtination" ||
		!errors.Is(err, latch.ErrInvalidArgument) {
		t.Fatalf("Execute(%s) err = %v, want invalid_arguments at /meta/deſtination", args, err)
	}
	if !strings.Contains(err.Error(), `"destination"`) || !strings.Contains(err.Error(), `"de\u017ftination"`) {
		t.Errorf("err = %v, want both keys named", err)
	}
	if ran {
		t.Error("executor ran")
	}
	if rc == nil || rc.Result != "denied" || rc.DecisionReason != "invalid_arguments" {
		t.Errorf("receipt = %+v, want a denied invalid_arguments receipt", rc)
	}
	verifyChain(t, e.g)
}

// TestNULRefusedBeforeAnyWrite checks that a NUL byte in an action name, a principal, an
// environment or an effect key rendered from the arguments is refused as invalid_argument before
// anything is written (PostgreSQL cannot store it, SQLite used to), and the executor never runs.
func TestNULRefusedBeforeAnyWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	ran := false
	exec := func(context.Context, json.RawMessage) (any, error) { ran = true; return nil, nil }
	cases := []struct {
		name string
		ctx  context.Context
		call latch.Call
	}{
		{"action", agent(t.Context()), latch.Call{Action: "billing.charge\x00x", Arguments: json.RawMessage(`{"invoice_id":"i","amount":5}`)}},
		{"effect key", agent(t.Context()), latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"i\u0000j","amount":5}`)}},
		{"agent", latch.WithPrincipal(t.Context(), latch.Principal{Agent: "worker\x00"}), latch.Call{Action: "report.read"}},
		{"user", latch.WithPrincipal(t.Context(), latch.Principal{Agent: "worker", User: "ana\x00"}), latch.Call{Action: "report.read"}},
		{"environment", agent(t.Context()), latch.Call{Action: "report.read", Environment: "prod\x00"}},
		{"resource", agent(t.Context()), latch.Call{Action: "report.read", Resource: "r\x00"}},
		{"long effect key", agent(t.Context()), latch.Call{Action: "billing.charge",
			Arguments: json.RawMessage(`{"invoice_id":"` + strings.Repeat("x", store.MaxText) + `","amount":5}`)}},
	}
	for _, tc := range cases {
		before := writes(t, e.g)
		rc, err := e.g.Execute(tc.ctx, &tc.call, exec)
		var ia *latch.InvalidArgumentError
		if !errors.As(err, &ia) || ia.Reason != "invalid_argument" || !errors.Is(err, store.ErrInvalidInput) ||
			!strings.Contains(err.Error(), "NUL") && !strings.Contains(err.Error(), "bytes long") || len(err.Error()) > 300 {
			t.Errorf("%s: err = %v, want a short invalid_argument naming the NUL byte or the length", tc.name, err)
		}
		if rc != nil {
			t.Errorf("%s with a NUL byte: receipt %+v, want none", tc.name, rc)
		}
		if n := writes(t, e.g) - before; n != 0 {
			t.Errorf("%s with a NUL byte: %d write transactions, want 0", tc.name, n)
		}
	}
	_, err := e.g.Execute(latch.WithApproval(agent(t.Context()), "apr_\x00"), &latch.Call{Action: "report.read"}, exec)
	if !errors.Is(err, store.ErrInvalidInput) {
		t.Errorf("approval id with a NUL byte: err = %v, want store.ErrInvalidInput", err)
	}
	if ran {
		t.Error("executor ran")
	}
	if head, _ := e.g.Store().Head(t.Context()); head.Seq != 0 {
		t.Errorf("head = %+v, want an empty chain", head)
	}
}

// TestProtectUnencodableArgumentsRecorded gives Protect arguments that do not encode as JSON (a
// NaN, a cycle): the call is refused invalid_argument like any other bad argument, with a denied
// receipt, and nothing executes.
func TestProtectUnencodableArgumentsRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	type node struct {
		Next *node `json:"next"`
	}
	cyclic := &node{}
	cyclic.Next = cyclic
	for _, tc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"NaN", func(ctx context.Context) error {
			f := latch.Protect(e.g, "report.read", func(context.Context, map[string]any) (int, error) { t.Error("executor ran"); return 0, nil }, nil)
			_, err := f(ctx, map[string]any{"ratio": math.NaN()})
			return err
		}},
		{"cycle", func(ctx context.Context) error {
			f := latch.Protect(e.g, "report.read", func(context.Context, *node) (int, error) { t.Error("executor ran"); return 0, nil }, nil)
			_, err := f(ctx, cyclic)
			return err
		}},
	} {
		before := writes(t, e.g)
		err := tc.call(agent(t.Context()))
		var ia *latch.InvalidArgumentError
		if !errors.As(err, &ia) || ia.Reason != "invalid_argument" || !strings.Contains(err.Error(), "encode arguments of report.read") {
			t.Errorf("%s: err = %v, want invalid_argument naming the encoding failure", tc.name, err)
		}
		if n := writes(t, e.g) - before; n != 1 {
			t.Errorf("%s: %d write transactions, want 1 (the refusal's receipt)", tc.name, n)
		}
		doc := lastReceipt(t, e.g)
		if doc["result"] != "denied" || doc["decision_reason"] != "invalid_argument" || doc["action"] != "report.read" {
			t.Errorf("%s: last receipt %v/%v/%v, want report.read denied invalid_argument", tc.name, doc["action"], doc["result"], doc["decision_reason"])
		}
	}
	verifyChain(t, e.g)
}
