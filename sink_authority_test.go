package latch_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// TestDelegationEventsReachSinks: what Delegate and Revoke commit (delegation_created,
// delegation_revoked) and a refused delegation (delegation_rejected) reach a real sink — a
// JSONL file — after commit, as the store holds them (with their ids).
func TestDelegationEventsReachSinks(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("examples/authority/payments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("payments.yaml", doc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := dir + "/sink.jsonl"
	sink, err := latch.NewJSONLSink(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	c := newClock()
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + dir + "/s.db", Now: c.Now, Sinks: []latch.Sink{sink}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	alice := latch.Principal{Agent: "console", User: "alice"}
	d, err := g.Delegate(ctx, "alice-payments", []byte(financeGrant), alice)
	if err != nil {
		t.Fatalf("Delegate: %v", err)
	}
	wide := strings.Replace(supportGrant, "amount_lte: 10000", "amount_lte: 900000", 1)
	var ae *latch.AuthorityError
	if _, err := g.Delegate(ctx, d.ID, []byte(wide), latch.Principal{Agent: "finance-bot"}); !errors.As(err, &ae) {
		t.Fatalf("Delegate(wider than its parent) = %v, want an AuthorityError", err)
	}
	if _, err := g.Revoke(ctx, d.ID, "cli:alice"); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if err := g.Close(); err != nil { // Close flushes the sinks
		t.Fatal(err)
	}

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		ID      int64           `json:"id"`
		Kind    string          `json:"kind"`
		Payload json.RawMessage `json:"payload"`
	}
	got := map[string]line{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var v struct {
			Event *line `json:"event"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("sink line %q: %v", l, err)
		}
		if v.Event != nil {
			if _, dup := got[v.Event.Kind]; dup {
				t.Errorf("sink got %s twice", v.Event.Kind)
			}
			got[v.Event.Kind] = *v.Event
		}
	}

	st, err := latch.OpenStore(t.Context(), "sqlite:"+dir+"/s.db", &latch.StoreOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stored, err := st.Events(t.Context(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{store.EventDelegationCreated, store.EventDelegationRejected, store.EventDelegationRevoked} {
		var want *store.Event
		for _, e := range stored {
			if e.Kind == kind {
				want = e
			}
		}
		l, ok := got[kind]
		switch {
		case want == nil:
			t.Errorf("the store holds no %s event", kind)
		case !ok:
			t.Errorf("the sink got no %s event (it got %v)", kind, got)
		case l.ID != want.ID || string(l.Payload) != string(want.Payload):
			t.Errorf("sink %s = id %d %s, the store holds id %d %s", kind, l.ID, l.Payload, want.ID, want.Payload)
		}
	}
	if l := got[store.EventDelegationCreated]; !strings.Contains(string(l.Payload), `"delegation_id":"`+d.ID+`"`) {
		t.Errorf("delegation_created payload %s does not name %s", l.Payload, d.ID)
	}
}
