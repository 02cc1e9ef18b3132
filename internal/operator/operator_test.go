package operator_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/store"
)

// TestNeedsPersonIsWhatResolveAccepts: an effect needs a person exactly when a person's
// resolution of it is accepted (store.PlanResolve): everything listed can be resolved, and
// everything that can be resolved is listed.
func TestNeedsPersonIsWhatResolveAccepts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	live, lapsed := now.Add(time.Minute), now.Add(-time.Minute)
	for _, tc := range []struct {
		name string
		e    store.Effect
		want bool
	}{
		{"executing, live lease", store.Effect{State: store.Executing, LeaseExpiresAt: live}, false},
		{"executing, lapsed lease", store.Effect{State: store.Executing, LeaseExpiresAt: lapsed}, true},
		{"executing, lease lapses now", store.Effect{State: store.Executing, LeaseExpiresAt: now}, true},
		{"ambiguous, recorded by its holder", store.Effect{State: store.Ambiguous}, true},
		{"ambiguous, holder may act", store.Effect{State: store.Ambiguous, LeaseExpiresAt: lapsed}, true},
		{"committed", store.Effect{State: store.Committed}, false},
		{"failed", store.Effect{State: store.Failed}, false},
		{"committed, outcome conflict", store.Effect{State: store.Committed, Conflict: "its holder reported failed"}, true},
		{"failed, outcome conflict", store.Effect{State: store.Failed, Conflict: "its holder reported committed"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := tc.e
			e.Key, e.Attempt, e.ActionID, e.Action = "charge:inv_1", 1, "act_1", "billing.charge"
			if got := operator.NeedsPerson(&e, now); got != tc.want {
				t.Errorf("NeedsPerson(%s) = %v, want %v", tc.name, got, tc.want)
			}
			for _, to := range []store.State{store.Committed, store.Failed} {
				_, _, err := store.PlanResolve(&store.ResolveRequest{Key: e.Key, To: to, By: "cli:alice", Now: now}, &e)
				if accepted := !errors.Is(err, store.ErrNotAmbiguous); accepted != tc.want {
					t.Errorf("PlanResolve(%s, to %s) = %v: accepted %v, but NeedsPerson says %v", tc.name, to, err, accepted, tc.want)
				}
			}
		})
	}
}

// TestResolutionCheck: a resolution names what is wrong with it — the member, and for a result
// the JSON pointer of the value refused — before anything is written.
func TestResolutionCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		r                      operator.Resolution
		reason, field, pointer string
	}{
		{"no to", operator.Resolution{}, "missing_field", "to", ""},
		{"bad to", operator.Resolution{To: "done"}, "invalid_field", "to", ""},
		{"result with failed", operator.Resolution{To: "failed", Result: []byte(`{"id":1}`)}, "invalid_field", "result", ""},
		{"float result", operator.Resolution{To: "committed", Result: []byte(`{"n":[1,2.5]}`)}, "invalid_field", "result", "/n/1"},
		{"bad note", operator.Resolution{To: "failed", Note: "a\x00b"}, "invalid_field", "note", ""},
	} {
		_, err := tc.r.Check("k", "cli:alice")
		var ie *operator.InputError
		if !errors.As(err, &ie) || ie.Reason != tc.reason || ie.Field != tc.field || ie.Pointer != tc.pointer {
			t.Errorf("%s: Check = %v (%+v), want %s of %s at %q", tc.name, err, ie, tc.reason, tc.field, tc.pointer)
		}
	}
	req, err := (&operator.Resolution{To: "committed", Result: []byte(`{ "b":1, "a":"x" }`), Note: "seen"}).Check("k", "cli:alice")
	if err != nil || string(req.Result) != `{"a":"x","b":1}` || req.To != store.Committed || req.By != "cli:alice" || req.Note != "seen" {
		t.Errorf("Check = %+v, %v; want committed with the canonical result", req, err)
	}
	if req, err := (&operator.Resolution{To: "failed", Result: []byte(" null ")}).Check("k", "cli:alice"); err != nil || req.Result != nil {
		t.Errorf("a null result with failed = %+v, %v; want none", req, err)
	}
}

// TestPageSize: the one rule for a list's page size on every surface — the default when none is
// named, 1 to MaxPage when one is, anything else refused naming the limit.
func TestPageSize(t *testing.T) {
	for _, tc := range []struct {
		n     int
		given bool
		want  int
	}{
		{0, false, operator.DefaultPage},
		{1, true, 1},
		{operator.MaxPage, true, operator.MaxPage},
		{0, true, 0},
		{-1, true, 0},
		{operator.MaxPage + 1, true, 0},
	} {
		got, err := operator.PageSize(tc.n, tc.given)
		if got != tc.want || (err == nil) != (tc.want != 0) {
			t.Errorf("PageSize(%d, %v) = %d, %v; want %d", tc.n, tc.given, got, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("limit %d", tc.n)) {
			t.Errorf("PageSize(%d, %v) refused with %q, want it to name the limit", tc.n, tc.given, err)
		}
	}
}
