package campaign

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	Child()
	os.Exit(m.Run())
}
