package cli

import (
	"fmt"
	"strconv"

	"github.com/latchkit/latch/internal/bench"
)

// benchGateway is `latch bench --gateway`: tool calls directly to an MCP upstream and through
// the gateway, over loopback streamable HTTP.
func (a *app) benchGateway(o benchOptions) error {
	rep, err := bench.Gateway(a.ctx, &bench.GatewayConfig{Store: o.store, Workers: o.workers, Duration: o.duration})
	if rep == nil {
		return err
	}
	rep.Store = redact(rep.Store)
	if o.asJSON {
		if jerr := jsonLine(a.stdout, rep); jerr != nil {
			return jerr
		}
		return err
	}
	fmt.Fprintf(a.stdout, "store     %s\nsessions  %d\nduration  %s each\n\n", rep.Store, rep.Workers, rep.Duration)
	t := newTable(a.stdout, "", "CALLS", "CALLS/S", "P50", "P99", "CPU/CALL", "ALLOCS/CALL")
	for _, r := range []struct {
		name string
		p    bench.Phase
		cpu  float64
	}{{"direct (refund)", rep.Direct, rep.CPU.Direct}, {"gateway (refund, keyed)", rep.Keyed, rep.CPU.Keyed},
		{"gateway (balance, unkeyed)", rep.Unkeyed, rep.CPU.Unkeyed}} {
		t.row(r.name, strconv.FormatInt(r.p.Calls, 10), fmt.Sprintf("%.0f", r.p.CallsPerSec), fmtMicros(r.p.P50Micros),
			fmtMicros(r.p.P99Micros), fmtMicros(r.cpu), fmt.Sprintf("%.0f", r.p.AllocsPerCall))
	}
	if ferr := t.flush(); ferr != nil {
		return ferr
	}
	fmt.Fprintf(a.stdout, "\ngateway/direct  %.2f  (committed effects: %d)\n", rep.Ratio, rep.Committed)
	fmt.Fprintf(a.stdout, "CPU/CALL is this process's user+system time per call: agents, gateway and upstream together\n")
	return err
}
