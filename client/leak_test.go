package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: clients and the servers they talk to end with the test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
