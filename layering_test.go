package latch_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// layering lists, per package of the module, the packages it must never compile in, however
// indirectly, and why. A pattern is an import path, or a path followed by /... for it and every
// package below it. A new rule is a new row.
var layering = []struct {
	pkg    string   // as go list takes it
	forbid []string // import path patterns
	why    string
}{
	{
		pkg:    "github.com/latchkit/latch",
		forbid: []string{"github.com/jackc/pgx/..."},
		why:    "a program that imports latch links the SQLite store alone; the Postgres store (and pgx) is one blank import away",
	},
	{
		pkg:    "github.com/latchkit/latch/gateway",
		forbid: []string{"github.com/latchkit/latch/server/...", "github.com/latchkit/latch/metrics", "github.com/prometheus/..."},
		why:    "the gateway checks credentials with package auth: it links no console, HTTP API or metrics",
	},
	{
		pkg:    "github.com/latchkit/latch/mcpop",
		forbid: []string{"github.com/latchkit/latch/server/...", "github.com/latchkit/latch/metrics", "github.com/prometheus/..."},
		why:    "the operator MCP server checks credentials with package auth: it links no console, HTTP API or metrics",
	},
	{
		pkg:    "github.com/latchkit/latch/mcpwire",
		forbid: []string{"github.com/modelcontextprotocol/...", "github.com/latchkit/latch/gateway", "github.com/latchkit/latch/server/..."},
		why:    "the MCP refusal mapping is shared by the gateway and the in-process middlewares of every MCP SDK: it links none of them",
	},
	{
		pkg:    "github.com/latchkit/latch/auth",
		forbid: []string{"github.com/latchkit/latch/server/...", "github.com/latchkit/latch/gateway", "github.com/latchkit/latch/mcpop", "github.com/prometheus/..."},
		why:    "authentication is a leaf the servers share, below all of them",
	},
	{
		pkg:    "github.com/latchkit/latch/interrupt",
		forbid: []string{"github.com/latchkit/latch/server/...", "github.com/latchkit/latch/gateway", "github.com/latchkit/latch/mcpop", "github.com/latchkit/latch/metrics", "github.com/prometheus/..."},
		why:    "the interrupt contract is what every framework adapter imports: it links the guard and nothing above it",
	},
	{
		pkg:    "github.com/latchkit/latch/latchtest",
		forbid: []string{"github.com/latchkit/latch/server/...", "github.com/latchkit/latch/gateway", "github.com/latchkit/latch/mcpop", "github.com/latchkit/latch/metrics", "github.com/prometheus/...", "github.com/jackc/pgx/..."},
		why:    "the conformance kit is what a third-party adapter's tests import: the guard and the policy, nothing above them",
	},
	{
		pkg:    "github.com/latchkit/latch/canon",
		forbid: []string{"github.com/latchkit/latch/..."},
		why:    "the canonical form is the lowest leaf: it imports nothing of latch",
	},
	{
		pkg:    "github.com/latchkit/latch/receipt",
		forbid: []string{"github.com/latchkit/latch", "github.com/latchkit/latch/store/...", "github.com/latchkit/latch/policy", "github.com/latchkit/latch/authority"},
		why:    "receipts are a pure leaf over canon: a verifier of a chain needs nothing else",
	},
	{
		pkg:    "github.com/latchkit/latch/policy",
		forbid: []string{"github.com/latchkit/latch", "github.com/latchkit/latch/store/...", "github.com/latchkit/latch/receipt", "github.com/latchkit/latch/authority"},
		why:    "the policy is a pure leaf over canon",
	},
	{
		pkg:    "github.com/latchkit/latch/authority",
		forbid: []string{"github.com/latchkit/latch", "github.com/latchkit/latch/store/...", "github.com/latchkit/latch/receipt"},
		why:    "authority is a pure leaf over canon and policy",
	},
	{
		pkg:    "github.com/latchkit/latch/store",
		forbid: []string{"github.com/latchkit/latch", "github.com/latchkit/latch/store/sqlite", "github.com/latchkit/latch/store/postgres", "github.com/jackc/pgx/...", "modernc.org/..."},
		why:    "the store seam is what backends import: it knows none of them, and not the root above it",
	},
	{
		pkg:    "github.com/latchkit/latch/toolcall",
		forbid: []string{"github.com/latchkit/latch/server/...", "github.com/latchkit/latch/gateway", "github.com/latchkit/latch/mcpop", "github.com/latchkit/latch/metrics", "github.com/prometheus/...", "github.com/modelcontextprotocol/...", "github.com/jackc/pgx/..."},
		why:    "the tool-call helpers are what an agent built on a model SDK links: the guard and nothing of latch's servers, MCP or Postgres",
	},
	{
		pkg:    "github.com/latchkit/latch/scan",
		forbid: []string{"github.com/latchkit/latch", "github.com/latchkit/latch/store/...", "modernc.org/...", "github.com/jackc/pgx/..."},
		why:    "the scan analyzer is loaded into go vet and golangci-lint: it links the analysis framework, no store",
	},
}

// matches reports whether the import path dep matches pattern (a path, or path/... for it and
// everything below it).
func matches(dep, pattern string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return dep == prefix || strings.HasPrefix(dep, prefix+"/")
	}
	return dep == pattern
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
				for _, pattern := range rule.forbid {
					if dep != rule.pkg && matches(dep, pattern) {
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
