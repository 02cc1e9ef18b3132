package policy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: the concurrent loads and
// evaluations the tests start all end with them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
