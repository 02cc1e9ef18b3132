package client_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/latchkit/latch/auth"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/client"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

const testPolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
  payouts.transfer:
    effect: "payout:{payout_id}"
    decision: allow
  payout.cancel:
    decision: deny
`

type Charge struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int64  `json:"amount"`
	Note      string `json:"-"` // not part of the action: the executor never sees it
}

type Payout struct {
	PayoutID string `json:"payout_id"`
	Amount   int64  `json:"amount"`
}

func storeURL(t *testing.T, backend string) string { return testdb.URL(t, backend, "latch_client") }

func openGuard(t *testing.T, backend string) *latch.Guard {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: storeURL(t, backend)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// serve starts a real server on 127.0.0.1 over its own store and returns a client with an
// agent token for billing-worker, and the guard (for approving).
func serve(t *testing.T, backend string) (*client.Client, *latch.Guard) {
	t.Helper()
	g := openGuard(t, backend)
	s, err := server.New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	tok, _, err := auth.CreateToken(t.Context(), g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return client.New("http://"+ln.Addr().String(), tok), g
}

// protectFunc is latch.Protect or client.Protect, for one scenario run against either.
type protectFuncs struct {
	charge   func(fn func(context.Context, Charge) (string, error), opts *latch.Options) func(context.Context, Charge) (string, error)
	transfer func(fn func(context.Context, Payout) (string, error)) func(context.Context, Payout) (string, error)
	cancel   func(fn func(context.Context, Payout) (string, error)) func(context.Context, Payout) (string, error)
	approve  func(id string)
}

// describe is an error as a scenario transcript records it: which sentinels it matches and the
// data its latch type carries.
func describe(err error) string {
	if err == nil {
		return "ok"
	}
	var parts []string
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrDenied", latch.ErrDenied}, {"ErrApprovalRequired", latch.ErrApprovalRequired},
		{"ErrApprovalMismatch", latch.ErrApprovalMismatch}, {"ErrDuplicateEffect", latch.ErrDuplicateEffect},
		{"ErrAmbiguousEffect", latch.ErrAmbiguousEffect}, {"ErrAmbiguous", latch.ErrAmbiguous},
		{"ErrNotExecuted", latch.ErrNotExecuted}, {"ErrAttemptsExhausted", latch.ErrAttemptsExhausted},
		{"ErrInvalidArgument", latch.ErrInvalidArgument},
	} {
		if errors.Is(err, s.err) {
			parts = append(parts, s.name)
		}
	}
	var (
		de *latch.DeniedError
		ee *latch.EffectError
		me *latch.ApprovalMismatchError
		ie *latch.InvalidArgumentError
	)
	switch {
	case errors.As(err, &de):
		parts = append(parts, "denied:"+de.Reason)
	case errors.As(err, &ee):
		parts = append(parts, fmt.Sprintf("effect:%s:%s:%s", ee.Key, ee.State, ee.Result))
	case errors.As(err, &me):
		parts = append(parts, "approval:"+me.Reason)
	case errors.As(err, &ie):
		parts = append(parts, "invalid:"+ie.Reason+":"+ie.Pointer)
	}
	return strings.Join(parts, " ")
}

// scenario runs the stories of the seed examples through pf and returns what a program saw.
func scenario(t *testing.T, pf protectFuncs) []string {
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"})
	var log []string
	say := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }

	// Retried task: the processor charges, the reply is lost; blind retries are refused.
	var charges atomic.Int32
	var tokens []string
	lostReply := pf.charge(func(ctx context.Context, c Charge) (string, error) {
		charges.Add(1)
		tokens = append(tokens, latch.IdempotencyToken(ctx))
		if c.Note != "" {
			t.Errorf("the executor saw a field that is not part of the action: %q", c.Note)
		}
		return "", errors.New("read tcp: i/o timeout")
	}, nil)
	for i := range 3 {
		_, err := lostReply(ctx, Charge{InvoiceID: "inv_88", Amount: 24900, Note: "secret"})
		say("charge inv_88 try %d: %s", i+1, describe(err))
	}
	say("processor charges: %d; token set: %v", charges.Load(), len(tokens) == 1 && tokens[0] != "")

	// Not executed: the key is renewed with a new idempotency token.
	tokens = nil
	var effectTokens []string
	declined := 0
	charge := pf.charge(func(ctx context.Context, c Charge) (string, error) {
		tokens = append(tokens, latch.IdempotencyToken(ctx))
		effectTokens = append(effectTokens, latch.EffectToken(ctx))
		if declined == 0 {
			declined++
			return "", latch.NotExecuted(errors.New("card declined before charging"))
		}
		if err := latch.ExtendLease(ctx, 10*time.Minute); err != nil {
			t.Errorf("ExtendLease inside the executor: %v", err)
		}
		return "ch_" + c.InvoiceID, nil
	}, nil)
	for i := range 3 {
		r, err := charge(ctx, Charge{InvoiceID: "inv_7", Amount: 100})
		say("charge inv_7 try %d: %q %s", i+1, r, describe(err))
	}
	say("inv_7 attempts ran: %d, tokens differ: %v", len(tokens), len(tokens) == 2 && tokens[0] != tokens[1])
	say("inv_7 effect token stable: %v", len(effectTokens) == 2 && effectTokens[0] != "" && effectTokens[0] == effectTokens[1])

	// Redelivered webhook: the second delivery is a duplicate carrying the stored result.
	var transfers atomic.Int32
	transfer := pf.transfer(func(ctx context.Context, p Payout) (string, error) {
		transfers.Add(1)
		return "tr_" + p.PayoutID, nil
	})
	for i := range 2 {
		r, err := transfer(ctx, Payout{PayoutID: "po_412", Amount: 180000})
		say("delivery %d: %q %s", i+1, r, describe(err))
	}
	say("bank transfers: %d", transfers.Load())

	// Approval: required, granted, spent once; a mutated call does not burn it.
	big := pf.charge(func(ctx context.Context, c Charge) (string, error) { return "big", nil }, nil)
	_, err := big(ctx, Charge{InvoiceID: "inv_9", Amount: 90000})
	var ar *latch.ApprovalRequiredError
	say("big charge: %s (id set: %v)", describe(err), errors.As(err, &ar) && strings.HasPrefix(ar.ApprovalID, "apr_"))
	if ar != nil {
		pf.approve(ar.ApprovalID)
		actx := latch.WithApproval(ctx, ar.ApprovalID)
		_, err = big(actx, Charge{InvoiceID: "inv_9", Amount: 95000})
		say("mutated: %s", describe(err))
		r, err := big(actx, Charge{InvoiceID: "inv_9", Amount: 90000})
		say("approved: %q %s", r, describe(err))
		_, err = big(actx, Charge{InvoiceID: "inv_9", Amount: 90000})
		say("replayed: %s", describe(err))
	}

	// Denied, invalid, and a panic that is recorded before it continues.
	_, err = pf.cancel(func(ctx context.Context, p Payout) (string, error) { return "", nil })(ctx, Payout{PayoutID: "po_1"})
	say("cancel: %s", describe(err))
	func() {
		defer func() { say("panic propagated: %v", recover()) }()
		_, _ = pf.charge(func(ctx context.Context, c Charge) (string, error) { panic("boom") }, nil)(ctx, Charge{InvoiceID: "inv_p", Amount: 1})
	}()
	_, err = pf.charge(func(ctx context.Context, c Charge) (string, error) { return "", nil }, nil)(ctx, Charge{InvoiceID: "inv_p", Amount: 1})
	say("after the panic: %s", describe(err))
	return log
}

// TestProtectSameAsInProcess: the seed stories give a program exactly the same results and
// errors through client.Protect against a running server as through latch.Protect in process.
func TestProtectSameAsInProcess(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			g := openGuard(t, backend)
			local := scenario(t, protectFuncs{
				charge: func(fn func(context.Context, Charge) (string, error), opts *latch.Options) func(context.Context, Charge) (string, error) {
					return latch.Protect(g, "billing.charge", fn, opts)
				},
				transfer: func(fn func(context.Context, Payout) (string, error)) func(context.Context, Payout) (string, error) {
					return latch.Protect(g, "payouts.transfer", fn, nil)
				},
				cancel: func(fn func(context.Context, Payout) (string, error)) func(context.Context, Payout) (string, error) {
					return latch.Protect(g, "payout.cancel", fn, nil)
				},
				approve: func(id string) {
					if _, err := g.Approve(t.Context(), id, "alice"); err != nil {
						t.Fatal(err)
					}
				},
			})
			c, rg := serve(t, backend)
			remote := scenario(t, protectFuncs{
				charge: func(fn func(context.Context, Charge) (string, error), opts *latch.Options) func(context.Context, Charge) (string, error) {
					return client.Protect(c, "billing.charge", fn, opts)
				},
				transfer: func(fn func(context.Context, Payout) (string, error)) func(context.Context, Payout) (string, error) {
					return client.Protect(c, "payouts.transfer", fn, nil)
				},
				cancel: func(fn func(context.Context, Payout) (string, error)) func(context.Context, Payout) (string, error) {
					return client.Protect(c, "payout.cancel", fn, nil)
				},
				approve: func(id string) {
					if _, err := rg.Approve(t.Context(), id, "alice"); err != nil {
						t.Fatal(err)
					}
				},
			})
			if diff := cmp.Diff(local, remote); diff != "" {
				t.Errorf("client.Protect differs from latch.Protect (-in process +remote):\n%s", diff)
			}
			t.Logf("transcript:\n%s", strings.Join(remote, "\n"))
			// The transcript itself is what the guarantees say, not only equal on both sides.
			for _, want := range []string{
				"charge inv_88 try 1: ErrAmbiguous",
				"charge inv_88 try 2: ErrAmbiguousEffect effect:charge:inv_88:ambiguous:",
				"processor charges: 1; token set: true",
				`charge inv_7 try 1: "" ErrNotExecuted`,
				`charge inv_7 try 2: "ch_inv_7" ok`,
				`charge inv_7 try 3: "" ErrDuplicateEffect effect:charge:inv_7:committed:"ch_inv_7"`,
				"inv_7 attempts ran: 2, tokens differ: true",
				"inv_7 effect token stable: true",
				`delivery 2: "" ErrDuplicateEffect effect:payout:po_412:committed:"tr_po_412"`,
				"bank transfers: 1",
				"big charge: ErrApprovalRequired (id set: true)",
				"mutated: ErrApprovalMismatch approval:mismatch",
				`approved: "big" ok`,
				"replayed: ErrApprovalMismatch approval:consumed",
				"cancel: ErrDenied denied:decision",
				"panic propagated: boom",
				"after the panic: ErrAmbiguousEffect effect:charge:inv_p:ambiguous:",
			} {
				if !strings.Contains(strings.Join(remote, "\n"), want) {
					t.Errorf("remote transcript lacks %q", want)
				}
			}
		})
	}
}

// TestProtectFloatRefused: an argument that cannot form an action is refused the same way.
func TestProtectFloatRefused(t *testing.T) {
	t.Parallel()
	c, _ := serve(t, "sqlite")
	ran := false
	f := client.Protect(c, "billing.charge", func(ctx context.Context, m map[string]any) (string, error) { ran = true; return "", nil }, nil)
	_, err := f(t.Context(), map[string]any{"invoice_id": "x", "amount": 0.5})
	var ie *latch.InvalidArgumentError
	if !errors.As(err, &ie) || ie.Pointer != "/amount" || !errors.Is(err, latch.ErrInvalidArgument) || ran {
		t.Errorf("float amount: err = %v (ran %v), want invalid_argument at /amount", err, ran)
	}
	bad := client.New(c.URL(), "latch_forged")
	_, err = client.Protect(bad, "billing.charge", func(ctx context.Context, ch Charge) (string, error) { return "", nil }, nil)(t.Context(), Charge{InvoiceID: "y", Amount: 1})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 401 || ce.Reason != "invalid_token" {
		t.Errorf("forged token: err = %v, want a 401 invalid_token *client.Error", err)
	}
}

// TestTraceparent: a call through client.Protect from inside the caller's span carries its W3C
// traceparent, so that the server's spans (a guard with a tracer provider) are its children.
func TestTraceparent(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: storeURL(t, "sqlite"),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	s, err := server.New(g, &server.Config{NoConsole: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(sctx, ln) }()
	defer func() { cancel(); <-done }()
	tok, _, err := auth.CreateToken(t.Context(), g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := client.New("http://"+ln.Addr().String(), tok)
	charge := client.Protect(c, "billing.charge", func(context.Context, Charge) (string, error) { return "ch_1", nil }, nil)

	ctx, caller := sdktrace.NewTracerProvider().Tracer("test").Start(t.Context(), "caller")
	if _, err := charge(ctx, Charge{InvoiceID: "inv_tp", Amount: 100}); err != nil {
		t.Fatal(err)
	}
	caller.End()
	var got []string
	for _, sp := range rec.Ended() {
		if n := sp.Name(); n == latch.SpanBegin || n == latch.SpanFinish {
			got = append(got, n)
			if sp.Parent().TraceID() != caller.SpanContext().TraceID() || sp.Parent().SpanID() != caller.SpanContext().SpanID() {
				t.Errorf("server span %s has parent %v, want the caller's span %v", n, sp.Parent(), caller.SpanContext())
			}
		}
	}
	if len(got) != 2 {
		t.Errorf("server spans begin/finish = %v, want both", got)
	}
}
