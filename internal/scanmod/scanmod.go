// Package scanmod writes the example module that the scan's end-to-end tests run `latch scan`
// and `go vet -vettool` on: a payment client, protected and unprotected calls of it, an allow,
// and a package that calls another's protected function directly.
package scanmod

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

//go:embed app.txtar
var app []byte

// Want are the diagnostics the example module must produce, as file:line: message prefix. The
// protected calls (billing.go's Charge and Closure), the Charge of another type and the allowed
// call must not be reported.
var Want = []string{
	"billing/billing.go:35:9: unprotected call to (*example.com/app/pay.Client).Charge (moves money)",
	"billing/billing.go:48:9: unprotected call to os/exec.Command",
	"jobs/jobs.go:11:12: unprotected call to example.com/app/billing.Charge (it makes consequential calls, (*example.com/app/pay.Client).Charge, that expect to run under latch)",
}

// WantTests is the diagnostic of the module's test file, reported when tests are scanned
// (latch scan --tests; go vet always vets them).
const WantTests = "billing/billing_test.go:11:12: unprotected call to (*example.com/app/pay.Client).Charge (moves money)"

// Write writes the module into a new temporary directory and returns it. Its go.mod requires
// latch replaced by this checkout, completed by go mod tidy from the module cache, and its
// go.sum is this checkout's, so the go command needs no network.
func Write(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	root := repoRoot(t)
	for _, f := range txtar.Parse(app).Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mod := fmt.Sprintf("module example.com/app\n\ngo 1.26.0\n\nrequire github.com/latchkit/latch v0.0.0\n\nreplace github.com/latchkit/latch => %s\n", root)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	// Complete go.mod, so that the go command needs nothing else afterwards. The module cache
	// holds what a build of latch needs, but tidy also reads the go.mod files of versions the
	// build never selects (those an older dependency requires); on a new machine the cache may
	// lack them, so tidy alone may fetch from the module proxy the environment names.
	tidy := exec.Command("go", "mod", "tidy")
	tidy.Dir, tidy.Env = dir, env(false)
	if out, err := tidy.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy in the example module: %v\n%s", err, out)
	}
	return dir
}

// Env is the environment for the go command in the module: no network, no workspace.
func Env() []string { return env(true) }

// env is the go command's environment in the module: no workspace, and no network when offline.
func env(offline bool) []string {
	var kept []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "GOWORK=") && (!offline || !strings.HasPrefix(kv, "GOPROXY=")) {
			kept = append(kept, kv)
		}
	}
	kept = append(kept, "GOFLAGS=-mod=mod", "GOWORK=off")
	if offline {
		kept = append(kept, "GOPROXY=off")
	}
	return kept
}

// repoRoot is this checkout's root, found from this file's path.
func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("scanmod: no caller information")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}
