package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/hostile"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// TestHostileKeysInAlerts: every key shape an agent can send (internal/hostile.Keys), left
// ambiguous, is alerted once in each format. The signed JSON alert carries the key exactly, byte
// for byte, and its text shows every invisible character as its escape; the Slack text carries no
// invisible character and no < or > of the agent's (so no mention, link or markup), whatever the
// key.
func TestHostileKeysInAlerts(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var slack []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var v map[string]string
		_ = json.NewDecoder(req.Body).Decode(&v)
		mu.Lock()
		slack = append(slack, v["text"])
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	r := newReceiver(t)
	sn := newNotifier(t, notify.Config{URLs: []string{srv.URL}, Format: notify.FormatSlack})
	jn := newNotifier(t, notify.Config{URLs: []string{r.url}, Secret: secret})
	p, err := policy.Parse("latch.yaml", []byte("schema: latch.policy/v1\nactions:\n  any.call:\n    effect: \"{key}\"\n    arguments:\n      key: { type: string }\n    decision: allow\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db"), Sinks: []latch.Sink{sn, jn}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"})
	want := map[string]bool{}
	for _, k := range hostile.Keys {
		if len(k.Value) > store.MaxText {
			continue
		}
		args, _ := json.Marshal(map[string]string{"key": k.Value})
		_, err := g.Execute(ctx, &latch.Call{Action: "any.call", Arguments: args}, func(context.Context, json.RawMessage) (any, error) {
			return nil, errors.New("read timed out")
		})
		if !errors.Is(err, latch.ErrAmbiguous) {
			t.Fatalf("Execute(key %q) = %v, want ErrAmbiguous", k.Value, err)
		}
		want[k.Value] = true
	}
	alerts := r.wait(t, len(want))
	got := map[string]int{}
	for _, a := range alerts {
		got[a.EffectKey]++
		if inv := hostile.Invisible(a.Text); len(inv) > 0 {
			t.Errorf("the JSON alert of %q carries invisible characters raw in its text: %q", a.EffectKey, inv)
		}
	}
	for k := range want {
		if got[k] != 1 {
			t.Errorf("the key %q was alerted %d times in JSON (effect_key exactly as sent), want once", k, got[k])
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(slack)
		mu.Unlock()
		if n >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(slack) != len(want) {
		t.Fatalf("%d slack posts, want %d", len(slack), len(want))
	}
	for _, text := range slack {
		if inv := hostile.Invisible(text); len(inv) > 0 {
			t.Errorf("slack text carries invisible characters raw: %q in %q", inv, text)
		}
		if strings.ContainsAny(text, "<>") {
			t.Errorf("slack text carries a raw < or >: %q", text)
		}
	}
}
