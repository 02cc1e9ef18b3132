package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// recordingSink keeps what it is given.
type recordingSink struct {
	mu       sync.Mutex
	events   []store.Event
	receipts []*latch.Receipt
}

func (s *recordingSink) Event(_ context.Context, e store.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
	return nil
}

func (s *recordingSink) Receipt(_ context.Context, r *latch.Receipt) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.receipts = append(s.receipts, r)
	return nil
}

func (s *recordingSink) kinds() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, e := range s.events {
		out[e.Kind]++
	}
	return out
}

// sinkGuard opens a guard with sinks; the test closes it (Close flushes the sinks).
func sinkGuard(t *testing.T, doc string, sinks ...latch.Sink) (*latch.Guard, *clock) {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + t.TempDir() + "/s.db", Now: c.Now, Sinks: sinks})
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

// TestOperatorEventsReachSinks: what Approve, Deny, Resolve and a reconcile hook's resolution
// commit reaches the sinks, not only what calls write.
func TestOperatorEventsReachSinks(t *testing.T) {
	t.Parallel()
	sink := &recordingSink{}
	g, _ := sinkGuard(t, nestedPolicy, sink)
	ctx := agent(t.Context())
	nop := func(context.Context, json.RawMessage) (any, error) { return "ok", nil }
	ask := func(id string) string {
		_, err := g.Execute(ctx, &latch.Call{Action: "payout.send", Arguments: json.RawMessage(`{"id":"` + id + `"}`)}, nop)
		var req *latch.ApprovalRequiredError
		if !errors.As(err, &req) {
			t.Fatalf("err = %v, want approval required", err)
		}
		return req.ApprovalID
	}
	if _, err := g.Approve(t.Context(), ask("po_1"), "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Deny(t.Context(), ask("po_2"), "alice"); err != nil {
		t.Fatal(err)
	}
	// An ambiguous effect resolved by a person, another by a reconcile hook.
	lost := func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("reply lost") }
	for _, id := range []string{"a_1", "a_2"} {
		if _, err := g.Execute(ctx, &latch.Call{Action: "audit.write", Arguments: json.RawMessage(`{"id":"` + id + `"}`)}, lost); !errors.Is(err, latch.ErrAmbiguous) {
			t.Fatalf("err = %v, want ambiguous", err)
		}
	}
	if _, err := g.Resolve(t.Context(), "audit:a_1", store.Failed, "cli:alice"); err != nil {
		t.Fatal(err)
	}
	_, err := g.Execute(ctx, &latch.Call{Action: "audit.write", Arguments: json.RawMessage(`{"id":"a_2"}`), Options: &latch.Options{
		Reconcile: func(context.Context, *latch.Attempt) (latch.Outcome, any, error) {
			return latch.OutcomeCommitted, nil, nil
		}}}, nop)
	if !errors.Is(err, latch.ErrDuplicateEffect) {
		t.Fatalf("reconciled call: %v, want a duplicate", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	k := sink.kinds()
	for kind, want := range map[string]int{
		store.EventApprovalGranted: 1, store.EventApprovalDenied: 1, store.EventEffectResolved: 2,
		store.EventReconcileStarted: 1, store.EventReconcileResolved: 1,
	} {
		if k[kind] != want {
			t.Errorf("sink got %d %s events, want %d (all: %v)", k[kind], kind, want, k)
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, e := range sink.events {
		if e.Kind == store.EventApprovalGranted && string(e.Payload) != `{"approver":"alice"}` {
			t.Errorf("approval_granted payload %s, want the approver", e.Payload)
		}
	}
}

// TestSinkGetsTypedReceipt: a sink gets the decoded receipt with its canonical bytes and hash,
// as the call got it (without the executor's value).
func TestSinkGetsTypedReceipt(t *testing.T) {
	t.Parallel()
	sink := &recordingSink{}
	g, _ := sinkGuard(t, testPolicy, sink)
	rc, err := g.Execute(agent(t.Context()), &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"t1","amount":5}`)},
		func(context.Context, json.RawMessage) (any, error) { return "secret result", nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if len(sink.receipts) != 1 {
		t.Fatalf("sink got %d receipts, want 1", len(sink.receipts))
	}
	got := sink.receipts[0]
	if got.Result != "committed" || got.EffectKey != "charge:t1" || got.Seq != rc.Seq || got.Hash != rc.Hash ||
		string(got.Doc) != string(rc.Doc) || got.Value != nil {
		t.Errorf("sink receipt = %+v, want the call's (seq %d, hash %s) with no value", got, rc.Seq, rc.Hash)
	}
}

type panickingSink struct{}

func (panickingSink) Event(context.Context, store.Event) error      { panic("sink exploded") }
func (panickingSink) Receipt(context.Context, *latch.Receipt) error { panic("sink exploded") }

// blockingSink blocks every delivery until release is closed, ignoring its context.
type blockingSink struct{ release chan struct{} }

func (s blockingSink) Event(context.Context, store.Event) error      { <-s.release; return nil }
func (s blockingSink) Receipt(context.Context, *latch.Receipt) error { <-s.release; return nil }

// TestSinkCannotStrandAKey: a sink that panics or blocks neither fails a call, nor stops its
// executor from running after the reservation committed, nor stalls it; the sinks beside it
// still get everything.
func TestSinkCannotStrandAKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		sink latch.Sink
	}{{"panic", panickingSink{}}, {"block", blockingSink{release: make(chan struct{})}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			good := &recordingSink{}
			g, _ := sinkGuard(t, testPolicy, c.sink, good)
			ran := 0
			start := time.Now()
			for i := range 5 {
				rc, err := g.Execute(agent(t.Context()), &latch.Call{Action: "billing.charge",
					Arguments: json.RawMessage(`{"invoice_id":"s` + string(rune('0'+i)) + `","amount":1}`)},
					func(context.Context, json.RawMessage) (any, error) { ran++; return "ok", nil })
				if err != nil || rc == nil || rc.Result != "committed" {
					t.Fatalf("call %d: receipt %v, err %v; want committed", i, rc, err)
				}
			}
			if ran != 5 {
				t.Errorf("executor ran %d times, want 5", ran)
			}
			// Five calls with a blocked sink: each may wait for it once at most (SinkWait), not
			// for ever. The bound is loose on purpose: it separates "bounded" from "stuck".
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("5 calls took %v with a %s sink", d, c.name)
			}
			eff, err := g.Store().Effect(t.Context(), "charge:s0")
			if err != nil || eff.State != store.Committed {
				t.Errorf("effect charge:s0 = %+v, %v; want committed", eff, err)
			}
			if b, ok := c.sink.(blockingSink); ok {
				close(b.release)
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			if len(good.receipts) != 5 {
				t.Errorf("the good sink got %d receipts, want 5", len(good.receipts))
			}
		})
	}
}
