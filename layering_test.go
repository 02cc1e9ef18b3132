package latch_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// layering lists, per package of the module, the packages it must never compile in, however
// indirectly, and why. A new rule is a new row.
var layering = []struct {
	pkg    string   // as go list takes it
	forbid []string // import path prefixes
	why    string
}{
	{
		pkg:    "github.com/latchkit/latch",
		forbid: []string{"github.com/jackc/pgx"},
		why:    "a program that imports latch links the SQLite store alone; the Postgres store (and pgx) is one blank import away",
	},
}

// TestLayering runs go list -deps on each package of layering and refuses a forbidden
// dependency, naming the packages that import it.
func TestLayering(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	for _, rule := range layering {
		t.Run(rule.pkg, func(t *testing.T) {
			t.Parallel()
			out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, rule.pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v\n%s", rule.pkg, err, stderrOf(err))
			}
			importers := map[string][]string{} // dependency → the packages that import it
			var deps []string
			for line := range strings.Lines(string(out)) {
				f := strings.Fields(line)
				if len(f) == 0 {
					continue
				}
				deps = append(deps, f[0])
				for _, imp := range f[1:] {
					importers[imp] = append(importers[imp], f[0])
				}
			}
			if len(deps) == 0 || deps[len(deps)-1] != rule.pkg {
				t.Fatalf("go list -deps %s listed %d packages, not ending with the package itself", rule.pkg, len(deps))
			}
			for _, dep := range deps {
				for _, prefix := range rule.forbid {
					if dep == prefix || strings.HasPrefix(dep, prefix+"/") {
						by := importers[dep]
						slices.Sort(by)
						t.Errorf("%s compiles %s (imported by %s): %s", rule.pkg, dep, strings.Join(by, ", "), rule.why)
					}
				}
			}
		})
	}
}

// TestRootAloneNamesThePostgresImport builds a program that imports package latch and no
// backend, and opens a Postgres URL with it: the error says which import to add.
func TestRootAloneNamesThePostgresImport(t *testing.T) {
	t.Parallel()
	bin := t.TempDir() + "/rootonly"
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./testdata/rootonly").CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/rootonly: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), bin, "postgres://u:s3cret@db.example/latch").Output()
	if err == nil {
		t.Fatalf("opening a Postgres URL without its backend succeeded:\n%s", out)
	}
	got := string(out)
	for _, want := range []string{`add import _ "github.com/latchkit/latch/store/postgres"`, "registered: sqlite", "xxxxx"} {
		if !strings.Contains(got, want) {
			t.Errorf("error = %q, want it to contain %q", got, want)
		}
	}
	if strings.Contains(got, "s3cret") {
		t.Errorf("error = %q: it shows the password", got)
	}
}

// stderrOf is what a failed command wrote to stderr, when exec kept it.
func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
