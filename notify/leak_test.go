package notify_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: a notifier's senders end when it is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
