package latch_test

import (
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store/postgres"
)

// TestClockSkewThresholdCap: the largest clock skew threshold the Postgres store accepts is the
// guard's default lease, as docs/postgres.md says.
func TestClockSkewThresholdCap(t *testing.T) {
	t.Parallel()
	if postgres.MaxClockSkewThreshold != latch.DefaultLease {
		t.Fatalf("postgres.MaxClockSkewThreshold = %s, latch.DefaultLease = %s", postgres.MaxClockSkewThreshold, latch.DefaultLease)
	}
}
