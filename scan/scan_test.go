package scan_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/latchkit/latch/scan"
)

// TestAnalyzer runs the analyzer, with the configuration it finds (testdata/src/latch.scan.yaml),
// on the cases: every diagnostic and fact must be one a want comment expects, and every want
// comment must be met.
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), scan.Analyzer, "a", "worker", "caller", "httpcase")
}

// TestAllowSummary checks that the allows that suppressed a finding are in the Result with
// their reasons, and the reasonless one is not.
func TestAllowSummary(t *testing.T) {
	results := analysistest.Run(t, analysistest.TestData(), scan.Analyzer, "a")
	if len(results) != 1 {
		t.Fatalf("got %d results, want 1", len(results))
	}
	res, ok := results[0].Result.(*scan.Result)
	if !ok || res == nil {
		t.Fatalf("Result = %T, want *scan.Result", results[0].Result)
	}
	var got []string
	for _, a := range res.Allows {
		got = append(got, filepath.Base(a.Pos.Filename)+":"+strconv.Itoa(a.Pos.Line)+" "+a.Callee+" "+a.Reason+" (call line "+strconv.Itoa(a.Call.Line)+")")
	}
	want := []string{
		"a.go:181 (*example.com/pay.Client).Charge test-mode charge against the sandbox account (call line 182)",
		"a.go:185 (*example.com/pay.Client).Charge sandbox smoke test (call line 185)",
		"a.go:204 example.com/pay.Refund refund of a sandbox charge (call line 204)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("allows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(res.Findings) == 0 {
		t.Errorf("no findings in the Result; the diagnostics reported some")
	}
}
