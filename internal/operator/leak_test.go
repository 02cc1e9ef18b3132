package operator_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: WatchBudgets ends with its context.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
