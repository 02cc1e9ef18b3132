package gateway

import (
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/refusaltest"
)

// TestRefusalWire holds the gateway to the one refusal table: every refusal reaches an agent
// with the JSON-RPC code of its kind, latch's reason word and the kind itself.
func TestRefusalWire(t *testing.T) {
	t.Parallel()
	for _, tc := range refusaltest.Cases {
		code, r := refusal("mcp.up.act", nil, tc.Err)
		if w := refusaltest.Wire[tc.Kind].Gateway; code != w || r.Reason != string(tc.Reason) || r.Kind != string(tc.Kind) {
			t.Errorf("%s: %d reason %q kind %q, want %d %q %q", tc.Name, code, r.Reason, r.Kind, w, tc.Reason, tc.Kind)
		}
		// A budget refusal names its budget, what it meters and its window, as every surface does.
		if lr := latch.RefusalOf(tc.Err); r.Budget != lr.Budget || r.Metric != lr.Metric || r.Window != lr.Window {
			t.Errorf("%s: budget %q metric %q window %q, want %q %q %q", tc.Name, r.Budget, r.Metric, r.Window, lr.Budget, lr.Metric, lr.Window)
		}
	}
}
