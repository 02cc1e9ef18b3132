//go:build !unix

package bench

import "os/exec"

// ownGroup leaves cmd as it is: without process groups, cancelling kills the shell only.
func ownGroup(*exec.Cmd) {}
