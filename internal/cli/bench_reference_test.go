package cli_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/cli"
)

// TestBenchReference: `latch bench --reference CMD` runs CMD and latch's calls benchmark
// alternately, reads CMD's printed rate, and reports each run, the medians and the ratio; a
// command that prints no rate, or fails, fails the run with its reason.
func TestBenchReference(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := func(string) string { return "" }
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), []string{"bench", "--reference", "echo 'reference: 1,000 calls/s'", "--runs", "2",
		"--duration", "150ms", "--store", "sqlite:" + dir + "/b.db", "--json"}, &stdout, &stderr, env)
	if code != cli.ExitOK {
		t.Fatalf("latch bench --reference = %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	var rep struct {
		Reference []struct {
			CallsPerSec float64 `json:"calls_per_sec"`
		} `json:"reference"`
		Latch           []float64 `json:"latch_calls_per_sec"`
		ReferenceMedian float64   `json:"reference_median"`
		LatchMedian     float64   `json:"latch_median"`
		Ratio           float64   `json:"ratio"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json output %q: %v", &stdout, err)
	}
	if len(rep.Reference) != 2 || len(rep.Latch) != 2 || rep.ReferenceMedian != 1000 || rep.LatchMedian <= 0 {
		t.Fatalf("report = %+v, want two runs of each, reference median 1000", rep)
	}
	if want := rep.LatchMedian / 1000; rep.Ratio != want {
		t.Errorf("ratio = %v, want latch median / reference median = %v", rep.Ratio, want)
	}

	stdout.Reset()
	stderr.Reset()
	code = cli.Main(t.Context(), []string{"bench", "--reference", "echo warming up", "--runs", "1", "--duration", "100ms",
		"--store", "sqlite:" + dir + "/c.db"}, &stdout, &stderr, env)
	if code == cli.ExitOK || !strings.Contains(stderr.String(), "no rate in its output") {
		t.Errorf("a reference printing no rate = %d, stderr %q; want a failure naming it", code, &stderr)
	}
	stdout.Reset()
	stderr.Reset()
	code = cli.Main(t.Context(), []string{"bench", "--reference", "echo 5 calls/s", "--serve"}, &stdout, &stderr, env)
	if code != cli.ExitUsage {
		t.Errorf("--reference with --serve = %d, want a usage error; stderr %q", code, &stderr)
	}
}

// TestBenchPinUsage: --pin and --serve-cpuprofile measure the serve benchmark; given to another
// benchmark they are a usage error, not silently ignored.
func TestBenchPinUsage(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "" }
	for _, args := range [][]string{
		{"bench", "--pin"},
		{"bench", "--serve-cpuprofile", "p.prof"},
		{"bench", "--pin", "--reference", "echo 5 calls/s"},
		{"bench", "--pin", "--gateway"},
	} {
		var stdout, stderr bytes.Buffer
		if code := cli.Main(t.Context(), args, &stdout, &stderr, env); code != cli.ExitUsage || !strings.Contains(stderr.String(), "--pin") {
			t.Errorf("%v = %d, stderr %q; want a usage error naming --pin", args, code, &stderr)
		}
	}
}
