package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/latchkit/latch/metrics"
	"github.com/latchkit/latch/server"
)

// TestMetricsMadeUpActions: /metrics answers without a token, so whoever can propose calls must
// not be able to grow it a series per made-up action name.
func TestMetricsMadeUpActions(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			m, err := metrics.New(nil) // as latch serve builds it: the server gives it the policy
			if err != nil {
				t.Fatal(err)
			}
			s := start(t, backend, &server.Config{Metrics: m})
			for i := range 100 {
				r := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": fmt.Sprintf("ops.made_up_%d", i)})
				if r.status != http.StatusForbidden {
					t.Fatalf("propose ops.made_up_%d = %d, want 403", i, r.status)
				}
			}
			resp, err := http.Get(s.url + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), "made_up") {
				t.Errorf("/metrics names made-up actions:\n%s", body)
			}
			for _, want := range []string{
				`latch_calls_total{action="(unlisted)",result="denied"} 100`,
				`latch_refusals_total{action="(unlisted)",reason="unknown_action"} 100`,
			} {
				if !strings.Contains(string(body), want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
		})
	}
}
