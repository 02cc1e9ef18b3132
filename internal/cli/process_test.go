package cli_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// latchDir makes a directory holding the test binary as `latch` (TestMain runs the CLI when it
// is invoked under that name) and policy as latch.yaml, for tests that run latch as real OS
// processes; it returns the binary and the policy file.
func latchDir(t *testing.T, policy string) (bin, policyPath string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin = filepath.Join(dir, "latch")
	if err := os.Symlink(exe, bin); err != nil {
		t.Fatal(err)
	}
	policyPath = filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(policyPath, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	return bin, policyPath
}

// runLatch runs `bin args...` with env (cleanEnv() when nil) to its end and returns its stdout;
// a failure ends the test with its stderr.
func runLatch(t *testing.T, bin string, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	if env == nil {
		cmd.Env = cleanEnv()
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("latch %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// createToken runs `latch --policy policyPath token create --json args...` and returns the token.
func createToken(t *testing.T, bin string, env []string, policyPath string, args ...string) string {
	t.Helper()
	out := runLatch(t, bin, env, append([]string{"--policy", policyPath, "token", "create", "--json"}, args...)...)
	var tok struct{ Token string }
	if err := json.Unmarshal(out, &tok); err != nil || tok.Token == "" {
		t.Fatalf("token create %v: %v %s", args, err, out)
	}
	return tok.Token
}

// freeAddr is an address on 127.0.0.1 that nothing listened on a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serveProc is a `latch serve` process started by startServe.
type serveProc struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	base   string // http://ADDR
}

// startServe starts `bin args... --listen ADDR` (args name the serve command) as a real process
// with env (cleanEnv() when nil), on a free address, and waits until its /readyz answers; the
// process is killed when the test ends, if it is still running.
func startServe(t *testing.T, bin string, env []string, args ...string) *serveProc {
	t.Helper()
	addr := freeAddr(t)
	p := &serveProc{cmd: exec.Command(bin, append(args, "--listen", addr)...), stderr: &lockedBuffer{b: new(bytes.Buffer)}, base: "http://" + addr}
	p.cmd.Env = env
	if env == nil {
		p.cmd.Env = cleanEnv()
	}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	if !ready(p.base) {
		t.Fatalf("serve never became ready:\n%s", p.stderr.String())
	}
	return p
}

// ready waits up to 20 s for the /readyz of the server at base (http://ADDR) to answer.
func ready(base string) bool {
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
