//go:build campaign && unix

package campaign

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var crashRounds = flag.Int("crash.rounds", 3, "rounds of the crash matrix per step and backend")

// killedBySIGKILL reports whether a driver died of SIGKILL.
func killedBySIGKILL(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// crashExpect is what a restarted driver must see on the key after a kill at a step, and how
// many times the effect must have run in all.
var crashExpect = map[Step]struct {
	outcomes []string
	runs     int
}{
	BeforeReserve: {[]string{"committed"}, 1},                                // nothing was written: the retry runs it
	AfterReserve:  {[]string{"refused_in_progress", "refused_ambiguous"}, 0}, // held, never ran: blocked
	InExecutor:    {[]string{"refused_in_progress", "refused_ambiguous"}, 1}, // ran, unrecorded: blocked
	AfterExecute:  {[]string{"refused_in_progress", "refused_ambiguous"}, 1}, // ran, unrecorded: blocked
	AfterRecord:   {[]string{"refused_committed"}, 1},                        // recorded: a duplicate
}

// TestCrashMatrix kills a driver process with SIGKILL at each step of the pipeline, restarts one
// that repeats the call, and checks the store against the execution ledger: no effect runs twice,
// every effect that ran is committed or blocked, and the receipt chain verifies. A last phase
// kills looping drivers at random instants, mid-transaction included.
func TestCrashMatrix(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			dir := t.TempDir()
			url := b.url(t, dir)
			ctx := t.Context()
			runs := map[string]int{} // effect key → executions it must have
			for _, step := range Steps {
				for round := range *crashRounds {
					key := fmt.Sprintf("%s-%d", step, round)
					runs[EffectKey(ActionPay, key)] = crashExpect[step].runs
					crashAt(t, url, dir, step, key)
				}
			}
			for round := range *crashRounds {
				for key, n := range crashRandom(t, url, dir, round) {
					runs[key] = n
				}
			}

			rep, err := Check(ctx, url, dir+"/"+executionsFile, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", b.name, rep.Summary())
			if err := rep.Err(); err != nil {
				t.Error(err)
			}
			execs, err := ReadExecutions(dir + "/" + executionsFile)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, e := range execs {
				got[e.Key]++
			}
			for _, key := range slices.Sorted(maps.Keys(runs)) {
				if runs[key] >= 0 && got[key] != runs[key] {
					t.Errorf("%s ran %d times, want %d", key, got[key], runs[key])
				}
			}
		})
	}
}

// crashAt runs one round of the matrix: a driver killed at step on key, then a driver repeating
// the call.
func crashAt(t *testing.T, url, dir string, step Step, key string) {
	t.Helper()
	ctx := t.Context()
	spec := &childSpec{Role: roleCrash, URL: url, Dir: dir, Step: step, Keys: []string{key}}
	out, ps, stderr := runChild(ctx, t, spec)
	if !killedBySIGKILL(ps) {
		t.Fatalf("%s: the driver was not killed at %s (%s); stdout %s stderr %s", key, step, ps, out, stderr)
	}
	marker := spec.path(reachedFile(step))
	if err := os.Remove(marker); err != nil {
		t.Fatalf("%s: killed, but not at %s: %v", key, step, err)
	}
	results := retry(t, url, dir, []string{key})
	want := crashExpect[step].outcomes
	if got := results[0].Outcome; !slices.Contains(want, got) {
		t.Errorf("kill at %s, then retry %s = %s (%s), want one of %v", step, key, got, results[0].Error, want)
	}
}

// retry runs a driver that repeats the calls on keys and returns what each ended in.
func retry(t *testing.T, url, dir string, keys []string) []callResult {
	t.Helper()
	out, ps, stderr := runChild(t.Context(), t, &childSpec{Role: roleRetry, URL: url, Dir: dir, Keys: keys})
	if !ps.Success() {
		t.Fatalf("retry driver: %s: %s", ps, stderr)
	}
	var results []callResult
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var r callResult
		if err := dec.Decode(&r); err != nil {
			break
		}
		results = append(results, r)
	}
	if len(results) != len(keys) {
		t.Fatalf("retry driver answered %d calls, want %d: %s", len(results), len(keys), out)
	}
	return results
}

// crashRandom kills a driver that loops over fresh keys at a random instant (within 500 ms of
// its store being open, so inside a transaction as often as not), then retries every key it may
// have touched. It returns the executions each key must have (−1: zero or one, as the kill fell).
func crashRandom(t *testing.T, url, dir string, round int) map[string]int {
	t.Helper()
	prefix := "random" + strconv.Itoa(round)
	spec := &childSpec{Role: roleLoop, URL: url, Dir: dir, Prefix: prefix}
	cmd, err := spec.command(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(spec.path("ready-" + prefix)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("loop driver not ready after a minute: %s", stderr.String())
		}
	}
	time.Sleep(rand.N(500 * time.Millisecond))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(werr, &exit) || !killedBySIGKILL(cmd.ProcessState) {
		t.Fatalf("loop driver ended before the kill: %v: %s", werr, stderr.String())
	}
	done := strings.Count(stdout.String(), "\n") // calls answered before the kill
	keys := make([]string, done+1)               // and the one in flight
	for i := range keys {
		keys[i] = prefix + "-" + strconv.Itoa(i)
	}
	runs := map[string]int{}
	for i, r := range retry(t, url, dir, keys) {
		key := EffectKey(ActionPay, r.Key)
		switch {
		case i < done && r.Outcome != "refused_committed":
			t.Errorf("loop key %s answered before the kill, then retry = %s (%s), want refused_committed", r.Key, r.Outcome, r.Error)
		case i < done:
			runs[key] = 1
		case r.Outcome == "committed", r.Outcome == "refused_committed":
			runs[key] = 1 // the kill fell before the reservation (the retry ran it), or after the record
		case r.Outcome == "refused_in_progress", r.Outcome == "refused_ambiguous":
			runs[key] = -1 // blocked: it ran once or never, as the kill fell
		default:
			t.Errorf("loop key %s in flight at the kill, then retry = %s (%s)", r.Key, r.Outcome, r.Error)
		}
	}
	t.Logf("random kill %d: %d calls answered before the kill", round, done)
	return runs
}
