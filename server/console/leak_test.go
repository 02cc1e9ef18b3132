package console_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: console servers and their sessions end with the test that started them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
