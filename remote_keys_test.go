package latch_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// TestBeginRequestKey: a Begin carrying a request key, asked again with the key (its answer
// lost), is handed the same call — the same action id, attempt, tokens, lease and arguments —
// here and at another guard on the store, writing nothing; another call or principal under the
// key is a *RequestKeyError; a malformed key is refused before anything is written; a call
// without an effect key keeps no key.
func TestBeginRequestKey(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, testPolicy)
			ctx := latch.WithRequestKey(agent(t.Context()), "key-1")
			call := func(inv string) *latch.Call {
				return &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"` + inv + `","amount":100}`)}
			}
			first, err := e.g.Begin(ctx, call("inv_1"))
			if err != nil {
				t.Fatal(err)
			}
			receipts := receiptCount(t, e.g)
			e.clock.Add(time.Minute)
			other := e.another(t, testPolicy)
			for i, g := range []*latch.Guard{e.g, other} {
				again, err := g.Begin(ctx, call("inv_1"))
				if err != nil {
					t.Fatalf("replay %d: %v", i, err)
				}
				if diff := cmpPending(first, again); diff != "" {
					t.Errorf("replay %d differs from the first answer: %s", i, diff)
				}
			}
			if n := receiptCount(t, e.g); n != receipts {
				t.Errorf("replays wrote %d receipts", n-receipts)
			}
			var ee *latch.EffectError
			if _, err := e.g.Begin(agent(t.Context()), call("inv_1")); !errors.As(err, &ee) || ee.Reason != "in_progress" {
				t.Errorf("the call without its key: %v, want in_progress", err)
			}
			var ke *latch.RequestKeyError
			if _, err := e.g.Begin(ctx, call("inv_2")); !errors.As(err, &ke) || ke.Reason != "request_key_other_action" || !errors.Is(err, latch.ErrRequestKeyMismatch) {
				t.Errorf("another call under the key: %v, want request_key_other_action", err)
			}
			stranger := latch.WithRequestKey(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "other-worker"}), "key-1")
			if _, err := e.g.Begin(stranger, call("inv_1")); !errors.As(err, &ke) || ke.Reason != "request_key_other_principal" {
				t.Errorf("another principal under the key: %v, want request_key_other_principal", err)
			}
			before := receiptCount(t, e.g)
			if _, err := e.g.Begin(latch.WithRequestKey(agent(t.Context()), "bad key"), call("inv_3")); !errors.Is(err, store.ErrInvalidInput) {
				t.Errorf("a malformed key: %v, want ErrInvalidInput", err)
			}
			if n := receiptCount(t, e.g); n != before {
				t.Errorf("a malformed key wrote %d receipts", n-before)
			}
			// A call without an effect key reserves nothing: its key is not kept, each Begin is its own.
			read := &latch.Call{Action: "report.read"}
			a, err1 := e.g.Begin(latch.WithRequestKey(agent(t.Context()), "key-read"), read)
			b, err2 := e.g.Begin(latch.WithRequestKey(agent(t.Context()), "key-read"), read)
			if err1 != nil || err2 != nil || a.ActionID == b.ActionID {
				t.Errorf("two Begins without an effect key under one key: %v, %v, %v; want two calls", a, b, errors.Join(err1, err2))
			}
		})
	}
}

// cmpPending compares what a replay must hand back unchanged.
func cmpPending(a, b *latch.Pending) string {
	switch {
	case a.ActionID != b.ActionID:
		return "action id " + b.ActionID + ", want " + a.ActionID
	case a.Attempt != b.Attempt || a.EffectKey != b.EffectKey:
		return fmt.Sprintf("effect %s attempt %d, want %s attempt %d", b.EffectKey, b.Attempt, a.EffectKey, a.Attempt)
	case a.IdempotencyToken != b.IdempotencyToken || a.EffectToken != b.EffectToken:
		return "tokens differ"
	case !a.LeaseExpiresAt.Equal(b.LeaseExpiresAt):
		return fmt.Sprintf("lease %s, want %s", b.LeaseExpiresAt, a.LeaseExpiresAt)
	case string(a.Arguments) != string(b.Arguments) || a.ActionHash != b.ActionHash:
		return fmt.Sprintf("arguments %s (%s), want %s (%s)", b.Arguments, b.ActionHash, a.Arguments, a.ActionHash)
	}
	return ""
}

// TestBegunCallsBounded: the calls a guard keeps for their outcome are bounded by bytes, in all
// and per principal. A call with large arguments is not kept; one principal beginning many calls
// evicts its own oldest, never another's; every call, kept or not, is finished alike (rebuilt
// from the store when not kept).
func TestBegunCallsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testPolicy)
	e.g.SetBegunBounds(256<<10, 64<<10)
	begin := func(who string, i int, pad int) *latch.Pending {
		t.Helper()
		ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: who})
		args := fmt.Sprintf(`{"invoice_id":"%s-%d","amount":100,"memo":%q}`, who, i, strings.Repeat("m", pad))
		p, err := e.g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := begin("big-worker", 0, 200<<10)
	if e.g.BegunCached(big.ActionID) {
		t.Errorf("a call of 200 KiB arguments is kept in memory")
	}
	quiet := begin("quiet-worker", 0, 10)
	var flood []*latch.Pending
	for i := range 200 {
		flood = append(flood, begin("busy-worker", i, 1000))
	}
	n, bytes := e.g.BegunKept()
	t.Logf("kept %d calls, %d bytes", n, bytes)
	if bytes > 256<<10 {
		t.Errorf("kept %d bytes, more than the 256 KiB bound", bytes)
	}
	if !e.g.BegunCached(quiet.ActionID) {
		t.Errorf("another principal's flood evicted the quiet worker's call")
	}
	if e.g.BegunCached(flood[0].ActionID) || !e.g.BegunCached(flood[len(flood)-1].ActionID) {
		t.Errorf("the busy worker's oldest call is kept, or its newest is not")
	}
	kept := 0
	for _, p := range flood {
		if e.g.BegunCached(p.ActionID) {
			kept++
		}
	}
	if kept == 0 || kept > (64<<10)/1000 {
		t.Errorf("the busy worker has %d calls kept, want some and at most its 64 KiB", kept)
	}
	for _, p := range []*latch.Pending{big, quiet, flood[0], flood[len(flood)-1]} {
		who := p.Principal.Agent
		rc, err := e.g.Finish(latch.WithPrincipal(t.Context(), latch.Principal{Agent: who}), p.ActionID, latch.OutcomeCommitted, json.RawMessage(`{"ok":1}`), "")
		if err != nil || rc.Result != "committed" || !strings.Contains(string(rc.Doc), `"memo"`) {
			t.Errorf("Finish of %s's %s: %v, %v; want committed with its arguments", who, p.ActionID, rc, err)
		}
	}
	if n, bytes := e.g.BegunKept(); bytes > 256<<10 || n > 200 {
		t.Errorf("after the outcomes kept %d calls, %d bytes", n, bytes)
	}
}
