package groupcommit

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: every waiter a test starts is
// released by the batch it joined.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
