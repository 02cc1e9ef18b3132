package scan_test

import (
	"fmt"
	"os"
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
	analysistest.Run(t, analysistest.TestData(), scan.Analyzer, "a", "worker", "caller", "httpcase", "wrappers")
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
	// The allows' lines, found in the source so that editing the cases above them keeps this
	// test right: the comment's line, and the call's (the same, or the next).
	src, err := os.ReadFile(filepath.Join(analysistest.TestData(), "src", "a", "a.go"))
	if err != nil {
		t.Fatal(err)
	}
	lineOf := func(text string) int {
		t.Helper()
		for i, l := range strings.Split(string(src), "\n") {
			if strings.Contains(l, text) {
				return i + 1
			}
		}
		t.Fatalf("a.go has no line with %q", text)
		return 0
	}
	above, same, trailing := lineOf("//latch:allow test-mode charge"), lineOf("//latch:allow sandbox smoke test"), lineOf("//latch:allow refund of a sandbox")
	want := []string{
		fmt.Sprintf("a.go:%d (*example.com/pay.Client).Charge test-mode charge against the sandbox account (call line %d)", above, above+1),
		fmt.Sprintf("a.go:%d (*example.com/pay.Client).Charge sandbox smoke test (call line %d)", same, same),
		fmt.Sprintf("a.go:%d example.com/pay.Refund refund of a sandbox charge (call line %d)", trailing, trailing),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("allows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(res.Findings) == 0 {
		t.Errorf("no findings in the Result; the diagnostics reported some")
	}
}

// TestTemporalPreset runs an analyzer built from a configuration in Go, with the temporal
// preset on: activities registered with the worker are protected, a direct call is not.
func TestTemporalPreset(t *testing.T) {
	a := scan.New(&scan.Config{
		Calls: []scan.Rule{
			{Package: "example.com/pay", Func: "(*Client).Charge"},
			{Package: "example.com/pay", Func: "Refund"},
		},
		Integrations: []string{"temporal"},
	})
	analysistest.Run(t, analysistest.TestData(), a, "temporalcase")
}

// TestValidate checks that a configuration built in Go is validated as a file is.
func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  *scan.Config
		want string
	}{
		{&scan.Config{Calls: []scan.Rule{{Package: "p", Func: "(C.M"}}}, `calls[0].func: want Name, (Type).Name or (*Type).Name, got "(C.M"`},
		{&scan.Config{Calls: []scan.Rule{{Package: "p", Func: "F", Hosts: []string{"x"}}}}, `calls[0].hosts: only for package net/http (this rule is for p)`},
		{&scan.Config{Wrappers: []scan.Wrapper{{Package: "p", Func: "(*T."}}}, `wrappers[0].func: want Name, (Type).Name or (*Type).Name, got "(*T."`},
		{&scan.Config{Wrappers: []scan.Wrapper{{Package: "p", Func: "Run", Kind: "around"}}}, `wrappers[0].kind: unknown kind "around" (want func or begin)`},
		{&scan.Config{Integrations: []string{"sidekiq"}}, `integrations[0]: unknown integration "sidekiq" (known: asynq_middleware, temporal)`},
	} {
		err := tc.cfg.Validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("Validate(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	ok := &scan.Config{Calls: []scan.Rule{{Package: "net/http", Func: "(*Client).Do", Hosts: []string{"api.example"}}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", ok, err)
	}
}
