package store_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: replay's readers end with the replay.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
