//go:build campaign && unix

package campaign

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/latchkit/latch"
)

// TestHardLinkedPaths holds docs/reliability.md's first limit to the facts: two driver processes
// calling the same keys on one SQLite file never run an effect twice through one path, and do
// through two hard-linked paths (SQLite's WAL and shared-memory files, and latch's lock file, are
// named after the path). If the linked case stops running anything twice, the limit is gone and
// the page must say so.
func TestHardLinkedPaths(t *testing.T) {
	for _, linked := range []bool{false, true} {
		dir := t.TempDir()
		a := filepath.Join(dir, "a.db")
		st, err := latch.OpenStore(t.Context(), "sqlite:"+a, nil)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		b := a
		if linked {
			b = filepath.Join(dir, "b.db")
			if err := os.Link(a, b); err != nil {
				t.Fatal(err)
			}
		}
		var procs []*os.Process
		for _, p := range []string{a, b} {
			spec := &childSpec{Role: roleLoop, URL: "sqlite:" + p, Dir: dir, Prefix: "k", Gate: "go"}
			cmd, err := spec.command(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			procs = append(procs, cmd.Process)
			t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
			// Each driver announces an open store; under load the second can take a while, and
			// the window below starts only once both are calling.
			waitReady(t, spec)
			_ = os.Remove(spec.path("ready-k"))
		}
		// Both start on k-0 together: a driver that started first would run ahead of the other,
		// which would then find every key it reaches committed long ago and never race it.
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		// One path: both drivers call for 3 s and nothing may run twice. Linked paths: they call
		// until something runs twice, for up to a minute (a loaded machine can take far longer
		// than an idle one to interleave two processes).
		window := 3 * time.Second
		if linked {
			window = time.Minute
		}
		var execs []Execution
		var ran map[string]int // runs per key, counted afresh on each read
		var doubles int
		for deadline := time.Now().Add(window); ; time.Sleep(100 * time.Millisecond) {
			var err error
			if execs, err = ReadExecutions(filepath.Join(dir, executionsFile)); err != nil {
				t.Fatal(err)
			}
			ran, doubles = map[string]int{}, 0
			for _, e := range execs {
				if ran[e.Key]++; ran[e.Key] == 2 {
					doubles++
				}
			}
			if time.Now().After(deadline) || (linked && doubles > 0) {
				break
			}
		}
		for _, p := range procs {
			_ = p.Kill()
			_, _ = p.Wait()
		}
		t.Logf("hard-linked paths %v: %d executions on %d keys, %d run twice", linked, len(execs), len(ran), doubles)
		switch {
		case len(execs) == 0:
			t.Fatalf("hard-linked paths %v: nothing ran", linked)
		case !linked && doubles > 0:
			t.Errorf("one path: %d effects ran twice", doubles)
		case linked && doubles == 0:
			t.Errorf("two hard-linked paths: nothing ran twice in a minute; docs/reliability.md says a hard link defeats SQLite's locking")
		}
	}
}

// waitReady waits for a loop driver to have its store open.
func waitReady(t *testing.T, spec *childSpec) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(spec.path("ready-" + spec.Prefix)); err == nil {
			return
		}
	}
	t.Fatal("loop driver not ready after a minute")
}
