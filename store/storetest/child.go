package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// childEnv names the environment variable that makes a re-executed test binary a racer. Its
// value is the JSON of a childSpec: the role, the store URL, the shared directory, the key.
const childEnv = "LATCH_STORETEST_CHILD"

// roleReserve reserves Key (with ApprovalID and Charges, if set) and, when it wins, "executes".
const roleReserve = "reserve"

// Roles of a prune racing writers: roleCommit reserves Key and records it committed, then does
// the same for Key-2 … Key-5 (a writer appending receipts); rolePrune prunes below the newest
// checkpoint at or below seq Before.
const (
	roleCommit = "commit"
	rolePrune  = "prune"
)

// raceTimeout bounds a process race from the first start to the last exit.
const raceTimeout = 2 * time.Minute

// childSpec is what one racer process is told.
type childSpec struct {
	Role       string `json:"role"`
	URL        string `json:"url"`
	Dir        string `json:"dir"`  // shared: ready-NAME, go, marker-NAME, result-NAME
	Name       string `json:"name"` // unique among the racers
	Key        string `json:"key"`
	ApprovalID string `json:"approval_id,omitempty"`
	ActionHash string `json:"action_hash"`
	Executed   string `json:"executed"` // created O_EXCL by a winner: a second creation fails
	Now        int64  `json:"now"`      // the injected clock, unix nanoseconds
	Before     int64  `json:"before,omitempty"`
	// Charges are the budget charges a reserve racer's reservation makes.
	Charges []store.Charge `json:"charges,omitempty"`
}

// Child must be the first call in TestMain of a backend's test package. When the test binary was
// re-executed by the suite as a racer (an environment variable says so), it performs that role and
// exits the process; otherwise it returns at once.
func Child(b Backend) {
	raw, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "storetest child: %s: %v\n", childEnv, err)
		os.Exit(2)
	}
	if err := spec.run(b); err != nil {
		fmt.Fprintf(os.Stderr, "storetest child %s: %v\n", spec.Name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func (c childSpec) path(name string) string { return filepath.Join(c.Dir, name) }

func (c childSpec) run(b Backend) error {
	if c.Role != roleReserve && c.Role != roleCommit && c.Role != rolePrune {
		return fmt.Errorf("unknown role %q", c.Role)
	}
	ctx, cancel := context.WithTimeout(context.Background(), raceTimeout)
	defer cancel()
	st, err := b.Open(ctx, c.URL)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := os.WriteFile(c.path("ready-"+c.Name), nil, 0o600); err != nil {
		return err
	}
	if err := waitFor(ctx, c.path("go")); err != nil {
		return err
	}

	now := time.Unix(0, c.Now).UTC()
	switch c.Role {
	case roleCommit:
		for i := 1; i <= 5; i++ {
			k := c.Key
			if i > 1 {
				k = fmt.Sprintf("%s-%d", c.Key, i)
			}
			cl := newCall(k)
			res, err := st.Reserve(ctx, cl.reserve(now))
			if err != nil {
				return err
			}
			if !res.Reserved {
				return fmt.Errorf("reserve %s refused: %+v", k, res.Refusal)
			}
			if _, err := st.Record(ctx, cl.record(now.Add(time.Second), 1, store.Committed)); err != nil {
				return err
			}
		}
		return os.WriteFile(c.path("result-"+c.Name), []byte("committed"), 0o600)
	case rolePrune:
		rs, err := store.Retention(st)
		if err != nil {
			return err
		}
		res, err := rs.Prune(ctx, &store.PruneRequest{Now: now, By: "cli:ops", BeforeSeq: c.Before})
		if err != nil {
			return err
		}
		return os.WriteFile(c.path("result-"+c.Name), []byte(fmt.Sprintf("pruned %d", res.Receipts)), 0o600)
	}
	call := call{ActionID: newID("act_"), Hash: c.ActionHash, Key: c.Key, ApprovalID: c.ApprovalID}
	req := call.reserve(now)
	req.Charges = c.Charges
	res, err := st.Reserve(ctx, req)
	if err != nil {
		return err
	}
	if !res.Reserved {
		outcome := "refused "
		if res.Refusal.Approval {
			outcome += "approval "
		}
		return os.WriteFile(c.path("result-"+c.Name), []byte(outcome+res.Refusal.Reason), 0o600)
	}
	// The marker first: a second winner is counted even though its execution below fails.
	if err := os.WriteFile(c.path("marker-"+c.Name), []byte(call.ActionID), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("result-"+c.Name), []byte("reserved"), 0o600); err != nil {
		return err
	}
	f, err := os.OpenFile(c.Executed, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("execute %s: %w", c.Key, err)
	}
	if _, err := f.WriteString(call.ActionID); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// waitFor waits for a file to appear. Racers poll so that they leave the starting line within a
// millisecond of each other.
func waitFor(ctx context.Context, path string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", path, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// raceOutcome is what the racers of one race left behind.
type raceOutcome struct {
	markers  map[string]string // racer name → action id it reserved with
	outcomes map[string]string // racer name → "reserved", "refused in_progress", "refused approval consumed"…
	executed []string          // the executed files that exist
}

// runChildren starts one racer process per spec, waits until every one has opened the store,
// releases them together and collects what they left. Every spec shares one Dir.
func runChildren(t *testing.T, specs []childSpec) raceOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), raceTimeout)
	defer cancel()
	dir := specs[0].Dir
	type exit struct {
		name   string
		err    error
		output string
	}
	exits := make(chan exit, len(specs))
	for _, s := range specs {
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start racer %s: %v", s.Name, err)
		}
		go func() {
			err := cmd.Wait()
			exits <- exit{s.Name, err, out.String()}
		}()
	}
	// Wait until every racer has opened the store, so that they race each other and not process
	// start-up. A racer that exits before the start has failed.
	for countPrefix(t, dir, "ready-") < len(specs) {
		select {
		case e := <-exits:
			cancel() // kills the others
			for range len(specs) - 1 {
				<-exits
			}
			t.Fatalf("racer %s exited before the race: %v\n%s", e.name, e.err, e.output)
		case <-ctx.Done():
			for range specs {
				<-exits
			}
			t.Fatalf("racers not ready: %v", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for range specs {
		if e := <-exits; e.err != nil {
			t.Errorf("racer %s: %v\n%s", e.name, e.err, e.output)
		}
	}

	out := raceOutcome{markers: map[string]string{}, outcomes: map[string]string{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range entries {
		name := de.Name()
		read := func() string {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		switch {
		case strings.HasPrefix(name, "marker-"):
			out.markers[strings.TrimPrefix(name, "marker-")] = read()
		case strings.HasPrefix(name, "result-"):
			out.outcomes[strings.TrimPrefix(name, "result-")] = read()
		}
	}
	for _, s := range specs {
		if _, err := os.Stat(s.Executed); err == nil {
			if !slices.Contains(out.executed, s.Executed) {
				out.executed = append(out.executed, s.Executed)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if len(out.outcomes) != len(specs) {
		t.Errorf("%d of %d racers reported an outcome: %v", len(out.outcomes), len(specs), out.outcomes)
	}
	return out
}

func countPrefix(t *testing.T, dir, prefix string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			n++
		}
	}
	return n
}
