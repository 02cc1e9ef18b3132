package interrupt_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/interrupt"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

const testPolicy = `
schema: latch.policy/v1
actions:
  payout.send:
    effect: "payout:{id}"
    decision: approve
  audit.write:
    effect: "audit:{id}"
    decision: allow
`

func open(t *testing.T, ttl time.Duration) *latch.Guard {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, "sqlite", "interrupt"), ApprovalTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

var ctxAgent = func(ctx context.Context) context.Context {
	return latch.WithPrincipal(ctx, latch.Principal{Agent: "worker"})
}

// ask runs payout id and returns its approval_required refusal.
func ask(t *testing.T, g *latch.Guard, id string) *latch.Refusal {
	t.Helper()
	_, err := g.Execute(ctxAgent(t.Context()), &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"` + id + `"}`)},
		func(context.Context, json.RawMessage) (any, error) {
			t.Fatalf("payout %s ran unapproved", id)
			return nil, nil
		})
	r := latch.RefusalOf(err)
	if r == nil || r.Kind != latch.KindApprovalRequired || !interrupt.Interruptible(r) {
		t.Fatalf("payout %s = %v, want an interruptible approval_required", id, err)
	}
	return r
}

func check(t *testing.T, g *latch.Guard, r *latch.Refusal) interrupt.Answer {
	t.Helper()
	ans, err := interrupt.Check(t.Context(), g, r)
	if err != nil {
		t.Fatalf("Check(%+v): %v", r, err)
	}
	return ans
}

// TestCheck: where a wait stands, read from the store: pending is Waiting, granted is Resume (and
// the call run again spends the grant), denied is Denied with approval_denied as its refusal, a
// request asked again after a denial is Denied naming both, an expired one Expired; an
// ambiguous effect is Waiting until it is resolved.
func TestCheck(t *testing.T) {
	t.Parallel()
	g := open(t, time.Hour)

	r := ask(t, g, "p1")
	if ans := check(t, g, r); ans.Status != interrupt.Waiting || ans.EffectKey != "payout:p1" {
		t.Fatalf("pending: %+v, want waiting on payout:p1", ans)
	}
	if _, err := g.Approve(t.Context(), r.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	if ans := check(t, g, r); ans.Status != interrupt.Resume || ans.By != "alice" || ans.Refusal() != nil {
		t.Fatalf("granted: %+v, want resume by alice, no refusal", ans)
	}

	d := ask(t, g, "p2")
	if _, err := g.Deny(t.Context(), d.ApprovalID, "bob"); err != nil {
		t.Fatal(err)
	}
	ans := check(t, g, d)
	if ans.Status != interrupt.Denied || ans.By != "bob" {
		t.Fatalf("denied: %+v", ans)
	}
	if ref := ans.Refusal(); ref.Reason != latch.ReasonApprovalDenied || ref.Kind != latch.KindApprovalRefused || ref.ApprovalID != d.ApprovalID {
		t.Fatalf("denied refusal = %+v", ref)
	}
	if back := latch.RefusalOf(ans.Refusal().Err()); back.Reason != latch.ReasonApprovalDenied || back.ApprovalID != d.ApprovalID {
		t.Fatalf("RefusalOf(Answer.Refusal().Err()) = %+v, want approval_denied naming %s", back, d.ApprovalID)
	}
	// The next attempt of the denied call is handed a new request, which remembers the denial.
	again := ask(t, g, "p2")
	if again.ApprovalID == d.ApprovalID {
		t.Fatal("the attempt after a denial was handed the denied request")
	}
	if ans := check(t, g, again); ans.Status != interrupt.Denied || ans.ApprovalID != d.ApprovalID || ans.Pending != again.ApprovalID || ans.By != "bob" {
		t.Fatalf("asked again after a denial: %+v, want denied naming %s, pending %s", ans, d.ApprovalID, again.ApprovalID)
	}

	// An ambiguous effect waits until it is resolved.
	_, err := g.Execute(ctxAgent(t.Context()), &latch.Call{Action: "audit.write", Arguments: json.RawMessage(`{"id":"a1"}`)},
		func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("connection reset") })
	amb := latch.RefusalOf(err)
	if !interrupt.Interruptible(amb) {
		t.Fatalf("lost reply: %+v, want interruptible", amb)
	}
	if ans := check(t, g, amb); ans.Status != interrupt.Waiting {
		t.Fatalf("ambiguous: %+v, want waiting", ans)
	}
	if _, err := g.Resolve(t.Context(), "audit:a1", store.Failed, "ops"); err != nil {
		t.Fatal(err)
	}
	if ans := check(t, g, amb); ans.Status != interrupt.Resume || ans.By != "ops" {
		t.Fatalf("resolved: %+v, want resume by ops", ans)
	}

	if _, err := interrupt.Check(t.Context(), g, &latch.Refusal{Kind: latch.KindDenied, Reason: latch.ReasonDenied}); !errors.Is(err, interrupt.ErrNotInterruptible) {
		t.Fatalf("Check(denied) = %v, want ErrNotInterruptible", err)
	}
}

func TestCheckExpired(t *testing.T) {
	t.Parallel()
	g := open(t, 50*time.Millisecond)
	r := ask(t, g, "p9")
	time.Sleep(100 * time.Millisecond)
	ans := check(t, g, r)
	if ans.Status != interrupt.Expired || ans.Refusal().Reason != latch.ReasonApprovalExpired {
		t.Fatalf("expired: %+v, want expired with approval_expired", ans)
	}
}

func TestInterruptible(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    *latch.Refusal
		want bool
	}{
		{nil, false},
		{&latch.Refusal{Kind: latch.KindApprovalRequired, ApprovalID: "apr_1"}, true},
		{&latch.Refusal{Kind: latch.KindApprovalRequired}, false},
		{&latch.Refusal{Kind: latch.KindAmbiguous, EffectKey: "k"}, true},
		{&latch.Refusal{Kind: latch.KindOutcomeUnknown, EffectKey: "k"}, true},
		{&latch.Refusal{Kind: latch.KindOutcomeUnknown}, false},
		{&latch.Refusal{Kind: latch.KindDenied, EffectKey: "k"}, false},
		{&latch.Refusal{Kind: latch.KindCommitted, EffectKey: "k"}, false},
	} {
		if got := interrupt.Interruptible(c.r); got != c.want {
			t.Errorf("Interruptible(%+v) = %v, want %v", c.r, got, c.want)
		}
	}
}

// TestPoller: a Poller blocks until a person answers — granted, it returns Resume and the call
// run again runs once; it ends with its context otherwise.
func TestPoller(t *testing.T) {
	t.Parallel()
	g := open(t, time.Hour)
	r := ask(t, g, "p5")
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = g.Approve(context.Background(), r.ApprovalID, "alice")
	}()
	ans, err := interrupt.Poller{Guard: g, Every: 10 * time.Millisecond}.Interrupt(t.Context(), r)
	if err != nil || ans.Status != interrupt.Resume || ans.By != "alice" {
		t.Fatalf("Interrupt = %+v, %v; want resume by alice", ans, err)
	}
	ran := 0
	if _, err := g.Execute(ctxAgent(t.Context()), &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"p5"}`)},
		func(context.Context, json.RawMessage) (any, error) { ran++; return nil, nil }); err != nil || ran != 1 {
		t.Fatalf("resumed call = %v, ran %d; want it to run once on the grant", err, ran)
	}

	waiting := ask(t, g, "p6")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := (interrupt.Poller{Guard: g, Every: 10 * time.Millisecond}).Interrupt(ctx, waiting); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Interrupt with no answer = %v, want the context's deadline", err)
	}
}
