package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		out  string
		want float64
	}{
		{"4312 calls/s\n", 4312},
		{"warmup 100 calls/s\nresult: 1,720.5 calls/s (p50 0.5ms)\n", 1720.5},
		{"throughput 2_080 ops/s", 2080},
		{"done\n12250\n", 12250},
		{"rate 900/s\n", 900},
		{"5300 req/sec", 5300},
	} {
		got, err := ParseRate([]byte(c.out))
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", c.out, got, err, c.want)
		}
	}
	for _, out := range []string{"", "fast\n", "0 calls/s", "calls per second: many"} {
		if got, err := ParseRate([]byte(out)); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", out, got)
		}
	}
}

func TestRunReference(t *testing.T) {
	t.Parallel()
	run, err := RunReference(t.Context(), "echo 'ref: 2500 calls/s'", time.Minute)
	if err != nil || run.CallsPerSec != 2500 {
		t.Fatalf("RunReference = %+v, %v; want 2500", run, err)
	}
	_, err = RunReference(t.Context(), "echo broken >&2; exit 3", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("a failing reference = %v, want its exit status and stderr", err)
	}
	_, err = RunReference(t.Context(), "sleep 5", 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("a reference past its timeout = %v, want no answer within", err)
	}
	_, err = RunReference(t.Context(), "echo hello", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "no rate") {
		t.Fatalf("a reference printing no rate = %v", err)
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("Median(3,1,2) = %v", m)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2 {
		t.Errorf("Median(4,1,3,2) = %v, want the lower middle 2", m)
	}
	if m := Median(nil); m != 0 {
		t.Errorf("Median(nil) = %v", m)
	}
}
