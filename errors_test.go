package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// onePrefix fails when msg carries the "latch:" prefix other than once, at its front.
func onePrefix(t *testing.T, what, msg string) {
	t.Helper()
	if !strings.HasPrefix(msg, "latch: ") || strings.Count(msg, "latch:") != 1 {
		t.Errorf("%s: %q: want exactly one \"latch:\" prefix, at the front", what, msg)
	}
}

// TestErrorHasOnePrefix: a store error is not wrapped in a second "latch:" and a second copy of
// its operation (today: "latch: reserve ship:e1: reserve ship:e1: context canceled").
func TestErrorHasOnePrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
schema: latch.policy/v1
actions:
  ship:
    effect: "ship:{id}"
    decision: allow
`)
	ctx, cancel := context.WithCancel(agent(t.Context()))
	cancel()
	ran := false
	_, err := e.g.Execute(ctx, &latch.Call{Action: "ship", Arguments: json.RawMessage(`{"id":"e1"}`)},
		func(context.Context, json.RawMessage) (any, error) { ran = true; return nil, nil })
	if err == nil || ran {
		t.Fatalf("Execute with a cancelled context = %v (executor ran: %t), want a reserve error", err, ran)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want it to match context.Canceled", err)
	}
	onePrefix(t, "reserve error", err.Error())
	if n := strings.Count(err.Error(), "reserve ship:e1"); n != 1 {
		t.Errorf("err = %q names the operation %d times, want once", err, n)
	}
}

// TestNestedErrorHasOnePrefix: an executor that returns a nested protected call's refusal gets
// one prefix, not one per layer.
func TestNestedErrorHasOnePrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	ctx := agent(t.Context())
	_, err := e.g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"outer","amount":1}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			_, err := e.g.Execute(ctx, &latch.Call{Action: "no.such.action"}, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
			return nil, err
		})
	if !errors.Is(err, latch.ErrAmbiguous) || !errors.Is(err, latch.ErrDenied) {
		t.Fatalf("err = %v, want ErrAmbiguous wrapping the nested ErrDenied", err)
	}
	onePrefix(t, "nested refusal", err.Error())
	_, err = e.g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"outer2","amount":1}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			_, err := e.g.Execute(ctx, &latch.Call{Action: "no.such.action"}, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
			return nil, latch.NotExecuted(err)
		})
	if !errors.Is(err, latch.ErrNotExecuted) || !errors.Is(err, latch.ErrDenied) {
		t.Fatalf("err = %v, want ErrNotExecuted wrapping the nested ErrDenied", err)
	}
	if strings.Count(err.Error(), "latch:") > 1 {
		t.Errorf("NotExecuted(nested refusal) = %q: more than one \"latch:\" prefix", err)
	}
}

// TestReceiptErrorIsReturnedError: the error a refused or failed call's receipt stores reads
// exactly as the error its caller got.
func TestReceiptErrorIsReturnedError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	ctx := agent(t.Context())
	charge := func(ctx context.Context, id string, amount int, exec latch.Executor) (*latch.Receipt, error) {
		return e.g.Execute(ctx, &latch.Call{Action: "billing.charge",
			Arguments: json.RawMessage(`{"invoice_id":"` + id + `","amount":` + strconv.Itoa(amount) + `}`)}, exec)
	}
	ok := func(context.Context, json.RawMessage) (any, error) { return "ok", nil }
	lost := func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("connection reset") }
	declined := func(context.Context, json.RawMessage) (any, error) {
		return nil, latch.NotExecuted(errors.New("card declined"))
	}
	if _, err := charge(ctx, "inv_1", 1, ok); err != nil {
		t.Fatal(err)
	}
	apr, err := charge(ctx, "inv_big", 100000, ok)
	var req *latch.ApprovalRequiredError
	if !errors.As(err, &req) {
		t.Fatalf("charge inv_big = %v, %v; want approval required", apr, err)
	}
	if _, err := e.g.Approve(t.Context(), req.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		call func() (*latch.Receipt, error)
		res  string
	}{
		{"denied", func() (*latch.Receipt, error) { return charge(ctx, "inv_2", 10000000, ok) }, "denied"},
		{"duplicate", func() (*latch.Receipt, error) { return charge(ctx, "inv_1", 1, ok) }, "blocked"},
		{"mismatch", func() (*latch.Receipt, error) {
			return charge(latch.WithApproval(ctx, req.ApprovalID), "inv_big", 100001, ok)
		}, "blocked"},
		{"unknown approval", func() (*latch.Receipt, error) {
			return charge(latch.WithApproval(ctx, "apr_nope"), "inv_big", 100000, ok)
		}, "blocked"},
		{"ambiguous", func() (*latch.Receipt, error) { return charge(ctx, "inv_3", 1, lost) }, "ambiguous"},
		{"ambiguous retry", func() (*latch.Receipt, error) { return charge(ctx, "inv_3", 1, ok) }, "blocked"},
		{"failed", func() (*latch.Receipt, error) { return charge(ctx, "inv_4", 1, declined) }, "failed"},
	} {
		rc, err := c.call()
		if err == nil || rc == nil {
			t.Errorf("%s: receipt %v, err %v; want both", c.name, rc, err)
			continue
		}
		if rc.Result != c.res {
			t.Errorf("%s: result %s, want %s", c.name, rc.Result, c.res)
		}
		if rc.Error != err.Error() {
			t.Errorf("%s: receipt error %q, returned error %q: want the same text", c.name, rc.Error, err.Error())
		}
		if c.name != "failed" {
			onePrefix(t, c.name, err.Error())
		}
	}
	// The effect record keeps the executor's own words.
	if eff, err := e.g.Store().Effect(t.Context(), "charge:inv_3"); err != nil || eff.Error != "connection reset" {
		t.Errorf("effect charge:inv_3 = %+v, %v; want error \"connection reset\"", eff, err)
	}
}

// unclosedEnv is newEnv for a test that closes the guard itself.
func unclosedEnv(t *testing.T, doc string) *env {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse policy: %v", err)
	}
	c := newClock()
	url := "sqlite:" + t.TempDir() + "/state.db"
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: url, Now: c.Now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return &env{g: g, clock: c, url: url}
}

// TestUnrecordedOutcomeSaysSo: when the outcome cannot be written, the error must not claim it
// was "recorded ambiguous".
func TestUnrecordedOutcomeSaysSo(t *testing.T) {
	t.Parallel()
	e := unclosedEnv(t, testPolicy)
	cause := errors.New("connection reset")
	_, err := e.g.Execute(agent(t.Context()), &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_1","amount":1}`)},
		func(context.Context, json.RawMessage) (any, error) {
			e.g.Close() // the store goes away while the executor runs: nothing can be recorded
			return nil, cause
		})
	if !errors.Is(err, latch.ErrAmbiguous) || !errors.Is(err, cause) {
		t.Fatalf("err = %v, want ErrAmbiguous and the executor's error", err)
	}
	if msg := err.Error(); strings.Contains(msg, "recorded ambiguous") || !strings.Contains(msg, "not recorded") {
		t.Errorf("err = %q: claims a record that was never written", msg)
	}
	onePrefix(t, "unrecorded outcome", err.Error())
}

// TestUnrecordedSuccessSaysSo is TestUnrecordedOutcomeSaysSo for an executor that succeeded.
func TestUnrecordedSuccessSaysSo(t *testing.T) {
	t.Parallel()
	e := unclosedEnv(t, testPolicy)
	_, err := e.g.Execute(agent(t.Context()), &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_1","amount":1}`)},
		func(context.Context, json.RawMessage) (any, error) { e.g.Close(); return "ok", nil })
	if !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatalf("err = %v, want ErrAmbiguous", err)
	}
	if msg := err.Error(); strings.Contains(msg, "recorded ambiguous") || !strings.Contains(msg, "could not be recorded") {
		t.Errorf("err = %q: claims a record that was never written", msg)
	}
}

// TestHostileIDsQuoted: an id or key with terminal escapes is echoed quoted, never raw.
func TestHostileIDsQuoted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	hostile := "apr_\x1b]52;c;ZWNobyBwd25lZA==\x07\u202e"
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		msg := err.Error()
		if strings.ContainsAny(msg, "\x1b\x07\u202e") {
			t.Errorf("%s: %q carries the raw id", what, msg)
		}
		if !strings.Contains(msg, strconv.Quote(hostile)) {
			t.Errorf("%s: %q does not quote the id as %s", what, msg, strconv.Quote(hostile))
		}
	}
	_, err := e.g.Execute(latch.WithApproval(agent(t.Context()), hostile), &latch.Call{Action: "refund.issue",
		Arguments: json.RawMessage(`{"refund_id":"rf_1"}`)}, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	if !errors.Is(err, latch.ErrApprovalMismatch) {
		t.Fatalf("err = %v, want ErrApprovalMismatch", err)
	}
	check("presented approval", err)
	_, err = e.g.Approve(t.Context(), hostile, "alice")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Approve(hostile) = %v, want ErrNotFound", err)
	}
	check("Approve", err)
	_, err = e.g.Resolve(t.Context(), hostile, store.Committed, "cli:alice")
	check("Resolve", err)

	// A hostile effect key, rendered from an argument.
	exec := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	call := &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"\u001b[2J","amount":1}`)}
	if _, err := e.g.Execute(agent(t.Context()), call, exec); err != nil {
		t.Fatal(err)
	}
	_, err = e.g.Execute(agent(t.Context()), call, exec)
	if !errors.Is(err, latch.ErrDuplicateEffect) {
		t.Fatalf("err = %v, want ErrDuplicateEffect", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\x1b") || !strings.Contains(msg, strconv.Quote("charge:\x1b[2J")) {
		t.Errorf("duplicate of a hostile key: %q, want the key quoted", msg)
	}
}
