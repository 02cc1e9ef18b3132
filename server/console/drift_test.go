package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/store"
)

// TestDriftBanner: a drift a gateway recorded in the shared store is a banner on every page,
// with the tool's name marked as outside text is, until a gateway records the tool matched
// again; a drift of another tool still open keeps its own banner. Both stores.
func TestDriftBanner(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := consoletest.Start(t, &consoletest.Options{Backend: backend})
			s.AddAccount(t, "alice", pw)
			c, _ := login(t, s, "alice")
			logs := s.Guard.Store().(interface {
				LogEvents(context.Context, []store.Event) error
			})
			write := func(kind string, p store.UpstreamPin) {
				t.Helper()
				if err := logs.LogEvents(t.Context(), []store.Event{store.NewPinEvent(kind, s.Clock.Now(), p)}); err != nil {
					t.Fatal(err)
				}
			}
			send := store.UpstreamPin{Upstream: "mail", Tool: "send\u202eliame", Pinned: "sha256:" + strings.Repeat("a", 64), Observed: "sha256:" + strings.Repeat("b", 64)}
			list := store.UpstreamPin{Upstream: "mail", Tool: "list", Pinned: "sha256:" + strings.Repeat("c", 64)}
			for _, path := range []string{"/approvals", "/receipts"} {
				if body := consoletest.Get(t, c, s.URL+path).Body; strings.Contains(body, "no longer matches its pin") {
					t.Fatalf("GET %s shows a drift banner before any drift", path)
				}
			}
			write(store.EventUpstreamDrifted, send)
			write(store.EventUpstreamDrifted, list)
			for _, path := range []string{"/approvals", "/attention", "/receipts"} {
				body := consoletest.Get(t, c, s.URL+path).Body
				for _, want := range []string{`role="alert">Upstream mail tool send<span class="esc"`, send.Pinned, send.Observed,
					"latch gateway pin --diff", "Upstream mail tool list no longer matches its pin", "observed nothing: the upstream no longer lists it"} {
					if !strings.Contains(body, want) {
						t.Errorf("GET %s lacks %q", path, want)
					}
				}
				if strings.Contains(body, "\u202e") {
					t.Errorf("GET %s shows the tool name's bidi override unmarked", path)
				}
			}
			matched := send
			matched.Observed = matched.Pinned
			write(store.EventUpstreamPinMatched, matched)
			body := consoletest.Get(t, c, s.URL+"/approvals").Body
			if strings.Contains(body, "tool send") || !strings.Contains(body, "Upstream mail tool list no longer matches its pin") {
				t.Errorf("after send matched again the banners are wrong:\n%s", body)
			}
		})
	}
}
