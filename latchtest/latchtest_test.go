package latchtest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/latchtest"
	"github.com/latchkit/latch/store"
)

// inProcess is the simplest adapter: it runs each call with Guard.Execute and surfaces latch's
// refusal as it is. bend, when set, changes what it surfaces (or does) — a broken adapter.
func inProcess(bend func(ctx context.Context, g *latch.Guard, a latchtest.Args, run func() latchtest.Outcome) latchtest.Outcome) latchtest.Harness {
	return latchtest.Harness{Start: func(t testing.TB, g *latch.Guard, h latchtest.Handler) latchtest.Invoke {
		return func(ctx context.Context, a latchtest.Args) latchtest.Outcome {
			run := func() latchtest.Outcome {
				var result json.RawMessage
				_, err := g.Execute(latch.WithPrincipal(ctx, latchtest.Principal()), &latch.Call{Action: a.Action, Arguments: a.Arguments()},
					func(ctx context.Context, _ json.RawMessage) (any, error) {
						r, err := h(ctx, a)
						result = r
						return r, err
					})
				if err != nil {
					return latchtest.Outcome{Refusal: latch.RefusalOf(err)}
				}
				return latchtest.Outcome{Result: result}
			}
			if bend != nil {
				return bend(ctx, g, a, run)
			}
			return run()
		}
	}}
}

// TestConformingAdapter: an adapter that surfaces latch's refusals as they are passes.
func TestConformingAdapter(t *testing.T) {
	t.Parallel()
	latchtest.Run(t, inProcess(nil))
}

// TestKitFailsBrokenAdapters: the kit is not a formality. Each adapter here breaks one promise,
// and the kit reports the case it breaks.
func TestKitFailsBrokenAdapters(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		wantCase string
		bend     func(ctx context.Context, g *latch.Guard, a latchtest.Args, run func() latchtest.Outcome) latchtest.Outcome
	}{
		{
			name: "approval_required surfaced as denied", wantCase: "approval_bound_to_arguments",
			bend: func(_ context.Context, _ *latch.Guard, _ latchtest.Args, run func() latchtest.Outcome) latchtest.Outcome {
				out := run()
				if r := out.Refusal; r != nil && r.Kind == latch.KindApprovalRequired {
					r.Kind, r.Reason = latch.KindDenied, latch.ReasonDenied
				}
				return out
			},
		},
		{
			name: "retries past ambiguous", wantCase: "lost_reply",
			bend: func(ctx context.Context, g *latch.Guard, _ latchtest.Args, run func() latchtest.Outcome) latchtest.Outcome {
				out := run()
				if r := out.Refusal; r != nil && r.Kind == latch.KindAmbiguous {
					// Assumes the unknown outcome failed, and runs again.
					if _, err := g.Resolve(ctx, r.EffectKey, store.Failed, "broken-adapter"); err == nil {
						return run()
					}
				}
				return out
			},
		},
		{
			name: "approval id dropped", wantCase: "approval_bound_to_arguments",
			bend: func(_ context.Context, _ *latch.Guard, _ latchtest.Args, run func() latchtest.Outcome) latchtest.Outcome {
				out := run()
				if out.Refusal != nil {
					out.Refusal.ApprovalID = ""
				}
				return out
			},
		},
		{
			name: "duplicate answered without its stored result", wantCase: "duplicate",
			bend: func(_ context.Context, _ *latch.Guard, _ latchtest.Args, run func() latchtest.Outcome) latchtest.Outcome {
				out := run()
				if r := out.Refusal; r != nil && r.Kind == latch.KindCommitted {
					return latchtest.Outcome{Result: json.RawMessage(`{}`)}
				}
				return out
			},
		},
		{
			name: "lost reply reported as a failure to retry", wantCase: "lost_reply",
			bend: func(_ context.Context, _ *latch.Guard, _ latchtest.Args, run func() latchtest.Outcome) latchtest.Outcome {
				out := run()
				if r := out.Refusal; r != nil && r.Kind == latch.KindOutcomeUnknown {
					r.Kind, r.Reason = latch.KindNotExecuted, latch.ReasonNotExecuted
				}
				return out
			},
		},
		{
			name: "reason words of its own", wantCase: "key_conflict",
			bend: func(_ context.Context, _ *latch.Guard, _ latchtest.Args, run func() latchtest.Outcome) latchtest.Outcome {
				out := run()
				if r := out.Refusal; r != nil && r.Reason == latch.ReasonKeyConflict {
					r.Reason = "conflict"
				}
				return out
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := latchtest.Test(t, inProcess(c.bend))
			t.Logf("the kit reports: %v", err)
			if err == nil {
				t.Fatalf("the kit passed an adapter whose %s", c.name)
			}
			if !strings.Contains(err.Error(), "case "+c.wantCase+" ") {
				t.Fatalf("the kit reported %v, want a failure of case %s", err, c.wantCase)
			}
		})
	}
}

// TestTable: the table other languages load is well formed: every step is a call with an
// expectation or an approval of an earlier call, and every reason word is latch's, of its kind.
func TestTable(t *testing.T) {
	t.Parallel()
	tbl, err := latchtest.Table()
	if err != nil {
		t.Fatal(err)
	}
	if tbl.Schema != "latch.conformance/v1" || tbl.Principal == "" || tbl.Approver == "" || len(tbl.Cases) == 0 {
		t.Fatalf("table header = %q, %q, %q, %d cases", tbl.Schema, tbl.Principal, tbl.Approver, len(tbl.Cases))
	}
	for _, c := range tbl.Cases {
		for i, s := range c.Steps {
			switch {
			case s.Call != nil && s.Expect != nil && s.Approve == nil:
				if e := s.Expect; e.Kind != "" && e.Reason.Kind() != e.Kind {
					t.Errorf("%s step %d: reason %q is of kind %q, not %q", c.Name, i, e.Reason, e.Reason.Kind(), e.Kind)
				}
				if m := s.Call.Mode; m != "succeed" && m != "lose_reply" && m != "not_executed" {
					t.Errorf("%s step %d: mode %q", c.Name, i, m)
				}
			case s.Approve != nil && s.Call == nil && s.Expect == nil:
				if *s.Approve >= i || c.Steps[*s.Approve].Call == nil {
					t.Errorf("%s step %d approves step %d, not an earlier call", c.Name, i, *s.Approve)
				}
			default:
				t.Errorf("%s step %d: neither a call with its expectation nor an approval", c.Name, i)
			}
		}
	}
}
