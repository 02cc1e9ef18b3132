package scan_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/latchkit/latch/scan"
)

func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), scan.Analyzer, "a")
}
