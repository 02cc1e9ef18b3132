//go:build unix

package bench

import (
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in a process group of its own and makes cancelling it kill the whole group:
// a reference benchmark's children must not keep running beside latch's own runs.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
