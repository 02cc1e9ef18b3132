package latch_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/refusaltest"
)

func TestRefusalOf(t *testing.T) {
	t.Parallel()
	if r := latch.RefusalOf(nil); r != nil {
		t.Errorf("RefusalOf(nil) = %+v, want nil", r)
	}
	for _, tc := range refusaltest.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			// Wrapped as a caller would wrap it: the mapping looks through the chain.
			err := fmt.Errorf("charge invoice: %w", tc.Err)
			r := latch.RefusalOf(err)
			if r.Kind != tc.Kind || r.Reason != tc.Reason {
				t.Fatalf("RefusalOf(%v) = kind %q reason %q, want %q %q", tc.Err, r.Kind, r.Reason, tc.Kind, tc.Reason)
			}
			// Err rebuilds an error that maps back to the same refusal and matches the same
			// sentinels: what the Go client returns for an HTTP problem is what a local guard
			// would have returned.
			back := r.Err()
			if diff := cmp.Diff(r, latch.RefusalOf(back), cmpopts.IgnoreFields(latch.Refusal{}, "Detail")); diff != "" {
				t.Errorf("RefusalOf(RefusalOf(%v).Err()) differs (-want +got):\n%s", tc.Err, diff)
			}
			for _, s := range refusaltest.Sentinels {
				if tc.Wraps() {
					break // the rebuilt error carries this call's refusal, not what it wrapped
				}
				if want, got := errors.Is(tc.Err, s), errors.Is(back, s); want != got {
					t.Errorf("errors.Is(rebuilt %v, %v) = %v, want %v", tc.Err, s, got, want)
				}
			}
			if got, want := latch.TaskVerdictOf(err), refusaltest.Wire[tc.Kind].Task; got != want {
				t.Errorf("TaskVerdictOf(%v) = %v, want %v (the task queues' column of the wire table)", tc.Err, got, want)
			}
			if got := tc.Reason.Kind(); got != tc.Kind {
				t.Errorf("Reason(%q).Kind() = %q, want %q", tc.Reason, got, tc.Kind)
			}
			if got, want := latch.ReasonOf(err), string(tc.Reason); tc.Kind.IsRefusal() && got != want {
				t.Errorf("ReasonOf(%v) = %q, want %q", tc.Err, got, want)
			}
		})
	}
}

// TestRefusalKindsCovered holds the table to every kind: a kind added without a case here is
// a kind no surface test sees.
func TestRefusalKindsCovered(t *testing.T) {
	t.Parallel()
	seen := map[latch.RefusalKind]bool{}
	for _, tc := range refusaltest.Cases {
		seen[tc.Kind] = true
	}
	for _, k := range latch.RefusalKinds() {
		if !seen[k] {
			t.Errorf("no refusal case of kind %q", k)
		}
		if _, ok := refusaltest.Wire[k]; !ok {
			t.Errorf("kind %q has no wire form in refusaltest.Wire", k)
		}
	}
}
