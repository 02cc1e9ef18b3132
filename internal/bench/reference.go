package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MaxReferenceOutput bounds what a reference command's output is read to: its rate is in the
// last lines, and a command that prints more is cut there (the rest is drained and dropped).
const MaxReferenceOutput = 1 << 20

// rateText matches a rate as a benchmark prints it: a number followed by "/s", optionally with a
// unit between ("4,312 calls/s", "1720.5 ops/s", "12.3k req/s" is not read: no suffixes).
var rateText = regexp.MustCompile(`(?i)(\d[\d,_]*(?:\.\d+)?)\s*(?:calls?|ops|operations|requests|req|tx|transactions)?\s*/\s*s(?:ec)?\b`)

// ParseRate reads the rate a reference benchmark printed: the last "N …/s" in out (N may have
// thousands separators: "4,312 calls/s"), or, failing that, a last non-empty line that is one
// number alone. It refuses output with neither, and a rate that is not above 0.
func ParseRate(out []byte) (float64, error) {
	text := string(out)
	var num string
	if m := rateText.FindAllStringSubmatch(text, -1); len(m) > 0 {
		num = m[len(m)-1][1]
	} else {
		lines := strings.Split(strings.TrimSpace(text), "\n")
		num = strings.TrimSpace(lines[len(lines)-1])
	}
	v, err := strconv.ParseFloat(strings.NewReplacer(",", "", "_", "").Replace(num), 64)
	if err != nil {
		return 0, errors.New(`no rate in its output: want a line with "N calls/s" (or "N ops/s", "N/s"), or a last line that is a number`)
	}
	if v <= 0 {
		return 0, fmt.Errorf("rate %v: want a rate above 0", v)
	}
	return v, nil
}

// ReferenceRun is one run of a reference command.
type ReferenceRun struct {
	CallsPerSec float64 `json:"calls_per_sec"`
	Seconds     float64 `json:"seconds"` // its wall time
}

// RunReference runs command with sh -c, bounded by timeout, and returns the rate it printed
// (ParseRate). A command that fails or times out is an error naming its exit and the end of
// what it wrote to stderr.
func RunReference(ctx context.Context, command string, timeout time.Duration) (ReferenceRun, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	ownGroup(cmd)
	start := time.Now()
	err := cmd.Run()
	run := ReferenceRun{Seconds: time.Since(start).Seconds()}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %v", timeout)
		}
		return run, fmt.Errorf("reference %q: %w%s", command, err, stderrTail(stderr.Bytes()))
	}
	run.CallsPerSec, err = ParseRate(stdout.Bytes())
	if err != nil {
		return run, fmt.Errorf("reference %q: %w", command, err)
	}
	return run, nil
}

// stderrTail is the last few hundred bytes a command wrote to stderr, for its error.
func stderrTail(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	if len(b) > 400 {
		b = b[len(b)-400:]
	}
	return ": stderr: " + strconv.Quote(string(b))
}

// capped is a writer that keeps the last MaxReferenceOutput bytes written to it.
type capped struct{ buf []byte }

func (c *capped) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	if over := len(c.buf) - MaxReferenceOutput; over > 0 {
		c.buf = append(c.buf[:0], c.buf[over:]...)
	}
	return len(p), nil
}

func (c *capped) Bytes() []byte { return c.buf }

// Median returns the median of xs (the lower middle one of an even count), 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[(len(s)-1)/2]
}
