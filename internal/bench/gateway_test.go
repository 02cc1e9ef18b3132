package bench

import (
	"testing"
	"time"
)

// A short gateway run measures all three phases over real loopback sockets, and the keyed
// phase leaves exactly one committed effect per call.
func TestGateway(t *testing.T) {
	t.Parallel()
	rep, err := Gateway(t.Context(), &GatewayConfig{Workers: 2, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Phase{"direct": rep.Direct, "keyed": rep.Keyed, "unkeyed": rep.Unkeyed} {
		if p.Calls == 0 || p.CallsPerSec <= 0 || p.P99Micros < p.P50Micros {
			t.Errorf("%s phase = %+v, want calls and a latency distribution", name, p)
		}
	}
	if rep.Committed != rep.Keyed.Calls+warmup {
		t.Errorf("committed = %d, want %d (one per keyed call)", rep.Committed, rep.Keyed.Calls+warmup)
	}
	if rep.CPU.Direct <= 0 || rep.CPU.Keyed <= 0 || rep.CPU.Unkeyed <= 0 {
		t.Errorf("cpu per call = %+v, want each measured", rep.CPU)
	}
	if rep.Ratio <= 0 {
		t.Errorf("ratio = %v", rep.Ratio)
	}
}
