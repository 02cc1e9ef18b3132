package latchriver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/testdb"
)

// TestExampleProgram builds ./example and runs it as a user would, on a fresh schema of the test
// Postgres: it exits 0 only if each invoice was charged once.
func TestExampleProgram(t *testing.T) {
	t.Parallel()
	dbURL := testdb.PostgresURL(t, "latchriver_example")
	bin := filepath.Join(t.TempDir(), "example")
	// go test puts its own GOROOT/bin first in $PATH, so "go" is the toolchain running the test.
	if out, err := exec.Command("go", "build", "-o", bin, "./example").CombinedOutput(); err != nil {
		t.Fatalf("go build ./example: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example: %v\n%s", err, out)
	}
	for _, want := range []string{"processor charges: inv_1=1 inv_2=1", `effect "charge:inv_2" is ambiguous`, "retry of that job:               job 3 cancelled"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("example output lacks %q:\n%s", want, out)
		}
	}
}
