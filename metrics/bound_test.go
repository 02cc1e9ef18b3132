package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/metrics"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// series counts the series of each metric name the sink exports.
func series(t *testing.T, m *metrics.Sink) map[string]int {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	n := map[string]int{}
	for _, f := range fams {
		n[f.GetName()] = len(f.GetMetric())
	}
	return n
}

// randomName is an action name an attacker makes up: printable, or not, or not even UTF-8.
func randomName(r *rand.Rand) string {
	b := make([]byte, 1+r.IntN(40))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	if r.IntN(2) == 0 {
		return fmt.Sprintf("ops.%x", b)
	}
	return string(b)
}

// TestLabelsBounded: /metrics is served without authentication, and an action name is whatever
// a caller sends. 10,000 calls to made-up actions — and made-up reason words and causes — must
// not grow a series each.
func TestLabelsBounded(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	for _, withPolicy := range []bool{true, false} {
		t.Run(fmt.Sprintf("policy=%v", withPolicy), func(t *testing.T) {
			t.Parallel()
			var cfg metrics.Config
			if withPolicy {
				cfg.Policy = pol
			}
			m, err := metrics.New(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			for range 10000 {
				m.CallEnded(randomName(r), "denied", "unknown_action")
				m.CallEnded("billing.charge", "denied", randomName(r))
				m.CallEnded(randomName(r), randomName(r), "")
				m.Event(t.Context(), store.Event{Kind: store.EventExecutionAmbiguous, Payload: json.RawMessage(fmt.Sprintf(`{"cause":%q}`, randomName(r)))})
				m.Event(t.Context(), store.Event{Kind: store.EventEffectResolved, Payload: json.RawMessage(fmt.Sprintf(`{"to":%q}`, randomName(r)))})
			}
			m.CallEnded("billing.charge", "committed", "")
			n := series(t, m)
			// Each label takes at most MaxLabelValues values and one catch-all; with a policy the
			// action label takes one listed name and LabelUnlisted.
			actions := 2
			if !withPolicy {
				actions = metrics.MaxLabelValues + 1
			}
			words := metrics.MaxLabelValues + 1
			for name, max := range map[string]int{
				"latch_calls_total":            actions * words,
				"latch_refusals_total":         actions * words,
				"latch_ambiguous_total":        words,
				"latch_effects_resolved_total": words,
			} {
				if n[name] > max {
					t.Errorf("%s has %d series after 10,000 made-up names, want at most %d", name, n[name], max)
				}
			}
			if withPolicy {
				if got := value(t, m, "latch_calls_total", "action", metrics.LabelUnlisted, "result", "denied"); got != 10000 {
					t.Errorf(`latch_calls_total{action=%q,result="denied"} = %v, want 10000`, metrics.LabelUnlisted, got)
				}
				if got := value(t, m, "latch_calls_total", "action", "billing.charge", "result", "committed"); got != 1 {
					t.Errorf(`latch_calls_total{action="billing.charge",result="committed"} = %v, want 1: a listed name keeps its label`, got)
				}
				if n["latch_calls_total"] > 2+metrics.MaxLabelValues+1 {
					t.Errorf("latch_calls_total has %d series", n["latch_calls_total"])
				}
			}
			// Random bytes are rarely snake_case: causes collapse to LabelOther (or to executor,
			// when the payload does not decode).
			other := value(t, m, "latch_ambiguous_total", "cause", metrics.LabelOther)
			if executor := value(t, m, "latch_ambiguous_total", "cause", "executor"); other < 1000 || other+executor < 9900 {
				t.Errorf(`latch_ambiguous_total{cause=%q} = %v and {cause="executor"} = %v, want nearly all of the 10,000 between them`, metrics.LabelOther, other, executor)
			}
		})
	}
}

// Through a real guard and the scrape a Prometheus server makes: calls to made-up actions count
// under LabelUnlisted, and the scraped text holds none of their names.
func TestUnlistedThroughAGuard(t *testing.T) {
	t.Parallel()
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, "sqlite", "metrics"), Sinks: []latch.Sink{m}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	m.UsePolicy(g.Policy())
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"})
	ok := func(context.Context, json.RawMessage) (any, error) { return "ok", nil }
	for i := range 200 {
		if _, err := g.Execute(ctx, &latch.Call{Action: fmt.Sprintf("ops.made_up_%d", i), Arguments: []byte(`{}`)}, ok); err == nil {
			t.Fatalf("call to an unlisted action ran")
		}
	}
	if _, err := g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: []byte(`{"invoice_id":"inv_1","amount":100}`)}, ok); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	if strings.Contains(text, "made_up") {
		t.Errorf("the scrape names a made-up action:\n%s", text)
	}
	for _, want := range []string{
		`latch_calls_total{action="(unlisted)",result="denied"} 200`,
		`latch_refusals_total{action="(unlisted)",reason="unknown_action"} 200`,
		`latch_calls_total{action="billing.charge",result="committed"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the scrape has no line %q:\n%s", want, text)
		}
	}
}
