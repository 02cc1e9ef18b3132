package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/metrics"
	"github.com/latchkit/latch/policy"
)

// A program registers the sink with its guard; the counters are then those `latch serve`
// shows at /metrics.
func Example() {
	dir, _ := os.MkdirTemp("", "latch-metrics-")
	defer os.RemoveAll(dir)
	p, _ := policy.Parse("latch.yaml", []byte(`
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
`))
	m, err := metrics.New(nil)
	if err != nil {
		panic(err)
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(dir, "state.db"),
		Sinks: []latch.Sink{m}})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	m.UseStore(g.Store())

	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})
	charge := func(context.Context, json.RawMessage) (any, error) { return "ch_1", nil }
	for range 2 {
		_, _ = g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: []byte(`{"invoice_id":"inv_88"}`)}, charge)
	}

	fams, _ := m.Registry().Gather()
	for _, f := range fams {
		if f.GetName() != "latch_calls_total" && f.GetName() != "latch_refusals_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			labels := ""
			for _, l := range mt.GetLabel() {
				labels += " " + l.GetName() + "=" + l.GetValue()
			}
			fmt.Printf("%s%s %v\n", f.GetName(), labels, mt.GetCounter().GetValue())
		}
	}
	// Output:
	// latch_calls_total action=billing.charge result=blocked 1
	// latch_calls_total action=billing.charge result=committed 1
	// latch_refusals_total action=billing.charge reason=committed 1
}
