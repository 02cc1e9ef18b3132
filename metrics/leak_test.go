package metrics_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: exporters, sinks and their servers end with the test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
