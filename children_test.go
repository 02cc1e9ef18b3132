package latch_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// children are the programs this test binary runs as, instead of its tests, when started by a
// cross-process test: the environment variable naming one carries its JSON spec, and TestMain
// runs it and exits. Each test file registers its own in an init function.
var children = map[string]func(spec string) error{}

// runChild runs the child the environment names, if it names one, and exits; it returns when
// the process is a test run.
func runChild() {
	for env, child := range children {
		spec := os.Getenv(env)
		if spec == "" {
			continue
		}
		if err := child(spec); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", env, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// startChildren starts n OS processes of this test binary, each running the child registered
// under env with spec(i) as its spec, and returns them with their standard outputs. A test that
// fails logs each process's standard error.
func startChildren(t *testing.T, env string, n int, spec func(i int) any) ([]*exec.Cmd, []*strings.Builder) {
	t.Helper()
	cmds, outs := make([]*exec.Cmd, n), make([]*strings.Builder, n)
	for i := range n {
		b, err := json.Marshal(spec(i))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), env+"="+string(b))
		out, errOut := &strings.Builder{}, &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill() // a process a failed test left waiting
			if t.Failed() && errOut.Len() > 0 {
				t.Logf("process %d stderr:\n%s", i, errOut)
			}
		})
		cmds[i], outs[i] = cmd, out
	}
	return cmds, outs
}

// waitChildren waits for every process startChildren started, failing the test on the first
// that did not exit 0, and returns the lines each wrote to its standard output.
func waitChildren(t *testing.T, cmds []*exec.Cmd, outs []*strings.Builder) [][]string {
	t.Helper()
	lines := make([][]string, len(cmds))
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v\nstdout:\n%s", i, err, outs[i])
		}
		if s := strings.TrimSpace(outs[i].String()); s != "" {
			lines[i] = strings.Split(s, "\n")
		}
	}
	return lines
}
