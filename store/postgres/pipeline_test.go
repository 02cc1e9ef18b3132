package postgres

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// A batch sends its COMMIT with its writes, before their replies are read. When the connection is
// cut at that COMMIT, the replies are lost with it; a write of a batch that landed is then
// answered with its events read back from the store, and the answer must be the events as
// stored: the same ids, kinds and times, once each. Both kinds of batch: reservations (no
// receipt: the commit is settled from an event matched whole) and records (from the receipts).
func TestBatchLostRepliesAnswered(t *testing.T) {
	t.Parallel()
	// Both exec modes that send the COMMIT with the writes: prepared statements (the default)
	// and the pooler mode.
	for name, mode := range map[string]string{"prepared": "", "exec": "default_query_exec_mode=exec"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lostRepliesAnswered(t, mode)
		})
	}
}

func lostRepliesAnswered(t *testing.T, mode string) {
	ctx := t.Context()
	u := newSchemaURL(t)
	if mode != "" {
		u += "&" + mode
	}
	direct, err := Open(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	settled := &countHandler{n: map[string]int{}}
	proxy, proxied := openProxied(t, u, &Config{MaxConns: 4, Logger: slog.New(settled)})
	const iterations, n = 18, 3
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	answered := 0
	for it := range iterations {
		now = now.Add(time.Second)
		mode := []cutMode{cutBefore, cutAfter, cutSent}[it%3]
		what := fmt.Sprintf("iteration %d (cut %s)", it, mode)
		calls := make([]cutCall, n)
		for i := range calls {
			calls[i] = newCutCall(fmt.Sprintf("lostreply:%d:%d", it, i))
		}
		// Reservations that all succeed: a batch without receipts, whose witness is its events.
		res := make([]*store.ReserveResult, n)
		errs := make([]error, n)
		cuts := proxy.cuts.Load()
		proxy.arm(mode)
		gate(t, proxied, n, func(i int) { res[i], errs[i] = proxied.Reserve(ctx, calls[i].reserveReq(now)) })()
		if proxy.take() != cutNone || proxy.cuts.Load() != cuts+1 {
			t.Fatalf("%s: the proxy cut no COMMIT of the reserves", what)
		}
		for i, c := range calls {
			if errs[i] != nil || !res[i].Reserved {
				t.Fatalf("%s: reserve %d = %+v, %v, want reserved", what, i, res[i], errs[i])
			}
			answered += sameEvents(t, direct, what+fmt.Sprintf(": reserve %d", i), c.actionID, res[i].Events)
		}
		rec := make([]*store.RecordResult, n)
		cuts = proxy.cuts.Load()
		proxy.arm([]cutMode{cutBefore, cutAfter, cutSent}[(it+1)%3])
		gate(t, proxied, n, func(i int) {
			rec[i], errs[i] = proxied.Record(ctx, calls[i].recordReq(now.Add(time.Millisecond), res[i].Effect.Attempt))
		})()
		if proxy.take() != cutNone || proxy.cuts.Load() != cuts+1 {
			t.Fatalf("%s: the proxy cut no COMMIT of the records", what)
		}
		for i, c := range calls {
			if errs[i] != nil || rec[i].Lost {
				t.Fatalf("%s: record %d = %+v, %v, want recorded", what, i, rec[i], errs[i])
			}
			answered += sameEvents(t, direct, what+fmt.Sprintf(": record %d", i), c.actionID, rec[i].Events)
		}
	}
	if got := verifyChain(t, direct); got != iterations*n {
		t.Errorf("the chain holds %d receipts, want %d", got, iterations*n)
	}
	landed := settled.count("lost commit settled: it landed") + settled.count("lost commit found landed")
	t.Logf("%d events answered; %d batches or writes found landed after their replies were lost", answered, landed)
	if landed == 0 {
		t.Error("no batch landed with its replies lost: the read-back of its events was not exercised")
	}
}

// sameEvents fails the test unless the events a write answered are events of actionID as the
// store holds them (same id, kind, time), once each, and returns how many there were.
func sameEvents(t *testing.T, direct *Store, what, actionID string, answered []store.Event) int {
	t.Helper()
	stored, err := direct.Events(t.Context(), store.EventFilter{ActionID: actionID})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]*store.Event{}
	for _, e := range stored {
		byID[e.ID] = e
	}
	if len(answered) == 0 {
		t.Fatalf("%s answered no events", what)
	}
	for _, e := range answered {
		s, ok := byID[e.ID]
		if !ok || s.Kind != e.Kind || !s.Time.Equal(e.Time) || s.ActionID != e.ActionID {
			t.Fatalf("%s answered event %+v; the store holds %+v under that id", what, e, s)
		}
		delete(byID, e.ID) // once each
	}
	return len(answered)
}
