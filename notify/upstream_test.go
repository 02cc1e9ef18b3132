package notify_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/store"
)

// TestUpstreamDriftAlert: an upstream_drifted event is alerted upstream_drift, naming the tool
// and both hashes; in Slack a tool name the upstream chose cannot mention anyone or hide
// characters.
func TestUpstreamDriftAlert(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var texts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var v map[string]string
		_ = json.NewDecoder(req.Body).Decode(&v)
		mu.Lock()
		texts = append(texts, v["text"])
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	n, err := notify.New(&notify.Config{URLs: []string{srv.URL}, Format: notify.FormatSlack})
	if err != nil {
		t.Fatal(err)
	}
	p := store.UpstreamPin{Upstream: "mail", Tool: "send<!channel>\u200b", Pinned: "sha256:" + strings.Repeat("a", 64), Observed: "sha256:" + strings.Repeat("b", 64)}
	e := store.NewPinEvent(store.EventUpstreamDrifted, time.Now(), p)
	e.ID = 7
	if err := n.Event(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if err := n.Event(t.Context(), store.NewPinEvent(store.EventUpstreamPinMatched, time.Now(), p)); err != nil {
		t.Fatal(err)
	}
	// Close drops what is still queued: wait for the post first.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		got := len(texts)
		mu.Unlock()
		if got > 0 || time.Now().After(deadline) {
			break
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(texts) != 1 {
		t.Fatalf("posts = %q, want one (a match is not alerted)", texts)
	}
	got := texts[0]
	for _, want := range []string{"Upstream `mail` tool", p.Pinned, p.Observed, "latch gateway pin --diff", "&lt;!channel&gt;", `\u200b`} {
		if !strings.Contains(got, want) {
			t.Errorf("alert %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "<!channel>") || strings.Contains(got, "\u200b") {
		t.Errorf("alert %q carries the upstream's markup or invisible character", got)
	}
}
