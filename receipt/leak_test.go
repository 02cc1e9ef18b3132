package receipt_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: the verifier's workers end with the verification.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
