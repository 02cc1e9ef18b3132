package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/cli"
	"github.com/latchkit/latch/internal/testdb"
)

// TestBenchPrefill: `latch bench --prefill N` grows the named store to N receipts, measures
// calls on an empty store and on the filled one, verifies the chain and times the operator's
// reads; and a bad N, or --prefill beside another benchmark, is refused before anything is
// written, with an error naming the flag.
func TestBenchPrefill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := func(string) string { return "" }
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), []string{"bench", "--prefill", "2500", "--workers", "2", "--runs", "1", "--duration", "150ms",
		"--store", "sqlite:" + dir + "/p.db?synchronous=normal", "--json"}, &stdout, &stderr, env)
	if code != cli.ExitOK {
		t.Fatalf("latch bench --prefill = %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	var rep struct {
		Receipts int64 `json:"receipts"`
		Filled   int64 `json:"filled"`
		Calls    []struct {
			Workers int     `json:"workers"`
			Ratio   float64 `json:"ratio"`
		} `json:"calls"`
		Verify struct {
			OK       bool  `json:"ok"`
			Receipts int64 `json:"receipts"`
		} `json:"verify"`
		Reads []struct {
			Name string `json:"name"`
			Runs int    `json:"runs"`
		} `json:"reads"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json output %q: %v", &stdout, err)
	}
	if rep.Filled < 2500 || rep.Receipts < rep.Filled || !rep.Verify.OK || rep.Verify.Receipts != rep.Receipts {
		t.Errorf("report = %+v; want at least 2500 receipts filled, all verified", rep)
	}
	if len(rep.Calls) != 2 || rep.Calls[0].Workers != 1 || rep.Calls[1].Workers != 2 || rep.Calls[0].Ratio <= 0 || rep.Calls[1].Ratio <= 0 {
		t.Errorf("calls = %+v; want 1 and 2 workers, each with a ratio", rep.Calls)
	}
	if len(rep.Reads) != 7 {
		t.Errorf("reads = %+v; want 7", rep.Reads)
	}

	// latch stats opens the store read-only and keeps the tally of the chain through a writable
	// open of its own when it counted enough receipts beyond the tally kept: the next count
	// reads only what was appended since, and counts the same.
	u := "sqlite:" + dir + "/p.db"
	raw := testdb.OpenRaw(t, u)
	raw.Exec(`DELETE FROM receipt_tally`)
	stats := func() string {
		t.Helper()
		stdout.Reset()
		stderr.Reset()
		if code := cli.Main(t.Context(), []string{"stats", "--store", u, "--json"}, &stdout, &stderr, env); code != cli.ExitOK {
			t.Fatalf("latch stats = %d\n%s", code, &stderr)
		}
		var out map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		delete(out, "until")
		b, _ := json.Marshal(out)
		return string(b)
	}
	first := stats()
	var through, last int64
	raw.Query(`SELECT (SELECT through_seq FROM receipt_tally WHERE id = 1), (SELECT max(seq) FROM receipts)`, []any{&through, &last})
	if through != last {
		t.Errorf("after latch stats the tally kept counts through seq %d, want the chain's last, %d", through, last)
	}
	if again := stats(); again != first {
		t.Errorf("latch stats from the tally kept = %s, want what it counted first, %s", again, first)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--prefill", "-5"}, "--prefill -5: want a number of receipts, at least 1"},
		{[]string{"--prefill", "0"}, "--prefill 0: want a number of receipts, at least 1"},
		{[]string{"--prefill", "1m"}, `invalid argument "1m" for "--prefill"`},
		{[]string{"--prefill", "100", "--receipts", "100"}, "--prefill is a benchmark of its own"},
		{[]string{"--prefill", "100", "--runs", "0"}, "--runs 0"},
		{[]string{"--prefill", "100", "--duration", "0s"}, "--duration 0s"},
	} {
		stdout.Reset()
		stderr.Reset()
		args := append([]string{"bench", "--store", "sqlite:" + dir + "/bad.db"}, tc.args...)
		code := cli.Main(t.Context(), args, &stdout, &stderr, env)
		if code != cli.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("latch %s = %d, stderr %q; want a usage error containing %q", strings.Join(args, " "), code, &stderr, tc.want)
		}
	}
	if _, err := os.Stat(dir + "/bad.db"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused --prefill left a store behind: %v", err)
	}
}
