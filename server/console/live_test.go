package console_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
)

// TestLiveMarkers: each page that follows the event stream names the kinds that change what it
// shows (a request's reminder and escalation, standing approvals' uses), and Needs attention
// also says when the earliest live lease of an executing effect lapses, which no event says.
func TestLiveMarkers(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "alice", pw, "payments-leads")
	id := pending(t, s, "ord_1").ApprovalID
	c, _ := login(t, s, "alice")
	kinds := regexp.MustCompile(`data-live="\d+" data-kinds="([a-z_ ]+)"`)
	for _, tc := range []struct {
		path      string
		want, not []string
		lapseAttr bool
	}{
		{"/approvals", []string{"approval_requested", "approval_reminded", "approval_escalated", "standing_granted", "upstream_drifted"}, []string{"standing_used"}, false},
		{"/approvals/" + id, []string{"approval_granted", "approval_reminded", "approval_escalated"}, []string{"standing_used"}, false},
		{"/attention", []string{"execution_ambiguous", "effect_resolved", "execution_suspended", "execution_resumed"}, []string{"approval_reminded", "effect_reserved"}, true},
		{"/standing", []string{"standing_granted", "standing_used", "standing_revoked"}, nil, false},
	} {
		body := consoletest.Get(t, c, s.URL+tc.path).Body
		m := kinds.FindStringSubmatch(body)
		if m == nil {
			t.Errorf("GET %s has no live marker with its kinds", tc.path)
			continue
		}
		got := strings.Fields(m[1])
		for _, k := range tc.want {
			if !contains(got, k) {
				t.Errorf("GET %s follows %v, not %s", tc.path, got, k)
			}
		}
		for _, k := range tc.not {
			if contains(got, k) {
				t.Errorf("GET %s follows %s, which changes nothing it shows", tc.path, k)
			}
		}
		if strings.Contains(body, "data-lapse=") != tc.lapseAttr {
			t.Errorf("GET %s: data-lapse present = %v, want %v", tc.path, !tc.lapseAttr, tc.lapseAttr)
		}
	}

	for path, url := range map[string]string{"/approvals": "/approvals", "/approvals/" + id: "/approvals/" + id, "/attention": "/attention",
		"/standing?state=revoked": "/standing?state=revoked"} {
		if body := consoletest.Get(t, c, s.URL+path).Body; !strings.Contains(body, `data-url="`+url+`"`) {
			t.Errorf("GET %s does not name where it is read again (data-url %q)", path, url)
		}
	}

	lapse := regexp.MustCompile(`data-lapse="([0-9.]*)"`)
	if m := lapse.FindStringSubmatch(consoletest.Get(t, c, s.URL+"/attention").Body); m == nil || m[1] != "" {
		t.Errorf("Needs attention with nothing executing: data-lapse %v, want empty", m)
	}
	_, err := s.Guard.Begin(latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"}),
		&latch.Call{Action: "git.merge", Arguments: json.RawMessage(`{"repo":"latch","number":5}`), Options: &latch.Options{Lease: 90 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	m := lapse.FindStringSubmatch(consoletest.Get(t, c, s.URL+"/attention").Body)
	if m == nil {
		t.Fatal("Needs attention has no data-lapse")
	}
	if secs, err := strconv.ParseFloat(m[1], 64); err != nil || secs <= 80 || secs > 90 {
		t.Errorf("with a 90 s lease just taken, data-lapse = %q, want about 90", m[1])
	}
	s.Clock.Add(2 * time.Minute) // the lease lapsed: the effect is listed, and no lease is left to wait for
	body := consoletest.Get(t, c, s.URL+"/attention").Body
	if m := lapse.FindStringSubmatch(body); m == nil || m[1] != "" || !strings.Contains(body, "merge:latch:5") {
		t.Errorf("after the lease lapsed: data-lapse %v, want empty, and merge:latch:5 listed", m)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
