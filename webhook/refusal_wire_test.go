package webhook

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/refusaltest"
)

// TestRefusalWire holds the webhook receiver to the one refusal table: every refusal is
// answered with the status of its kind and a body naming latch's reason word and the kind; a
// committed duplicate is answered with its stored result.
func TestRefusalWire(t *testing.T) {
	t.Parallel()
	rc := &receiver{cfg: Config{Action: "shipping.ship", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	for _, tc := range refusaltest.Cases {
		w := httptest.NewRecorder()
		rc.respond(w, &Event{ID: "evt_1"}, nil, tc.Err, answerJSON, replayJSON)
		if tc.Kind == latch.KindCommitted {
			if w.Code != 200 || w.Header().Get(HeaderReplayed) != "true" || w.Body.String() != `{"id":1}` {
				t.Errorf("%s: %d %s, want 200 replaying the stored result", tc.Name, w.Code, w.Body)
			}
			continue
		}
		var p problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatalf("%s: body %q: %v", tc.Name, w.Body, err)
		}
		if want := refusaltest.Wire[tc.Kind].Webhook; w.Code != want || p.Error != string(tc.Reason) || p.Kind != string(tc.Kind) {
			t.Errorf("%s: %d error %q kind %q, want %d %q %q", tc.Name, w.Code, p.Error, p.Kind, want, tc.Reason, tc.Kind)
		}
		if lr := latch.RefusalOf(tc.Err); p.Budget != lr.Budget || p.Metric != lr.Metric || p.Window != lr.Window {
			t.Errorf("%s: budget %q metric %q window %q, want %q %q %q", tc.Name, p.Budget, p.Metric, p.Window, lr.Budget, lr.Metric, lr.Window)
		}
		if lr := latch.RefusalOf(tc.Err); p.Dimension != lr.Dimension || p.Rule != lr.Rule {
			t.Errorf("%s: dimension %q rule %q, want %q %q", tc.Name, p.Dimension, p.Rule, lr.Dimension, lr.Rule)
		}
	}
}
