package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// traced opens a guard whose spans go to an in-memory recorder.
func traced(t *testing.T) (*latch.Guard, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db"),
		TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, rec
}

// tree is the ended spans as "parent > child" names, in the order they ended, with every span
// of one trace; the attributes of each span by name.
func tree(t *testing.T, rec *tracetest.SpanRecorder) ([]string, map[string]map[attribute.Key]attribute.Value, map[string]sdktrace.ReadOnlySpan) {
	t.Helper()
	spans := rec.Ended()
	byID := map[string]sdktrace.ReadOnlySpan{}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID().String()] = s
		byName[s.Name()] = s
	}
	var out []string
	attrs := map[string]map[attribute.Key]attribute.Value{}
	for _, s := range spans {
		if s.SpanContext().TraceID() != spans[0].SpanContext().TraceID() {
			t.Errorf("span %s is in another trace", s.Name())
		}
		name := s.Name()
		if p, ok := byID[s.Parent().SpanID().String()]; ok && s.Parent().IsValid() {
			name = p.Name() + " > " + name
		}
		out = append(out, name)
		attrs[s.Name()] = map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[s.Name()][kv.Key] = kv.Value
		}
	}
	return out, attrs, byName
}

func TestSpans(t *testing.T) {
	t.Parallel()
	charge := `{"invoice_id":"inv_88","amount":24900}`
	for _, c := range []struct {
		name   string
		run    func(t *testing.T, g *latch.Guard, ctx context.Context)
		spans  []string
		attrs  map[string]map[attribute.Key]string // span → attribute → value
		failed []string                            // spans with status Error
	}{
		{
			name: "committed",
			run: func(t *testing.T, g *latch.Guard, ctx context.Context) {
				if _, err := g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: []byte(charge)},
					func(context.Context, json.RawMessage) (any, error) { return "ch_1", nil }); err != nil {
					t.Fatal(err)
				}
			},
			spans: []string{"latch.call > latch.decide", "latch.call > latch.reserve", "latch.call > latch.execute", "latch.call > latch.record", "latch.call"},
			attrs: map[string]map[attribute.Key]string{
				"latch.call":    {latch.AttrAction: "billing.charge", latch.AttrResult: "committed"},
				"latch.decide":  {latch.AttrDecision: "allow", latch.AttrEffectKey: "charge:inv_88"},
				"latch.reserve": {latch.AttrEffectKey: "charge:inv_88"},
				"latch.execute": {latch.AttrEffectKey: "charge:inv_88"},
				"latch.record":  {latch.AttrResult: "committed"},
			},
		},
		{
			name: "ambiguous",
			run: func(t *testing.T, g *latch.Guard, ctx context.Context) {
				_, err := g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: []byte(charge)},
					func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("read timed out") })
				if !errors.Is(err, latch.ErrAmbiguous) {
					t.Fatal(err)
				}
			},
			spans:  []string{"latch.call > latch.decide", "latch.call > latch.reserve", "latch.call > latch.execute", "latch.call > latch.record", "latch.call"},
			attrs:  map[string]map[attribute.Key]string{"latch.call": {latch.AttrResult: "ambiguous"}, "latch.record": {latch.AttrResult: "ambiguous"}},
			failed: []string{"latch.execute", "latch.call"},
		},
		{
			name: "denied",
			run: func(t *testing.T, g *latch.Guard, ctx context.Context) {
				_, err := g.Execute(ctx, &latch.Call{Action: "ops.drop"}, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
				if !errors.Is(err, latch.ErrDenied) {
					t.Fatal(err)
				}
			},
			spans: []string{"latch.call > latch.decide", "latch.call > latch.record", "latch.call"},
			attrs: map[string]map[attribute.Key]string{
				"latch.call":   {latch.AttrResult: "denied", latch.AttrReason: "unknown_action"},
				"latch.decide": {latch.AttrDecision: "deny", latch.AttrReason: "unknown_action"},
			},
		},
		{
			name: "approval required",
			run: func(t *testing.T, g *latch.Guard, ctx context.Context) {
				_, err := g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: []byte(`{"invoice_id":"inv_9","amount":90000}`)},
					func(context.Context, json.RawMessage) (any, error) { return nil, nil })
				if !errors.Is(err, latch.ErrApprovalRequired) {
					t.Fatal(err)
				}
			},
			spans: []string{"latch.call > latch.decide", "latch.call > latch.approve", "latch.call"},
			attrs: map[string]map[attribute.Key]string{
				"latch.call":   {latch.AttrResult: "approval_required"},
				"latch.decide": {latch.AttrDecision: "approve"},
			},
		},
		{
			name: "begin and finish",
			run: func(t *testing.T, g *latch.Guard, ctx context.Context) {
				p, err := g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: []byte(charge)})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := g.Finish(ctx, p.ActionID, latch.OutcomeCommitted, []byte(`"ch_1"`), ""); err != nil {
					t.Fatal(err)
				}
			},
			spans: []string{"latch.begin > latch.decide", "latch.begin > latch.reserve", "latch.begin", "latch.finish > latch.execute", "latch.finish > latch.record", "latch.finish"},
			attrs: map[string]map[attribute.Key]string{
				"latch.begin":   {latch.AttrEffectKey: "charge:inv_88"},
				"latch.execute": {latch.AttrEffectKey: "charge:inv_88", latch.AttrExecutor: "remote", latch.AttrAction: "billing.charge"},
				"latch.finish":  {latch.AttrAction: "billing.charge", latch.AttrResult: "committed"},
			},
		},
		{
			name: "begin and finish unknown",
			run: func(t *testing.T, g *latch.Guard, ctx context.Context) {
				p, err := g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: []byte(charge)})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := g.Finish(ctx, p.ActionID, latch.OutcomeUnknown, nil, "read timed out"); !errors.Is(err, latch.ErrAmbiguous) {
					t.Fatal(err)
				}
			},
			spans:  []string{"latch.begin > latch.decide", "latch.begin > latch.reserve", "latch.begin", "latch.finish > latch.execute", "latch.finish > latch.record", "latch.finish"},
			attrs:  map[string]map[attribute.Key]string{"latch.finish": {latch.AttrResult: "ambiguous"}, "latch.execute": {latch.AttrExecutor: "remote"}},
			failed: []string{"latch.execute", "latch.finish"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g, rec := traced(t)
			// The caller's own span: latch's spans are its children.
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			ctx, outer := tp.Tracer("test").Start(t.Context(), "caller")
			c.run(t, g, agent(ctx))
			outer.End()
			got, attrs, byName := tree(t, rec)
			want := append(append([]string(nil), c.spans...), "caller")
			for i, s := range want {
				if s == "latch.call" || s == "latch.begin" || s == "latch.finish" {
					want[i] = "caller > " + s
				}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("spans (-want +got):\n%s", d)
			}
			for span, kv := range c.attrs {
				for k, v := range kv {
					if got := attrs[span][k]; got.String() != v {
						t.Errorf("span %s attribute %s = %q, want %q", span, k, got.String(), v)
					}
				}
			}
			failed := map[string]bool{}
			for _, n := range c.failed {
				failed[n] = true
			}
			for name, s := range byName {
				if got := s.Status().Code == codes.Error; got != failed[name] {
					t.Errorf("span %s failed = %t, want %t (%v)", name, got, failed[name], s.Status())
				}
			}
		})
	}
}

// untraced opens a guard with no TracerProvider, on a scratch SQLite file.
func untraced(t *testing.T) *latch.Guard {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db") + "?synchronous=normal"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestNoTracerNoSpans: with no TracerProvider configured and OpenTelemetry's global provider
// never set, a call makes no span at all — the executor sees the caller's context as it was —
// and costs fewer allocations than with a provider that records nothing.
func TestNoTracerNoSpans(t *testing.T) {
	if os.Getenv(globalTracerEnv) != "" {
		t.Skip("runs in its own process only")
	}
	g := untraced(t)
	ctx := agent(t.Context())
	caller := trace.SpanFromContext(ctx)
	var seen trace.Span
	if _, err := g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: []byte(`{"invoice_id":"inv_1","amount":100}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			seen = trace.SpanFromContext(ctx)
			return nil, nil
		}); err != nil {
		t.Fatal(err)
	}
	if seen != caller {
		t.Errorf("the executor's context carries span %T, want the caller's (%T): no span is made without a provider", seen, caller)
	}

	// The same calls with a provider that records nothing still make seven spans (call, decide,
	// reserve, execute, record) and their contexts.
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	nooped, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "noop.db") + "?synchronous=normal",
		TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	defer nooped.Close()
	allocs := func(g *latch.Guard) float64 {
		i := 0
		return testing.AllocsPerRun(50, func() {
			i++
			args := fmt.Sprintf(`{"invoice_id":"inv_a%d","amount":100}`, i)
			if _, err := g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: []byte(args)},
				func(context.Context, json.RawMessage) (any, error) { return nil, nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
	without, with := allocs(g), allocs(nooped)
	if without > with-5 {
		t.Errorf("a call without a tracer provider allocates %.0f times, with a no-op provider %.0f: want at least 5 fewer (no spans)", without, with)
	}
}

// globalTracerEnv makes TestGlobalTracerAfterOpen run the part that sets OpenTelemetry's global
// provider, in a process of its own (the global provider cannot be unset).
const globalTracerEnv = "LATCH_TEST_GLOBAL_TRACER"

// TestGlobalTracerAfterOpen: a guard opened without a TracerProvider makes no spans while the
// global provider is unset, and uses the global provider from the first call after the program
// sets it, even though it was set after Open.
func TestGlobalTracerAfterOpen(t *testing.T) {
	if os.Getenv(globalTracerEnv) == "" {
		t.Parallel()
		cmd := exec.Command(os.Args[0], "-test.run=^TestGlobalTracerAfterOpen$", "-test.count=1")
		cmd.Env = append(os.Environ(), globalTracerEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("the test in its own process: %v\n%s", err, out)
		}
		return
	}
	g := untraced(t)
	call := func(id string) {
		if _, err := g.Execute(agent(t.Context()), &latch.Call{Action: "billing.charge", Arguments: []byte(`{"invoice_id":"` + id + `","amount":100}`)},
			func(context.Context, json.RawMessage) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	call("inv_before")
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp)
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans before the first call after the global provider was set", n)
	}
	call("inv_after")
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	want := []string{"latch.decide", "latch.reserve", "latch.execute", "latch.record", "latch.call"}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("spans after the global provider was set (-want +got):\n%s", d)
	}
}

// TestProposalPayloadsCanonical: the payloads of action_proposed and policy_evaluated, written
// without building maps, are the canonical JSON canon.Marshal writes for the same members,
// whatever the text in them (quotes, backslashes, control characters, non-ASCII, line
// separators).
func TestProposalPayloadsCanonical(t *testing.T) {
	t.Parallel()
	g := untraced(t)
	const who, user, invoice = "agent \"q\" <é>\u2028", "user\\\x01\t", "inv/ü\u00a0\"x\""
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: who, User: user})
	args, err := json.Marshal(map[string]any{"invoice_id": invoice, "amount": 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: args},
		func(context.Context, json.RawMessage) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	evs, err := g.Store().Events(t.Context(), store.EventFilter{EffectKey: "charge:" + invoice})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{
		store.EventActionProposed:  {"action": "billing.charge", "agent": who, "user": user, "resource": "invoice:" + invoice, "environment": "production"},
		store.EventPolicyEvaluated: {"decision": "allow", "reason": "rule[0]"},
	}
	seen := 0
	for _, ev := range evs {
		w, ok := want[ev.Kind]
		if !ok {
			continue
		}
		seen++
		var got map[string]any
		if err := json.Unmarshal(ev.Payload, &got); err != nil {
			t.Fatalf("%s payload %s: %v", ev.Kind, ev.Payload, err)
		}
		for k, v := range w {
			if got[k] != v {
				t.Errorf("%s payload %s = %q, want %q", ev.Kind, k, got[k], v)
			}
		}
		canonical, err := canon.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if string(canonical) != string(ev.Payload) {
			t.Errorf("%s payload\n%s\nis not canonical; canon.Marshal writes\n%s", ev.Kind, ev.Payload, canonical)
		}
	}
	if seen != 2 {
		t.Errorf("found %d of the two opening events in %d events", seen, len(evs))
	}
}
