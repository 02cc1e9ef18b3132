package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: servers, sweepers and event streams all end with the test that started them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
