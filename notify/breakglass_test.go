package notify_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

const breakGlassPolicy = `schema: latch.policy/v1
actions:
  db.restart:
    effect: "restart:{db}"
    decision: allow
authority:
  grants:
    - id: admins
      subject: {user: alice}
      actions: [db.restart]
      expires_at: "2099-01-01T00:00:00Z"
      delegable: true
  break_glass:
    - id: db-incident
      subject: {agent: "ops-*"}
      actions: [db.restart]
      max_ttl: 1h
`

// TestBreakGlassAlert: opening a break-glass grant alerts once, naming the envelope, whom it is
// for, who opened it, until when and why; a delegation and a refused opening alert nobody.
func TestBreakGlassAlert(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	n := newNotifier(t, notify.Config{URLs: []string{r.url}, Secret: secret})
	p, err := policy.Parse("latch.yaml", []byte(breakGlassPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db"), Sinks: []latch.Sink{n}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ctx := t.Context()
	if _, err := g.Delegate(ctx, "admins", []byte("subject: {agent: db-bot}\nactions: [db.restart]\nexpires_at: \"2098-01-01T00:00:00Z\"\n"),
		latch.Principal{Agent: "cli", User: "alice"}); err != nil {
		t.Fatalf("Delegate: %v", err)
	}
	carol := store.Approver{Name: "carol", Method: store.MethodSession, Verified: true}
	if _, err := g.BreakGlass(ctx, &latch.BreakGlassRequest{Envelope: "db-incident", For: latch.Principal{Agent: "ops-bot"},
		TTL: 2 * time.Hour, Reason: "too long", By: carol}); err == nil {
		t.Fatal("BreakGlass beyond max_ttl = nil error")
	}
	d, err := g.BreakGlass(ctx, &latch.BreakGlassRequest{Envelope: "db-incident", For: latch.Principal{Agent: "ops-bot"},
		TTL: 30 * time.Minute, Reason: "<!channel> primary wedged", By: carol})
	if err != nil {
		t.Fatalf("BreakGlass: %v", err)
	}
	r.wait(t, 1)
	time.Sleep(100 * time.Millisecond) // room for a second alert to arrive
	got := r.wait(t, 1)
	if len(got) != 1 {
		t.Fatalf("got %d alerts, want 1 (the opening): %+v", len(got), got)
	}
	a := got[0]
	if a.Alert != notify.KindBreakGlassOpened || a.Event != store.EventDelegationCreated || a.EventID == 0 {
		t.Errorf("alert = %+v, want break_glass_opened from delegation_created", a)
	}
	for _, want := range []string{"db-incident", "ops-bot", "session:carol", "primary wedged", d.ID} {
		if !strings.Contains(a.Text, want) {
			t.Errorf("alert text %q does not say %q", a.Text, want)
		}
	}
}
