package notify_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/store"
)

// TestReminderAlerts: a reminder's and an escalation's events alert as approval_reminded and
// approval_escalated, naming the action from the event (a sweeper's process never saw the call
// proposed), the progress, who is reminded or escalated to, and the expiry; names are marked
// in JSON and escaped in Slack like every other value, and a progress that is not ours is left
// out rather than shown.
func TestReminderAlerts(t *testing.T) {
	t.Parallel()
	slack := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var v map[string]string
		_ = json.NewDecoder(req.Body).Decode(&v)
		slack <- v["text"]
	}))
	t.Cleanup(srv.Close)
	r := newReceiver(t)
	s := newNotifier(t, notify.Config{URLs: []string{srv.URL}, Format: notify.FormatSlack})
	j := newNotifier(t, notify.Config{URLs: []string{r.url}, Secret: secret})
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	events := []store.Event{
		store.NewEvent(store.EventApprovalReminded, now, "", "", "apr_1", map[string]any{"action": "refund.issue",
			"progress": "1 of 2", "roles": []any{"leads"}, "expires_at": "2026-12-01T11:00:00Z"}),
		store.NewEvent(store.EventApprovalEscalated, now, "", "", "apr_1", map[string]any{"action": "refund.issue",
			"progress": "<!here>", "roles": []any{"heads"}, "people": []any{"<!channel>"}, "expires_at": "2026-12-01T11:00:00Z"}),
	}
	for i, e := range events {
		e.ID = int64(i + 1)
		for _, n := range []*notify.Notifier{s, j} {
			if err := n.Event(context.Background(), e); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := r.wait(t, 2)
	want := []struct{ kind, text string }{
		{notify.KindApprovalReminded, "Reminder: approval apr_1 for refund.issue is still unanswered (1 of 2 granted); approvers: role leads; expires 2026-12-01T11:00:00Z: latch approvals"},
		{notify.KindApprovalEscalated, "Escalated: approval apr_1 for refund.issue is still unanswered; escalated to role heads, <!channel>, who may now answer it; expires 2026-12-01T11:00:00Z: latch approvals"},
	}
	for i, w := range want {
		if got[i].Alert != w.kind || got[i].Text != w.text || got[i].Action != "refund.issue" || got[i].ApprovalID != "apr_1" {
			t.Errorf("alert %d = %+v\nwant %s with text\n%q", i, got[i], w.kind, w.text)
		}
	}
	var texts []string
	for range 2 {
		select {
		case txt := <-slack:
			texts = append(texts, txt)
		case <-time.After(10 * time.Second):
			t.Fatal("no slack post")
		}
	}
	all := strings.Join(texts, "\n")
	if !strings.Contains(all, "escalated to role `heads`, `&lt;!channel&gt;`, who may now answer it") || strings.Contains(all, "<!") {
		t.Errorf("slack texts:\n%s\nwant the names escaped as code spans, no raw mention", all)
	}
}
