package main_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/scanmod"
)

// TestGoVetVettool builds latch-vet and runs `go vet -vettool` with it on the example module,
// as a user would: the unprotected calls are reported at their positions, the protected ones
// are not, and vet fails. It runs once with the configuration found beside the packages and
// once with -config naming it.
func TestGoVetVettool(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary and runs go vet")
	}
	bin := filepath.Join(t.TempDir(), "latch-vet")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := scanmod.Write(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"found config", []string{"vet", "-vettool=" + bin, "./..."}},
		{"-config", []string{"vet", "-vettool=" + bin, "-config=" + filepath.Join(dir, "latch.scan.yaml"), "./..."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("go", tc.args...)
			cmd.Dir, cmd.Env = dir, scanmod.Env()
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if err == nil || !errorAs(err, &ee) {
				t.Fatalf("go vet: err = %v, want a failing exit\n%s", err, out)
			}
			got := diagnostics(string(out))
			want := append([]string{scanmod.WantTests}, scanmod.Want...) // vet vets the tests too
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("go vet reported:\n%s\nwant:\n%s\nfull output:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), out)
			}
		})
	}
	// A package with nothing to report passes vet.
	cmd := exec.Command("go", "vet", "-vettool="+bin, "./pay")
	cmd.Dir, cmd.Env = dir, scanmod.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("go vet ./pay: %v\n%s", err, out)
	}
}

// diagnostics are vet's report lines, trimmed to the part Want holds, sorted.
func diagnostics(out string) []string {
	var got []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "./")
		if i := strings.Index(line, ": unprotected call"); i >= 0 {
			// Keep the message up to the explanation that follows the callee.
			if j := strings.Index(line, ": not inside"); j > i {
				line = line[:j]
			}
			got = append(got, line)
		}
	}
	slices.Sort(got)
	return got
}

func errorAs(err error, target **exec.ExitError) bool {
	ee, ok := err.(*exec.ExitError)
	if ok {
		*target = ee
	}
	return ok
}
