package gateway

import (
	"errors"
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
		if ae := (*latch.AuthorityError)(nil); errors.As(tc.Err, &ae) && r.Dimension != ae.Dimension {
			t.Errorf("%s: dimension %q, want %q", tc.Name, r.Dimension, ae.Dimension)
		}
	}
}
