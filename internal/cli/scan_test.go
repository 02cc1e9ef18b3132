package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/scanmod"
)

// TestScanCommand runs `latch scan` on the example module: the unprotected calls are printed at
// their positions, the protected ones are not, the allow is in the summary with its reason, and
// the exit code is 1; --json says the same.
func TestScanCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a module with the go command")
	}
	dir := scanmod.Write(t)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := Main(t.Context(), args, &out, &errb, func(string) string { return "" })
		return code, out.String(), errb.String()
	}

	code, out, stderr := run("scan", "--dir", dir)
	if code != ExitRefused {
		t.Fatalf("latch scan = %d, want %d\nstdout:\n%s\nstderr:\n%s", code, ExitRefused, out, stderr)
	}
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, ": not inside"); i >= 0 {
			got = append(got, line[:i])
		}
	}
	if !slices.Equal(got, scanmod.Want) {
		t.Errorf("latch scan reported:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(scanmod.Want, "\n"))
	}
	for _, want := range []string{
		"allowed (1):\n  billing/billing.go:43:2: (*example.com/app/pay.Client).Charge at billing/billing.go:44:9: sandbox account, test mode only\n",
		"scanned 3 package(s): 3 unprotected call(s), 1 allowed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("latch scan output lacks %q:\n%s", want, out)
		}
	}
	if want := "latch scan: 3 unprotected call(s), 0 allow problem(s)\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}

	code, out, _ = run("scan", "--dir", dir, "--json", "./billing")
	if code != ExitRefused {
		t.Fatalf("latch scan --json ./billing = %d, want %d", code, ExitRefused)
	}
	var doc scanJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("latch scan --json: %v\n%s", err, out)
	}
	if doc.Config != "latch.scan.yaml" || doc.Packages != 1 || doc.Unprotected != 2 || len(doc.Diagnostics) != 2 || len(doc.Allows) != 1 {
		t.Fatalf("latch scan --json ./billing = %+v", doc)
	}
	d := doc.Diagnostics[0]
	if d.File != "billing/billing.go" || d.Line != 35 || d.Column != 9 || d.End.Line != 35 || d.End.Column != 27 || d.Category != "unprotected" {
		t.Errorf("diagnostics[0] = %+v, want billing/billing.go:35:9-35:27 unprotected", d)
	}
	if al := doc.Allows[0]; al.Reason != "sandbox account, test mode only" || al.Call.Line != 44 || al.Line != 43 {
		t.Errorf("allows[0] = %+v", al)
	}

	// --tests adds the test file's call, once: billing's files are scanned in its test variant
	// only.
	code, out, _ = run("scan", "--dir", dir, "--tests")
	got = nil
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, ": not inside"); i >= 0 {
			got = append(got, line[:i])
		}
	}
	want := append([]string{scanmod.WantTests}, scanmod.Want...)
	slices.Sort(want)
	if code != ExitRefused || !slices.Equal(got, want) {
		t.Errorf("latch scan --tests = %d, reported:\n%s\nwant:\n%s", code, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Only protected and allowed calls: nothing to report, exit 0.
	code, out, stderr = run("scan", "--dir", dir, "./pay")
	if code != ExitOK || out != "scanned 1 package(s): 0 unprotected call(s), 0 allowed\n" {
		t.Errorf("latch scan ./pay = %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}

	// A package that does not type-check is refused, not scanned blind.
	broken := filepath.Join(dir, "pay", "broken.go")
	if err := os.WriteFile(broken, []byte("package pay\n\nfunc broken() int { return \"x\" }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run("scan", "--dir", dir, "./pay")
	if code != ExitRefused || out != "" || !strings.HasPrefix(stderr, "latch scan: load packages: ") || !strings.Contains(stderr, "broken.go:3:") {
		t.Errorf("latch scan of a package that does not compile = %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
}

// TestScanCommandConfigErrors checks that a missing or bad configuration is refused, naming the
// file, line and field, before any package is loaded.
func TestScanCommandConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Main(t.Context(), []string{"scan", "--dir", dir}, &out, &errb, func(string) string { return "" })
	if code != ExitRefused || !strings.Contains(errb.String(), "no scan configuration: no latch.scan.yaml") {
		t.Errorf("latch scan without a configuration = %d, stderr %q", code, errb.String())
	}
	bad := "version: 1\ncalls:\n  - package: example.com/pay\n    func: (*Client.Charge\n"
	if err := os.WriteFile(filepath.Join(dir, "latch.scan.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	code = Main(t.Context(), []string{"scan", "--dir", dir}, &out, &errb, func(string) string { return "" })
	want := "latch scan: latch.scan.yaml:4: calls[0].func: want Name, (Type).Name or (*Type).Name, got \"(*Client.Charge\"\n"
	if code != ExitRefused || errb.String() != want {
		t.Errorf("latch scan with a bad configuration = %d, stderr %q, want %q", code, errb.String(), want)
	}
	if out.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", out.String())
	}
}
