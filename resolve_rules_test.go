package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

const resolveRulesPolicy = `
schema: latch.policy/v1
approvers:
  roles:
    payments-leads: [carol]
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
  billing.refund:
    effect: "refund:{invoice_id}"
    decision: allow
    approvers: { roles: [payments-leads] }
`

// TestResolveRules: Guard.ResolveEffect, which every surface resolves through (CLI, API,
// console, mcp-operator), refuses a person resolving their own attempt — the attempt's agent or
// the user it acted for, under any surface and spelling — and, for an action whose approvers
// name roles, a person outside them. A refusal is a *store.ResolveError matching
// ErrResolveRefused and writes nothing. A resolution bound to an attempt (Holder) that no longer
// holds the record is refused by the store. Then an entitled person resolves.
func TestResolveRules(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, resolveRulesPolicy)
			ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker", User: "dan"})
			lost := func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("connection reset") }
			for _, c := range []*latch.Call{
				{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_1"}`)},
				{Action: "billing.refund", Arguments: json.RawMessage(`{"invoice_id":"inv_2"}`)},
			} {
				if _, err := e.g.Execute(ctx, c, lost); !errors.Is(err, latch.ErrAmbiguous) {
					t.Fatalf("Execute %s = %v, want ErrAmbiguous", c.Action, err)
				}
			}
			before := writes(t, e.g)
			for _, c := range []struct {
				key, by, reason string
			}{
				{"charge:inv_1", "cli:billing-worker", store.ReasonSelfResolution},
				{"charge:inv_1", "http:Billing-Worker", store.ReasonSelfResolution},
				{"charge:inv_1", "billing-worker", store.ReasonSelfResolution},
				{"charge:inv_1", "console:DAN", store.ReasonSelfResolution},
				{"charge:inv_1", "mcp:\uff44\uff41\uff4e", store.ReasonSelfResolution}, // fullwidth "dan"
				{"refund:inv_2", "mcp-stdio:dan", store.ReasonSelfResolution},
				{"refund:inv_2", "cli:erin", store.ReasonNotEntitled},
			} {
				for _, to := range []store.State{store.Failed, store.Committed} {
					_, err := e.g.Resolve(t.Context(), c.key, to, c.by)
					var re *store.ResolveError
					if !errors.As(err, &re) || re.Reason != c.reason || re.Key != c.key || re.Attempt != 1 || !errors.Is(err, store.ErrResolveRefused) {
						t.Errorf("Resolve %s %s by %q = %v, want a ResolveError %s", c.key, to, c.by, err, c.reason)
					}
				}
			}
			if after := writes(t, e.g); after != before {
				t.Errorf("refused resolutions wrote %d transactions", after-before)
			}
			eff, err := e.g.Store().Effect(t.Context(), "charge:inv_1")
			if err != nil || eff.State != store.Ambiguous {
				t.Fatalf("charge:inv_1 = %+v, %v; want still ambiguous", eff, err)
			}
			_, err = e.g.Store().Resolve(t.Context(), &store.ResolveRequest{Now: e.clock.Now(), Key: "charge:inv_1", To: store.Failed,
				By: "cli:erin", Holder: "act_00000000000000000000000000000000"})
			if !errors.Is(err, store.ErrNotAmbiguous) {
				t.Errorf("Resolve bound to another attempt = %v, want ErrNotAmbiguous", err)
			}
			if after := writes(t, e.g); after != before {
				t.Errorf("a resolution bound to another attempt wrote %d transactions", after-before)
			}
			if got, err := e.g.Resolve(t.Context(), "charge:inv_1", store.Failed, "cli:erin"); err != nil || got.State != store.Failed || got.ResolvedBy != "cli:erin" {
				t.Errorf("erin resolves charge:inv_1 = %+v, %v", got, err)
			}
			if got, err := e.g.Resolve(t.Context(), "refund:inv_2", store.Committed, "console:carol"); err != nil || got.State != store.Committed {
				t.Errorf("carol resolves refund:inv_2 = %+v, %v", got, err)
			}
		})
	}
}

// TestResolveBoundToShownRecord: a resolution bound to the record a person was shown (the
// attempt's action id in Holder, its UpdatedAt in Updated) never resolves a record that moved on
// since. Attempt 1 is shown; before the resolution is written it is resolved failed by someone
// else and a retry leaves attempt 2 ambiguous: the bound resolution is refused ErrNotAmbiguous,
// writes nothing, and attempt 2 stays ambiguous. A resolution bound to attempt 2 but to an
// earlier update of it is refused the same way, and one bound to attempt 2 as it stands resolves.
func TestResolveBoundToShownRecord(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, resolveRulesPolicy)
			ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker", User: "dan"})
			lost := func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("connection reset") }
			call := &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(`{"invoice_id":"inv_9"}`)}
			if _, err := e.g.Execute(ctx, call, lost); !errors.Is(err, latch.ErrAmbiguous) {
				t.Fatalf("Execute = %v, want ErrAmbiguous", err)
			}
			shown, err := e.g.Store().Effect(t.Context(), "charge:inv_9")
			if err != nil {
				t.Fatal(err)
			}
			// Meanwhile: another person resolves attempt 1 failed, and the retry's attempt 2 is lost too.
			if _, err := e.g.Resolve(t.Context(), "charge:inv_9", store.Failed, "cli:erin"); err != nil {
				t.Fatal(err)
			}
			e.clock.Add(time.Millisecond)
			if _, err := e.g.Execute(ctx, call, lost); !errors.Is(err, latch.ErrAmbiguous) {
				t.Fatalf("retry = %v, want ErrAmbiguous", err)
			}
			now, err := e.g.Store().Effect(t.Context(), "charge:inv_9")
			if err != nil || now.Attempt != 2 || now.ActionID == shown.ActionID {
				t.Fatalf("after the retry the effect is %+v, %v; want attempt 2", now, err)
			}
			before := writes(t, e.g)
			for _, bound := range []*store.ResolveRequest{
				{Holder: shown.ActionID, Updated: shown.UpdatedAt},                    // the card of attempt 1
				{Holder: shown.ActionID},                                              // attempt 1, however updated
				{Holder: now.ActionID, Updated: now.UpdatedAt.Add(-time.Microsecond)}, // attempt 2, an earlier version
			} {
				bound.Key, bound.To, bound.By = "charge:inv_9", store.Committed, "console:carol"
				if _, err := e.g.ResolveEffect(t.Context(), bound); !errors.Is(err, store.ErrNotAmbiguous) {
					t.Errorf("ResolveEffect bound to %s at %v = %v, want ErrNotAmbiguous", bound.Holder, bound.Updated, err)
				}
				b := *bound
				b.Now = e.clock.Now()
				if _, err := e.g.Store().Resolve(t.Context(), &b); !errors.Is(err, store.ErrNotAmbiguous) {
					t.Errorf("Store().Resolve bound to %s at %v = %v, want ErrNotAmbiguous", bound.Holder, bound.Updated, err)
				}
			}
			if after := writes(t, e.g); after != before {
				t.Errorf("resolutions bound to what was no longer there wrote %d transactions", after-before)
			}
			if got, err := e.g.Store().Effect(t.Context(), "charge:inv_9"); err != nil || got.State != store.Ambiguous || got.Attempt != 2 {
				t.Fatalf("attempt 2 after the stale resolutions = %+v, %v; want still ambiguous", got, err)
			}
			got, err := e.g.ResolveEffect(t.Context(), &store.ResolveRequest{Key: "charge:inv_9", To: store.Committed, By: "console:carol",
				Holder: now.ActionID, Updated: now.UpdatedAt})
			if err != nil || got.State != store.Committed || got.Attempt != 2 {
				t.Errorf("ResolveEffect bound to attempt 2 as it stands = %+v, %v", got, err)
			}
		})
	}
}
