//go:build campaign && unix

package campaign

// What the campaign's tests (crash matrix, soak, limits) share to start driver processes. It is
// built with them, under the campaign tag, so an untagged build carries no code only they use.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/latchkit/latch/internal/testdb"
)

// backend is one store the campaign runs against.
type backend struct {
	name string
	url  func(t *testing.T, dir string) string
}

var backends = []backend{
	{"sqlite", func(t *testing.T, dir string) string { return "sqlite:" + filepath.Join(dir, "state.db") }},
	{"postgres", postgresURL},
}

// postgresURL returns a URL naming a fresh schema on the test server (dropped at cleanup), or
// skips when no server is configured (fails under LATCH_REQUIRE_POSTGRES=1).
func postgresURL(t *testing.T, _ string) string { return testdb.PostgresURL(t, "campaign") }

// command returns the command that re-executes the running test binary as the driver spec.
func (c *childSpec) command(ctx context.Context) (*exec.Cmd, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	return cmd, nil
}

// runChild runs a driver process to its end and returns its stdout, its exit state and its
// stderr.
func runChild(ctx context.Context, t *testing.T, spec *childSpec) ([]byte, *os.ProcessState, string) {
	t.Helper()
	cmd, err := spec.command(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s driver: %v", spec.Role, err)
	}
	_ = cmd.Wait() // the exit state is judged by the caller
	return stdout.Bytes(), cmd.ProcessState, stderr.String()
}

// add sums the reports of several soak drivers.
func (s *SoakStats) add(o SoakStats) {
	s.Calls += o.Calls
	for k, v := range o.Outcomes {
		s.Outcomes[k] += v
	}
	for k, v := range o.Injected {
		s.Injected[k] += v
	}
	s.Unexpected = append(s.Unexpected, o.Unexpected...)
}
