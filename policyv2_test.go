package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

// typoPolicy is a policy whose approval rule misspells amount: before arguments were required,
// a 9,000.00 refund fell through to allow without a human.
const typoPolicy = `schema: latch.policy/v1
actions:
  billing.refund:
    effect: "refund:{order_id}"
    rules:
      - when: { amout_gt: 10000 }
        decision: approve
      - decision: allow
`

type Refund struct {
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount"`
}

func TestTypoDeniesMissingArgument(t *testing.T) {
	t.Parallel()
	e := newEnv(t, typoPolicy)
	var calls int
	refund := latch.Protect(e.g, "billing.refund", func(context.Context, Refund) (string, error) {
		calls++
		return "refunded", nil
	}, nil)
	_, err := refund(agent(t.Context()), Refund{OrderID: "ord_1", Amount: 900000})
	var de *latch.DeniedError
	if !errors.As(err, &de) || de.Reason != "missing_argument" || de.Argument != "amout" || de.Pointer != "/amout" {
		t.Fatalf("refund err = %v, want DeniedError missing_argument naming amout", err)
	}
	if !errors.Is(err, latch.ErrDenied) || !errors.Is(err, latch.ErrInvalidArgument) || !strings.Contains(err.Error(), "missing_argument: amout") {
		t.Errorf("refund err = %q, want it to match ErrDenied and ErrInvalidArgument and say missing_argument: amout", err)
	}
	if calls != 0 {
		t.Errorf("executor ran %d times, want 0", calls)
	}
	doc := lastReceipt(t, e.g)
	if doc["result"] != "denied" || doc["decision_reason"] != "missing_argument" || !strings.Contains(doc["error"].(string), "amout") {
		t.Errorf("receipt = %v %v %v, want denied missing_argument naming amout", doc["result"], doc["decision_reason"], doc["error"])
	}
	if err := e.g.Check(); err == nil || !strings.Contains(err.Error(), `argument "amout", required by rule 0 (amout_gt) (latch.yaml:6:17), is not a JSON field of latch_test.Refund (its fields: amount, order_id)`) {
		t.Errorf("Check() = %v, want the missing field amout with its position", err)
	}
}

func TestInvalidArgumentsDenied(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `schema: latch.policy/v1
actions:
  billing.refund:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, min: 1, max: 500000 }
      additional: false
    rules:
      - when: { amount_gt: 10000 }
        decision: approve
      - decision: allow
`)
	ctx := agent(t.Context())
	exec := func(context.Context, json.RawMessage) (any, error) { t.Error("executor ran"); return nil, nil }
	tests := []struct {
		args, reason, pointer string
	}{
		{`{"order_id":"o","amount":"900000"}`, "invalid_arguments", "/amount"},
		{`{"order_id":"o","amount":900000}`, "invalid_arguments", "/amount"},
		{`{"order_id":"o","amount":5,"to":"acct_9"}`, "invalid_arguments", "/to"},
		{`{"order_id":"o"}`, "missing_argument", "/amount"},
	}
	for _, tt := range tests {
		rc, err := e.g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: json.RawMessage(tt.args)}, exec)
		var de *latch.DeniedError
		if !errors.As(err, &de) || de.Reason != tt.reason || de.Pointer != tt.pointer || !errors.Is(err, latch.ErrInvalidArgument) {
			t.Errorf("Execute(%s) err = %v, want %s at %s", tt.args, err, tt.reason, tt.pointer)
			continue
		}
		if rc == nil || rc.Result != "denied" || rc.DecisionReason != tt.reason {
			t.Errorf("Execute(%s) receipt = %+v, want denied %s", tt.args, rc, tt.reason)
		}
	}
	rc, err := e.g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: json.RawMessage(`{"order_id":"o","amount":500}`)},
		func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
	if err != nil || rc.Result != "committed" {
		t.Fatalf("a call that fits = %v, %v; want committed", rc, err)
	}
	ev, err := e.g.Evaluate(ctx, &latch.Call{Action: "billing.refund", Arguments: json.RawMessage(`{"order_id":"o","amount":0}`)})
	if err != nil || ev.Reason != "invalid_arguments" || ev.ArgumentCheck.Pointer != "/amount" {
		t.Errorf("Evaluate(amount 0) = %+v, %v; want invalid_arguments at /amount", ev, err)
	}
}

// TestArgumentlessPolicyUnchanged: a policy of the old shape decides as before when every
// argument it names is supplied, extra arguments included.
func TestArgumentlessPolicyUnchanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	ctx := agent(t.Context())
	for _, tt := range []struct {
		args   string
		reason string
	}{
		{`{"invoice_id":"i1","amount":5,"note":"x"}`, "rule[0]"},
		{`{"invoice_id":"i2","amount":200000}`, "rule[1]"},
		{`{"invoice_id":"i3","amount":900000}`, "rule[2]"},
		{`{"invoice_id":"i4","amount":"5"}`, "rule[2]"},
	} {
		ev, err := e.g.Evaluate(ctx, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(tt.args)})
		if err != nil || ev.Reason != tt.reason || !ev.ArgumentCheck.OK() {
			t.Errorf("Evaluate(%s) = %+v, %v; want %s", tt.args, ev, err, tt.reason)
		}
	}
}

func TestOpenRefusesSpecialPolicyFiles(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "latch.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	for _, path := range []string{"/dev/zero", fifo} {
		done := make(chan error, 1)
		go func() {
			_, err := latch.Open(t.Context(), &latch.Config{PolicyPath: path, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "s.db")})
			done <- err
		}()
		select {
		case err := <-done:
			var pe *latch.PolicyError
			if !errors.As(err, &pe) || !errors.Is(err, policy.ErrNotRegularFile) {
				t.Errorf("Open(policy %s) = %v, want a PolicyError matching ErrNotRegularFile", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(policy %s) still blocked after 10s", path)
		}
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte("schema: latch.policy/v1\n#"+strings.Repeat("x", policy.MaxFileSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := latch.Open(t.Context(), &latch.Config{PolicyPath: big}); !errors.Is(err, policy.ErrFileTooLarge) {
		t.Errorf("Open(a policy over 4 MiB) = %v, want ErrFileTooLarge", err)
	}
}

// TestObserveModeArguments: observe mode runs a call whose arguments do not fit (recording that
// enforcement would have denied it), but never without the effect key its template names: a
// call whose key cannot be rendered is refused, as before arguments were checked.
func TestObserveModeArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `schema: latch.policy/v1
mode: observe
actions:
  billing.refund:
    effect: "refund:{order_id}"
    rules:
      - when: { amount_lte: 100 }
        decision: allow
      - decision: approve
`)
	ctx := agent(t.Context())
	var calls int
	exec := func(context.Context, json.RawMessage) (any, error) { calls++; return "ok", nil }
	_, err := e.g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: json.RawMessage(`{"amount":5}`)}, exec)
	var ie *latch.InvalidArgumentError
	if !errors.As(err, &ie) || ie.Reason != "effect_key_error" || calls != 0 {
		t.Fatalf("observe, effect key argument absent: %v (executions %d), want effect_key_error and no execution", err, calls)
	}
	rc, err := e.g.Execute(ctx, &latch.Call{Action: "billing.refund", Arguments: json.RawMessage(`{"order_id":"o1"}`)}, exec)
	if err != nil || calls != 1 || rc.Result != "observed" || rc.WouldHave == nil || rc.WouldHave.Reason != "missing_argument" || rc.EffectKey != "refund:o1" {
		t.Fatalf("observe, condition argument absent = %+v, %v (executions %d); want it run under refund:o1, would have denied missing_argument", rc, err, calls)
	}
}
