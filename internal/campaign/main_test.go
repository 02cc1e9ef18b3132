package campaign

import (
	"bytes"
	"context"
	"github.com/latchkit/latch/internal/testdb"
	"os"
	"path/filepath"
	"testing"
)

func TestMain(m *testing.M) {
	Child()
	os.Exit(m.Run())
}

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
