//go:build unix

package upstream

import (
	"os/exec"
	"syscall"
)

// ownGroup puts a child in a process group of its own, so that stopping it
// stops what it started too (npx and uvx start the real server).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the child's group; kill says SIGKILL, else
// SIGTERM.
func signalGroup(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
}
