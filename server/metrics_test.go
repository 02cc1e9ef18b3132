package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/latchkit/latch/metrics"
	"github.com/latchkit/latch/server"
)

// TestMetrics: calls made over HTTP are counted by the sink the guard was given, and /metrics
// serves them, without a token, in the Prometheus text format.
func TestMetrics(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			m, err := metrics.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			s := start(t, backend, &server.Config{Metrics: m})
			charge := func(inv string, amount int) map[string]any {
				return map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": inv, "amount": amount}}
			}
			r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			s.do("POST", "/v1/actions/"+r.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "committed"})
			s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))                    // duplicate: blocked
			s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "payout.send"}) // denied
			s.do("POST", "/v1/actions", s.alice, charge("inv_2", 90000))                  // approval required

			resp, err := http.Get(s.url + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
				t.Fatalf("GET /metrics = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			for _, want := range []string{
				`latch_calls_total{action="billing.charge",result="committed"} 1`,
				`latch_calls_total{action="billing.charge",result="blocked"} 1`,
				`latch_calls_total{action="billing.charge",result="approval_required"} 1`,
				`latch_calls_total{action="payout.send",result="denied"} 1`,
				`latch_refusals_total{action="billing.charge",reason="committed"} 1`,
				`latch_refusals_total{action="payout.send",reason="denied"} 1`,
				`latch_effects{state="committed"} 1`,
				`latch_approvals{status="pending"} 1`,
				`latch_store_transaction_seconds_count{op="reserve"} 2`,
			} {
				if !strings.Contains(string(body), want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
		})
	}
}
