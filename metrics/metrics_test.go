package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/metrics"
	"github.com/latchkit/latch/policy"
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
`

// failingSink refuses every delivery.
type failingSink struct{}

func (failingSink) Receipt(context.Context, *latch.Receipt) error { return errors.New("disk full") }
func (failingSink) Event(context.Context, store.Event) error      { return errors.New("disk full") }

func open(t *testing.T, backend string, sinks ...latch.Sink) (*latch.Guard, *metrics.Sink) {
	t.Helper()
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, backend, "metrics"),
		Sinks: append([]latch.Sink{m}, sinks...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	m.UseStore(g.Store())
	return g, m
}

// value is the value of the metric name with exactly the labels given (name=value pairs), or
// -1 when there is none; a histogram's value is its sample count.
func value(t *testing.T, m *metrics.Sink, name string, labels ...string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		want := map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			want[labels[i]] = labels[i+1]
		}
	next:
		for _, mt := range f.GetMetric() {
			if len(mt.GetLabel()) != len(want) {
				continue
			}
			for _, lp := range mt.GetLabel() {
				if v, ok := want[lp.GetName()]; !ok || v != lp.GetValue() {
					continue next
				}
			}
			return number(mt)
		}
	}
	return -1
}

func number(mt *dto.Metric) float64 {
	switch {
	case mt.Counter != nil:
		return mt.Counter.GetValue()
	case mt.Gauge != nil:
		return mt.Gauge.GetValue()
	case mt.Histogram != nil:
		return float64(mt.Histogram.GetSampleCount())
	}
	return -1
}

// eventually waits for a metric counted from events (delivered after commit, asynchronously).
func eventually(t *testing.T, m *metrics.Sink, want float64, name string, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := value(t, m, name, labels...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSinkCounts(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			g, m := open(t, backend, failingSink{})
			ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"})
			ok := func(context.Context, json.RawMessage) (any, error) { return "ch_1", nil }
			lost := func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("read timed out") }
			call := func(action, args string, fn latch.Executor) error {
				_, err := g.Execute(ctx, &latch.Call{Action: action, Arguments: []byte(args)}, fn)
				return err
			}
			if err := call("billing.charge", `{"invoice_id":"inv_1","amount":100}`, ok); err != nil {
				t.Fatal(err)
			}
			if err := call("billing.charge", `{"invoice_id":"inv_1","amount":100}`, ok); !errors.Is(err, latch.ErrAlreadyCommitted) {
				t.Fatalf("duplicate = %v", err)
			}
			if err := call("ops.drop", `{}`, ok); !errors.Is(err, latch.ErrDenied) {
				t.Fatalf("unlisted = %v", err)
			}
			if err := call("billing.charge", `{"invoice_id":"inv_2","amount":100}`, lost); !errors.Is(err, latch.ErrAmbiguous) {
				t.Fatalf("lost reply = %v", err)
			}
			err := call("billing.charge", `{"invoice_id":"inv_3","amount":90000}`, ok)
			var ar *latch.ApprovalRequiredError
			if !errors.As(err, &ar) {
				t.Fatalf("big charge = %v", err)
			}
			if _, err := g.Approve(t.Context(), ar.ApprovalID, "alice"); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Resolve(t.Context(), "charge:inv_2", store.Committed, "cli:alice"); err != nil {
				t.Fatal(err)
			}

			for _, c := range []struct {
				want   float64
				name   string
				labels []string
			}{
				{1, "latch_calls_total", []string{"action", "billing.charge", "result", "committed"}},
				{1, "latch_calls_total", []string{"action", "billing.charge", "result", "blocked"}},
				{1, "latch_calls_total", []string{"action", "billing.charge", "result", "ambiguous"}},
				{1, "latch_calls_total", []string{"action", "billing.charge", "result", "approval_required"}},
				{1, "latch_calls_total", []string{"action", "ops.drop", "result", "denied"}},
				{1, "latch_refusals_total", []string{"action", "billing.charge", "reason", "committed"}},
				{1, "latch_refusals_total", []string{"action", "ops.drop", "reason", "unknown_action"}},
				{1, "latch_store_transaction_seconds", []string{"op", "create_approval"}},
				{1, "latch_store_transaction_seconds", []string{"op", "answer_approval"}},
				{1, "latch_store_transaction_seconds", []string{"op", "resolve"}},
				{2, "latch_effects", []string{"state", "committed"}},
				{0, "latch_effects", []string{"state", "ambiguous"}},
				{1, "latch_approvals", []string{"status", "granted"}},
				{0, "latch_approvals", []string{"status", "pending"}},
			} {
				if got := value(t, m, c.name, c.labels...); got != c.want {
					t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
				}
			}
			// Reserve: inv_1, its duplicate, inv_2. Record: inv_1, inv_2, the denied ops.drop.
			if got := value(t, m, "latch_store_transaction_seconds", "op", "reserve"); got != 3 {
				t.Errorf("reserve transactions = %v, want 3", got)
			}
			if got := value(t, m, "latch_store_transaction_seconds", "op", "record"); got != 3 {
				t.Errorf("record transactions = %v, want 3", got)
			}
			eventually(t, m, 1, "latch_approvals_requested_total")
			eventually(t, m, 1, "latch_approvals_answered_total", "answer", "granted")
			eventually(t, m, 1, "latch_approval_answer_seconds")
			eventually(t, m, 1, "latch_ambiguous_total", "cause", "executor")
			eventually(t, m, 1, "latch_effects_resolved_total", "to", "committed")
			if got := value(t, m, "latch_sink_failures_total", "sink", "metrics_test.failingSink", "kind", "error"); got < 1 {
				// Delivered asynchronously: wait for at least one.
				deadline := time.Now().Add(5 * time.Second)
				for got < 1 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
					got = value(t, m, "latch_sink_failures_total", "sink", "metrics_test.failingSink", "kind", "error")
				}
				if got < 1 {
					t.Errorf("latch_sink_failures_total{failingSink,error} = %v, want at least 1", got)
				}
			}
		})
	}
}

// TestHandler scrapes the sink over HTTP: the Prometheus text format, with the counters named.
func TestHandler(t *testing.T) {
	t.Parallel()
	g, m := open(t, "sqlite")
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"})
	if _, err := g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: []byte(`{"invoice_id":"inv_1","amount":1}`)},
		func(context.Context, json.RawMessage) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want text/plain (the Prometheus text format)", ct)
	}
	for _, want := range []string{
		`latch_calls_total{action="billing.charge",result="committed"} 1`,
		`latch_effects{state="committed"} 1`,
		`# TYPE latch_store_transaction_seconds histogram`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q:\n%s", want, body)
		}
	}
}

// TestStoreErrorsAreFailures: a store write the store refused by its own rules (a resolution
// refused, a request key used for another request, a lost lease, …) is not a store error; a
// failure is.
func TestStoreErrorsAreFailures(t *testing.T) {
	t.Parallel()
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []error{store.ErrResolveRefused, store.ErrRequestKeyMismatch, store.ErrLeaseLost, store.ErrNotAmbiguous} {
		m.StoreTransaction("resolve", time.Millisecond, fmt.Errorf("resolve k: %w", e))
	}
	if v := value(t, m, "latch_store_errors_total", "op", "resolve"); v > 0 {
		t.Errorf("refusals the store decided counted as %v store errors, want none", v)
	}
	m.StoreTransaction("resolve", time.Millisecond, errors.New("disk I/O error"))
	if v := value(t, m, "latch_store_errors_total", "op", "resolve"); v != 1 {
		t.Errorf("latch_store_errors_total{op=resolve} = %v after one failure, want 1", v)
	}
}

// TestRefusalReasonsAreTheVocabulary: the reason label takes latch's reason words only.
func TestRefusalReasonsAreTheVocabulary(t *testing.T) {
	t.Parallel()
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.CallEnded("billing.charge", "denied", "no_matching_rule")
	m.CallEnded("billing.charge", "denied", "made_up_word")
	if v := value(t, m, "latch_refusals_total", "action", "billing.charge", "reason", "no_matching_rule"); v != 1 {
		t.Errorf("refusals{no_matching_rule} = %v, want 1", v)
	}
	if v := value(t, m, "latch_refusals_total", "action", "billing.charge", "reason", "made_up_word"); v != -1 {
		t.Errorf("a word outside the vocabulary became a label value (%v)", v)
	}
}
