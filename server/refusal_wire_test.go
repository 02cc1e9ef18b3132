package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/client"
	"github.com/latchkit/latch/internal/refusaltest"
)

// TestRefusalWire holds the HTTP API and the Go client to the one refusal table: every refusal
// is answered with the status of its kind, its reason word as the problem's type and reason,
// and its kind; and the Go client, reading that answer off the wire, returns an error that
// RefusalOf reads as the same refusal and that matches the same sentinels as the error the
// server was given.
func TestRefusalWire(t *testing.T) {
	t.Parallel()
	var current error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, problemOf(current))
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "latch_test")
	for _, tc := range refusaltest.Cases {
		want := latch.RefusalOf(tc.Err)
		p := problemOf(tc.Err)
		if w := refusaltest.HTTPStatus(tc.Kind, tc.Reason); p.Status != w || p.Type != ProblemTypePrefix+string(tc.Reason) ||
			p.Reason != string(tc.Reason) || (tc.Kind != latch.KindInternal && p.Kind != string(tc.Kind)) {
			t.Errorf("%s: problem %d %s reason %q kind %q, want %d %s%s kind %q", tc.Name, p.Status, p.Type, p.Reason, p.Kind,
				w, ProblemTypePrefix, tc.Reason, tc.Kind)
		}
		current = tc.Err
		_, err := c.Begin(t.Context(), "a", []byte(`{}`), "", 0)
		if tc.Kind == latch.KindInternal {
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Status != http.StatusInternalServerError {
				t.Errorf("%s: client error %T %v, want a *client.Error 500", tc.Name, err, err)
			}
			continue
		}
		got := latch.RefusalOf(err)
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(latch.Refusal{}, "Detail", "ExpiresAt")); diff != "" {
			t.Errorf("%s: the client's error reads as another refusal (-server +client):\n%s", tc.Name, diff)
		}
		for _, s := range refusaltest.Sentinels {
			if tc.Wraps() {
				break
			}
			if w, g := errors.Is(tc.Err, s), errors.Is(err, s); w != g {
				t.Errorf("%s: errors.Is(client error, %v) = %v, want %v", tc.Name, s, g, w)
			}
		}
	}
}
